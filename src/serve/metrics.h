// gmlp serve's counters, gauges and histograms, written as Prometheus text (exposition format
// 0.0.4) for GET /metrics. The inference ones follow Triton's: inference_count counts the rows
// (images, sequences) run and exec_count the batches run, so that the average batch is their
// ratio; queue and compute time are histograms, as llama.cpp's and Triton's summaries are.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gmlp::serve {

// A histogram of durations in seconds, with fixed bucket bounds (cumulative when written).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  // "# HELP", "# TYPE" and the _bucket, _sum and _count lines.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct Metrics {
  Metrics();

  // Every HTTP request answered: its route (the pattern, e.g. "/v2/models/{name}/infer") and status.
  void count_request(const std::string& route, int status, double seconds);

  // The batcher's: one batch of `rows` rows from `requests` requests, queued and computed for so long.
  std::atomic<uint64_t> inference_success{0}, inference_failure{0};
  std::atomic<uint64_t> inference_count{0}, exec_count{0};
  std::atomic<uint64_t> rejected_queue_full{0};
  std::atomic<int64_t> in_flight{0};  // HTTP requests being handled
  std::atomic<int64_t> deferred{0};   // requests queued for the inference thread, not yet started
  std::atomic<bool> ready{false};
  Histogram queue_seconds, compute_seconds, request_seconds;

  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
};

}  // namespace gmlp::serve
