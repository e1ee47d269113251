// What gmlp serve reads from and writes to its clients, without sockets: the KServe v2 (Open
// Inference Protocol) inference request and response, JSON or with the binary tensor extension
// (https://kserve.github.io/website/latest/modelserving/data_plane/v2_protocol/, Triton's
// binary_data extension), the model metadata, the /v1 routes' bodies and the error object.
// Every request body is untrusted: anything malformed is a RequestError naming what was expected
// and what was found (fuzz/fuzz_serve.cpp holds the parsing to that).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gmlp/fill_mask.h"

namespace gmlp::serve {

// A client's mistake, answered with `status` (4xx) and {"error": {"code", "message", "type"}}.
struct RequestError : Error {
  int status;
  RequestError(int status, const std::string& message) : Error(message), status(status) {}
};
template <class... Args>
[[noreturn]] void reject(int status, Args&&... args) {
  throw RequestError(status, cat(std::forward<Args>(args)...));
}

// The error body, as OpenAI's and llama.cpp's servers write it; type is named after the status
// ("invalid_request_error", "not_found_error", ...).
std::string error_body(int status, const std::string& message);
const char* error_type(int status);

// The three kinds of checkpoint a server runs.
enum class Task { image, fill_mask, text_classifier };

// What the protocol needs to know of the model: its input tensor and its output.
struct ModelSpec {
  std::string name;
  Task task = Task::image;
  int channels = 0, image_size = 0;  // image: input (B, channels, image_size, image_size)
  int seq_len = 0, vocab_size = 0;   // text: input_ids (B, n), 1 <= n <= seq_len
  int num_classes = 0;               // image and text_classifier: logits (B, num_classes)
  std::vector<std::string> labels;   // class names, for the metadata
  std::string platform = "gmlp";

  const char* input_name() const { return task == Task::image ? "input" : "input_ids"; }
  const char* input_datatype() const { return task == Task::image ? "FP32" : "INT64"; }
};

// GET /v2/models/{name}: name, versions, platform, inputs and outputs with shapes (-1: any).
nlohmann::json model_metadata(const ModelSpec& model);

// A parsed POST /v2/models/{name}/infer.
struct InferRequest {
  std::string id;  // echoed in the response when given
  int64_t rows = 0;
  int64_t tokens = 0;          // text: ids per row (<= seq_len)
  std::vector<float> pixels;   // image: (rows, C, S, S), each in [0, 1] (the server normalises)
  std::vector<int32_t> ids;    // text: (rows, tokens)
  bool binary_output = false;  // the logits as raw little-endian bytes after the JSON
};

// Parses an inference request. `body` is the whole request body; json_size is the
// Inference-Header-Content-Length header's value when the binary extension is used (the JSON
// header is body[0, json_size), binary tensors follow), or npos. max_batch bounds the rows.
constexpr size_t kNoBinary = std::string_view::npos;
InferRequest parse_infer(std::string_view body, size_t json_size, const ModelSpec& model, int64_t max_batch);

// The response for logits `out`: (rows, num_classes) or, for a masked-language model,
// (rows, tokens, vocab_size). Returns the body; *json_size gets the JSON header's size when the
// output is binary (the Inference-Header-Content-Length to send), else kNoBinary.
std::string infer_response(const ModelSpec& model, const InferRequest& request, const std::vector<float>& out,
                           size_t* json_size);

// POST /v1/fill-mask and /v1/classify-text, as Hugging Face's pipelines take them:
// {"inputs": "text" | ["text", ...], "parameters": {"top_k": K}}; classify-text's inputs may
// also be {"text": a, "text_pair": b} (or a list of them) for a model finetuned on pairs.
struct TextRequest {
  std::vector<std::string> texts, pairs;  // pairs: empty, or one per text
  bool list = false;                      // inputs was a list: the answer is a list per input
  int top = 5;
};
TextRequest parse_text_request(std::string_view body, int default_top, size_t max_inputs);

// A ?top=K (or top_k) query value: a whole number in 1..max.
int parse_top(const std::string& value, int max);

// One text's fill-mask answer in the shape of Hugging Face's fill-mask pipeline: for one [MASK]
// its list of {score, token, token_str, sequence}, for several a list of those lists. Shared by
// POST /v1/fill-mask and `gmlp fill-mask --json`.
nlohmann::json fill_mask_json(const std::vector<std::vector<MaskFill>>& masks);

}  // namespace gmlp::serve
