// Prometheus text for gmlp serve (metrics.h).
#include "serve/metrics.h"

#include <cstdio>

#include "core/error.h"

namespace gmlp::serve {

namespace {

// 50 µs to 10 s, about three buckets a decade: a batch of fmnist-s takes well under a
// millisecond, one of gMLP-S/16 at 224 tenths of a second.
std::vector<double> duration_bounds() {
  return {5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string header(const std::string& name, const char* type, const std::string& help) {
  return cat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  size_t b = 0;
  while (b < bounds_.size() && seconds > bounds_[b]) ++b;
  const std::lock_guard lock(mutex_);
  ++counts_[b];
  sum_ += seconds;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  const std::lock_guard lock(mutex_);
  std::string out = header(name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= bounds_.size(); ++b) {
    cumulative += counts_[b];
    out += cat(name, "_bucket{le=\"", b < bounds_.size() ? number(bounds_[b]) : "+Inf", "\"} ", cumulative, "\n");
  }
  return out + cat(name, "_sum ", number(sum_), "\n", name, "_count ", count_, "\n");
}

Metrics::Metrics()
    : queue_seconds(duration_bounds()), compute_seconds(duration_bounds()), request_seconds(duration_bounds()) {}

void Metrics::count_request(const std::string& route, int status, double seconds) {
  request_seconds.observe(seconds);
  const std::lock_guard lock(mutex_);
  ++requests_[{route, status}];
}

std::string Metrics::render() const {
  std::string out = header("gmlp_http_requests_total", "counter", "HTTP requests answered, by route and status");
  {
    const std::lock_guard lock(mutex_);
    for (const auto& [key, n] : requests_)
      out += cat("gmlp_http_requests_total{route=\"", key.first, "\",code=\"", key.second, "\"} ", n, "\n");
  }
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += header(name, "counter", help) + cat(name, " ", v, "\n");
  };
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    out += header(name, "gauge", help) + cat(name, " ", v, "\n");
  };
  counter("gmlp_inference_request_success_total", "Inference requests run to completion", inference_success);
  counter("gmlp_inference_request_failure_total", "Inference requests that failed while running", inference_failure);
  counter("gmlp_inference_count_total",
          "Inputs (images, sequences) inferred; divided by gmlp_inference_exec_count_total: the average batch",
          inference_count);
  counter("gmlp_inference_exec_count_total", "Batches run by the inference thread", exec_count);
  counter("gmlp_requests_rejected_total", "Requests answered 429 because the queue was full (--max-queue)",
          rejected_queue_full);
  gauge("gmlp_requests_in_flight", "HTTP requests being handled now", in_flight);
  gauge("gmlp_requests_deferred", "Inference requests queued, waiting for the inference thread", deferred);
  gauge("gmlp_model_ready", "1 once the model is loaded, 0 again once the server is stopping", ready ? 1 : 0);
  out += queue_seconds.render("gmlp_inference_queue_duration_seconds",
                              "Time an inference request waited in the queue before its batch ran");
  out += compute_seconds.render("gmlp_inference_compute_duration_seconds", "Time a batch took to run");
  out += request_seconds.render("gmlp_http_request_duration_seconds",
                                "Time from a request's arrival to its answer, every route");
  return out;
}

}  // namespace gmlp::serve
