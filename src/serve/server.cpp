// gmlp serve's HTTP side (server.h): routes on cpp-httplib, each a thin handler that parses and
// validates on the HTTP thread, hands the model's work to the batcher and writes the answer.
#include "serve/server.h"

#include <httplib.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "core/threads.h"
#include "gmlp/version.h"
#include "serve/batcher.h"
#include "serve/engine.h"
#include "serve/metrics.h"
#include "serve/protocol.h"

namespace gmlp::serve {

namespace {

using Clock = std::chrono::steady_clock;
using httplib::Request;
using httplib::Response;

struct State {
  const ServerOptions& options;
  Metrics metrics;
  std::unique_ptr<Engine> engine;    // set once the checkpoint is loaded
  std::unique_ptr<Batcher> batcher;  // then this, then ready
  std::atomic<bool> ready{false};
  std::atomic<bool> stopping{false};  // SIGTERM or SIGINT came: the requests sent are still answered
  std::atomic<int64_t> events{0};     // requests begun and requests answered, ever
};

void send_json(Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void send_error(Response& res, int status, const std::string& message) {
  send_json(res, status, error_body(status, message));
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// "Authorization: Bearer KEY", compared in time that does not depend on where it differs.
bool authorized(const Request& req, const std::string& key) {
  const std::string given = req.get_header_value("Authorization");
  const std::string expected = "Bearer " + key;
  unsigned diff = given.size() != expected.size();
  for (size_t i = 0; i < expected.size(); ++i) diff |= unsigned(i < given.size() ? given[i] ^ expected[i] : 1);
  return diff == 0;
}

// The model, once loaded: 503 before.
Engine& engine(State& s) {
  if (!s.ready.load(std::memory_order_acquire)) reject(503, "the model is loading; try again when /health says ok");
  return *s.engine;
}

// The readiness routes' check: 503 while the model loads, and again once the server is stopping,
// so that a load balancer sends no more while the requests it has sent are answered.
void check_ready(State& s) {
  engine(s);
  if (s.stopping.load(std::memory_order_acquire))
    reject(503, "the server is stopping: it answers the requests already sent, then exits");
}

// The model named in the path ({name}, and {version} when given): 404 for any other.
Engine& named_model(State& s, const Request& req) {
  Engine& e = engine(s);
  const std::string name = req.matches[1];
  if (name != e.spec().name)
    reject(404, "unknown model ", json_text(name.substr(0, 64)), ": this server has \"", e.spec().name, "\"");
  if (req.matches.size() > 2 && req.matches[2].matched && req.matches[2] != "1")
    reject(404, "unknown version ", json_text(std::string(req.matches[2]).substr(0, 16)), " of model \"", e.spec().name,
           "\": it has version \"1\"");
  return e;
}

// Hands a job to the inference thread and waits for its answer; 429 when the queue is full.
void run_job(State& s, const std::shared_ptr<Job>& job) {
  std::future<void> done = job->done.get_future();
  if (!s.batcher->submit(job)) {
    ++s.metrics.rejected_queue_full;
    reject(429, "the server's queue is full (", s.options.max_queue, " requests waiting): try again later");
  }
  done.wait();
  if (job->error_status) reject(job->error_status, job->error);
}

int top_param(const Request& req, int fallback, int max) {
  for (const char* key : {"top", "top_k"})
    if (req.has_param(key)) return parse_top(req.get_param_value(key), max);
  return std::min(fallback, max);
}

void register_routes(httplib::Server& svr, State& s) {
  const ServerOptions& opt = s.options;
  // Every route: the API key (unless open), counting, timing, and errors as JSON.
  auto route = [&s, &opt](const char* label, bool open, auto fn) {
    return [&s, &opt, label, open, fn](const Request& req, Response& res) {
      const auto start = Clock::now();
      ++s.events;
      ++s.metrics.in_flight;
      try {
        if (!open && !opt.api_key.empty() && !authorized(req, opt.api_key)) {
          res.set_header("WWW-Authenticate", "Bearer");
          reject(401, "this server needs an API key: send the header 'Authorization: Bearer KEY'");
        }
        fn(req, res);
        if (res.status == -1) res.status = 200;  // httplib's "not set yet", which it would make 200
      } catch (const RequestError& e) {
        if (e.status == 429) res.set_header("Retry-After", "1");
        send_error(res, e.status, e.what());
      } catch (const std::bad_alloc&) {
        send_error(res, 503, "out of memory");
      } catch (const std::exception& e) {
        send_error(res, 500, cat("internal error: ", e.what()));
      }
      --s.metrics.in_flight;
      ++s.events;
      s.metrics.count_request(label, res.status, std::chrono::duration<double>(Clock::now() - start).count());
    };
  };

  // --- health and metadata (KServe v2, llama.cpp's /health) ---
  svr.Get("/health", route("/health", true, [&s](const Request&, Response& res) {
            check_ready(s);
            send_json(res, 200, R"({"status":"ok"})");
          }));
  svr.Get("/v2/health/live", route("/v2/health/live", true,
                                   [](const Request&, Response& res) { send_json(res, 200, R"({"live":true})"); }));
  svr.Get("/v2/health/ready", route("/v2/health/ready", true, [&s](const Request&, Response& res) {
            check_ready(s);
            send_json(res, 200, R"({"ready":true})");
          }));
  svr.Get("/v2", route("/v2", false, [](const Request&, Response& res) {
            send_json(res, 200,
                      json_text({{"name", "gmlp"}, {"version", GMLP_VERSION}, {"extensions", {"binary_tensor_data"}}}));
          }));
  const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  svr.Get(model, route("/v2/models/{name}", false, [&s](const Request& req, Response& res) {
            send_json(res, 200, json_text(model_metadata(named_model(s, req).spec())));
          }));
  svr.Get(model + "/ready", route("/v2/models/{name}/ready", false, [&s](const Request& req, Response& res) {
            named_model(s, req);
            check_ready(s);
            send_json(res, 200, R"({"ready":true})");
          }));
  svr.Get("/metrics", route("/metrics", false, [&s](const Request&, Response& res) {
            res.set_content(s.metrics.render(), "text/plain; version=0.0.4");
          }));
  svr.Get("/openapi.json", route("/openapi.json", false, [](const Request&, Response& res) {
            res.set_content(std::string(openapi_json()), "application/json");
          }));

  // --- KServe v2 inference ---
  svr.Post(model + "/infer", route("/v2/models/{name}/infer", false, [&s, &opt](const Request& req, Response& res) {
             Engine& e = named_model(s, req);
             size_t json_size = kNoBinary;
             if (req.has_header("Inference-Header-Content-Length")) {
               const std::string v = req.get_header_value("Inference-Header-Content-Length");
               if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
                 reject(400, "Inference-Header-Content-Length: expected a byte count, found ",
                        json_text(v.substr(0, 32)));
               json_size = std::stoull(v);
             }
             InferRequest request = parse_infer(req.body, json_size, e.spec(), opt.max_batch);
             auto job = std::make_shared<Job>();
             job->op = Job::Op::logits;
             job->rows = request.rows;
             job->tokens = request.tokens;
             job->pixels = std::move(request.pixels);
             job->ids = std::move(request.ids);
             run_job(s, job);
             const std::string body = infer_response(e.spec(), request, job->logits, &json_size);
             if (json_size != kNoBinary) {
               res.set_header("Inference-Header-Content-Length", std::to_string(json_size));
               res.status = 200;
               res.set_content(body, "application/octet-stream");
             } else {
               send_json(res, 200, body);
             }
           }));

  // --- the /v1 routes: an image's bytes, texts as Hugging Face's pipelines take them ---
  svr.Post("/v1/classify", route("/v1/classify", false, [&s](const Request& req, Response& res) {
             Engine& e = engine(s);
             if (e.spec().task != Task::image)
               reject(404, "the model \"", e.spec().name, "\" classifies texts: use /v1/classify-text");
             const int top = top_param(req, 5, e.spec().num_classes);
             const std::string& bytes =
                 req.is_multipart_form_data() && !req.files.empty() ? req.files.begin()->second.content : req.body;
             auto job = std::make_shared<Job>();
             job->pixels = e.image_input(bytes);
             run_job(s, job);
             send_json(res, 200, json_text({{"predictions", e.top_classes(job->logits.data(), top)}}));
           }));
  auto text_route = [&s, &opt](Job::Op op) {
    return [&s, &opt, op](const Request& req, Response& res) {
      Engine& e = engine(s);
      TextRequest r = parse_text_request(req.body, 5, size_t(opt.max_batch));
      if (req.has_param("top") || req.has_param("top_k")) r.top = top_param(req, 5, 1000000);
      e.check_texts(r, op);
      auto job = std::make_shared<Job>();
      job->op = op;
      job->rows = int64_t(r.texts.size());
      job->texts = std::move(r.texts);
      job->pairs = std::move(r.pairs);
      job->top = r.top;
      run_job(s, job);
      send_json(res, 200, json_text(r.list ? job->result : job->result[0]));
    };
  };
  svr.Post("/v1/fill-mask", route("/v1/fill-mask", false, text_route(Job::Op::fill_mask)));
  svr.Post("/v1/classify-text", route("/v1/classify-text", false, text_route(Job::Op::classify_text)));
  svr.Post("/v1/tokenize", route("/v1/tokenize", false, [&s, &opt](const Request& req, Response& res) {
             Engine& e = engine(s);
             const TextRequest r = parse_text_request(req.body, 5, size_t(opt.max_batch));
             nlohmann::json ids = nlohmann::json::array();
             for (size_t i = 0; i < r.texts.size(); ++i)
               ids.push_back(e.tokens(r.texts[i], r.pairs.empty() ? std::string() : r.pairs[i]));
             send_json(res, 200, json_text({{"input_ids", r.list ? ids : ids[0]}}));
           }));

  // What no route answered (404, a body over the limit: 413, a request httplib could not read:
  // 400) gets the same JSON error.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([&s, &opt](const Request& req, Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string what = json_text(req.method + " " + req.path.substr(0, 200));
    const std::string message =
        res.status == 404   ? cat("no route ", what, ": see GET /openapi.json for the routes")
        : res.status == 413 ? cat("the request body is larger than the server's limit of ", opt.max_body_bytes,
                                  " bytes (--max-body-mib)")
                            : cat("cannot read the request ", what,
                                  ": malformed HTTP (a body needs a Content-Length or chunked transfer encoding)");
    send_error(res, res.status, message);
    s.metrics.count_request("(no route)", res.status, 0);
    return httplib::Server::HandlerResponse::Handled;
  }));
}

}  // namespace

int serve(const ServerOptions& opt) {
  // SIGTERM and SIGINT are taken by sigwait below: blocked before any thread starts (httplib's,
  // the batcher's, OpenMP's), so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  State s{opt, {}, nullptr, nullptr};
  httplib::Server svr;
  const size_t http_threads = size_t(std::max(1, opt.http_threads));
  svr.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  svr.set_payload_max_length(opt.max_body_bytes);
  svr.set_keep_alive_max_count(1000);
  svr.set_keep_alive_timeout(3);  // an idle connection holds up a stop for at most this
  svr.set_tcp_nodelay(true);      // else Nagle and delayed ACKs add 40 ms to a small answer
  register_routes(svr, s);
  const int port = opt.port == 0                          ? svr.bind_to_any_port(opt.host)
                   : svr.bind_to_port(opt.host, opt.port) ? opt.port
                                                          : -1;
  if (port < 0) fail("failed to listen on ", opt.host, ":", opt.port, ": the address is in use or not this machine's");
  std::fprintf(stderr, "gmlp: listening on http://%s:%d (loading '%s')\n", opt.host.c_str(), port,
               opt.checkpoint.c_str());
  std::thread listener([&svr] { svr.listen_after_bind(); });

  try {
    s.engine = std::make_unique<Engine>(opt.checkpoint, opt.model_name);
  } catch (...) {
    svr.stop();
    listener.join();
    throw;
  }
  for (const std::string& note : s.engine->notes()) std::fprintf(stderr, "gmlp: note: %s\n", note.c_str());
  const int threads = opt.threads;
  s.batcher = std::make_unique<Batcher>(
      Batcher::Options{opt.max_batch, opt.max_queue_delay_us, opt.max_queue},
      [&s](const std::vector<Job*>& jobs) { s.engine->run(jobs); }, s.metrics, [threads] { set_threads(threads); });
  s.ready.store(true, std::memory_order_release);
  s.metrics.ready = true;
  const ModelSpec& spec = s.engine->spec();
  std::fprintf(stderr, "gmlp: ready: model '%s' (%s) on http://%s:%d, batches of up to %lld, queue delay %lld us\n",
               spec.name.c_str(),
               spec.task == Task::image       ? "image classifier"
               : spec.task == Task::fill_mask ? "masked-language model"
                                              : "text classifier",
               opt.host.c_str(), port, static_cast<long long>(opt.max_batch),
               static_cast<long long>(opt.max_queue_delay_us));

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "gmlp: %s: answering the requests received, then stopping\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT");
  s.stopping.store(true, std::memory_order_release);
  s.metrics.ready = false;
  // httplib's stop() closes unanswered the connections it has accepted but no handler has begun
  // to read. So first the requests already sent are served: until the server has been idle for
  // 100 ms (no request begun or answered, none in flight), for at most 5 s. A request answered
  // counts, so that a client sending one request after another, which has seen no readiness
  // probe yet, is not cut off between two of them.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (int64_t seen = -1; Clock::now() < deadline;) {
    const int64_t events = s.events.load();
    if (events == seen && s.metrics.in_flight.load() == 0) break;
    seen = events;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  svr.stop();
  listener.join();  // every connection's handler has answered
  s.batcher->stop();
  std::fprintf(stderr, "gmlp: stopped\n");
  return 0;
}

}  // namespace gmlp::serve
