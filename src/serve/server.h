// gmlp serve: the HTTP server (cpp-httplib) over the batcher and the engine. Binds first and
// answers /health with 503 while the checkpoint loads, then serves the KServe v2 routes, the /v1
// routes, /metrics and /openapi.json (docs/serving.md lists them). On SIGTERM or SIGINT the
// readiness routes answer 503, the requests already received are answered, the queue is drained,
// the server stops accepting connections once idle, and serve() returns 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gmlp::serve {

struct ServerOptions {
  std::string checkpoint, model_name;  // model_name empty: named after the checkpoint (engine.h)
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (the bound one is printed)
  int64_t max_batch = 8;           // rows per batch (images, sequences)
  int64_t max_queue_delay_us = 0;  // how long the oldest queued request waits for others
  size_t max_queue = 64;           // queued requests; one more is answered 429
  int threads = 0;                 // the inference thread's OpenMP threads (0: every core)
  int http_threads = 32;           // connections served at once
  size_t max_body_bytes = size_t{64} << 20;
  std::string api_key;  // non-empty: every route but the health ones needs it
};

// Runs the server until SIGTERM or SIGINT. Diagnostics, and the "listening on http://HOST:PORT"
// line, go to stderr. Throws gmlp::Error when the address cannot be bound or the checkpoint
// cannot be loaded.
int serve(const ServerOptions& options);

// The OpenAPI description of the routes, docs/openapi.json as it was when gmlp was built.
std::string_view openapi_json();

}  // namespace gmlp::serve
