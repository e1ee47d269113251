// libFuzzer harness: what gmlp serve parses from a request body (src/serve/protocol.h): the
// KServe v2 inference request, JSON or with binary tensors, for an image and a text model; the
// /v1 routes' text requests; a ?top= value. One input holds the JSON and, after fuzz::kSplit,
// binary tensor bytes (then the JSON's size is the Inference-Header-Content-Length). A client's
// mistake must be a RequestError with a 4xx status and a one-line message; a request that parses
// must also make a response of the size its shape says.
#include <cstdlib>

#include "fuzz.h"
#include "serve/protocol.h"

using namespace gmlp;

namespace {

serve::ModelSpec image_model() {
  serve::ModelSpec m;
  m.name = "fuzz";
  m.task = serve::Task::image;
  m.channels = 1;
  m.image_size = 4;
  m.num_classes = 3;
  return m;
}

serve::ModelSpec text_model(serve::Task task) {
  serve::ModelSpec m;
  m.name = "fuzz";
  m.task = task;
  m.seq_len = 8;
  m.vocab_size = 50;
  m.num_classes = task == serve::Task::fill_mask ? 0 : 2;
  return m;
}

template <class F>
void run(F&& f) {
  try {
    f();
  } catch (const serve::RequestError& e) {
    fuzz::check_message(e.what());
    if (e.status < 400 || e.status > 499) {
      std::fprintf(stderr, "gmlp fuzz: a client's mistake answered %d: %s\n", e.status, e.what());
      std::abort();
    }
  }
}

void infer(const serve::ModelSpec& m, std::string_view body, size_t json_size) {
  run([&] {
    const serve::InferRequest r = serve::parse_infer(body, json_size, m, 4);
    const bool text = m.task != serve::Task::image;
    if (r.rows < 1 || r.rows > 4 ||
        (text ? r.ids.size() != size_t(r.rows * r.tokens) : r.pixels.size() != size_t(r.rows * 16)))
      std::abort();
    const size_t per_row = m.task == serve::Task::fill_mask ? size_t(r.tokens * m.vocab_size) : size_t(m.num_classes);
    size_t header = 0;
    const std::string out = serve::infer_response(m, r, std::vector<float>(size_t(r.rows) * per_row, 0.5f), &header);
    if (r.binary_output != (header != serve::kNoBinary)) std::abort();
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const serve::ModelSpec image = image_model(), mlm = text_model(serve::Task::fill_mask),
                                classifier = text_model(serve::Task::text_classifier);
  std::string_view parts[2];
  fuzz::split(fuzz::as_view(data, size), parts);
  const bool binary = parts[1].data() != nullptr;  // a separator was there
  // The body as a client sends it: the JSON header, then the binary tensors right after it.
  const std::string body = binary ? std::string(parts[0]) + std::string(parts[1]) : std::string(parts[0]);
  const size_t json_size = binary ? parts[0].size() : serve::kNoBinary;
  for (const serve::ModelSpec* m : {&image, &mlm, &classifier}) infer(*m, body, json_size);
  run([&] { serve::parse_text_request(parts[0], 5, 4); });
  run([&] { serve::parse_top(std::string(parts[0].substr(0, 24)), 10); });
  return 0;
}
