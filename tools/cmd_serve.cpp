// gmlp serve: a checkpoint behind an HTTP endpoint (KServe v2, /v1 routes, /metrics), the
// server being src/serve/ (server.h); this file only declares the options.
#include "commands.h"
#include "serve/server.h"

namespace gmlp::cli {

void add_serve(CLI::App& app) {
  struct Args {
    serve::ServerOptions opt;
    int max_body_mib = 64;
  };
  auto args = std::make_shared<Args>();
  serve::ServerOptions& o = args->opt;
  CLI::App* sub = app.add_subcommand(
      "serve", "Serve a checkpoint over HTTP: KServe v2 inference with dynamic batching, /v1 routes, /metrics");
  sub->add_option(
         "--checkpoint", o.checkpoint,
         "The checkpoint to serve: an image classifier (gmlp train's, or a timm state_dict), a masked-language "
         "model (gmlp pretrain's) or a text classifier (gmlp finetune's)")
      ->required();
  sub->add_option("--model-name", o.model_name,
                  "The model's name in /v2/models/{name} (default: the file's stem, or its folder's name for a "
                  "checkpoint.safetensors)")
      ->check([](const std::string& v) {
        return !v.empty() && v.size() <= 128 &&
                       v.find_first_not_of(
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                           "0123456789._-") == std::string::npos
                   ? std::string()
                   : "expected letters, digits, '.', '_' or '-' (1 to 128), found '" + v + "'";
      });
  sub->add_option("--host", o.host, "Address to listen on (0.0.0.0: every interface)")->capture_default_str();
  sub->add_option("--port", o.port, "Port to listen on (0: any free port; the bound address is printed on stderr)")
      ->check(whole_in(0, 65535))
      ->capture_default_str();
  sub->add_option("--max-batch", o.max_batch,
                  "Most images or sequences run together in one batch; a larger request is refused (1: no batching)")
      ->check(whole_in(1, 4096))
      ->capture_default_str();
  sub->add_option("--max-queue-delay-us", o.max_queue_delay_us,
                  "Microseconds the oldest queued request may wait for others to fill its batch (0: run what is "
                  "queued at once)")
      ->check(whole_in(0, 10000000))
      ->capture_default_str();
  sub->add_option("--max-queue", o.max_queue, "Requests waiting for the inference thread; one more is answered 429")
      ->check(whole_in(1, 1000000))
      ->capture_default_str();
  sub->add_option("--http-threads", o.http_threads, "Connections served at once (each an HTTP thread)")
      ->check(whole_in(1, 1024))
      ->capture_default_str();
  sub->add_option("--max-body-mib", args->max_body_mib, "Largest request body in MiB; a larger one is answered 413")
      ->check(whole_in(1, 4096))
      ->capture_default_str();
  sub->add_option("--api-key", o.api_key,
                  "Require 'Authorization: Bearer KEY' on every route but /health, /v2/health/live and "
                  "/v2/health/ready (401 without it)");
  add_threads_option(*sub, o.threads);
  sub->callback([args] {
    args->opt.max_body_bytes = size_t(args->max_body_mib) << 20;
    serve::serve(args->opt);
  });
}

}  // namespace gmlp::cli
