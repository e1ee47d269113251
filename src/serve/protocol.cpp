// The KServe v2 request and response, the model metadata and the /v1 bodies (protocol.h).
#include "serve/protocol.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace gmlp::serve {

using nlohmann::json;

namespace {

// A JSON value's kind in words, for "expected X, found Y".
std::string kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "the integer " + v.dump();
    case json::value_t::number_float: return "the number " + v.dump();
    default: return "a value of another kind";
  }
}

// A client's string in a message: JSON-quoted (control characters escaped, so the message stays
// one line), cut at 64 bytes.
std::string quoted(const std::string& s) {
  const std::string q = json(s.substr(0, 64)).dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 64 ? q.substr(0, q.size() - 1) + "...\"" : q;
}

json parse_json(std::string_view text, const char* what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    reject(400, what, " is not valid JSON: ", e.what());
  }
}

const json* member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// A whole number in lo..hi, from an integer or a float with no fraction (JavaScript's numbers).
int64_t whole(const json& v, int64_t lo, int64_t hi, const std::string& what) {
  int64_t x = 0;
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    x = v.get<int64_t>();
  } else if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(hi)) reject(400, what, ": expected a whole number in ", lo, "..", hi, ", found ", u);
    x = int64_t(u);
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
             std::fabs(v.get<double>()) < 9e15) {
    x = int64_t(v.get<double>());
  } else {
    reject(400, what, ": expected a whole number in ", lo, "..", hi, ", found ", kind_of(v));
  }
  if (x < lo || x > hi) reject(400, what, ": expected a whole number in ", lo, "..", hi, ", found ", x);
  return x;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? ", " : "", shape[i]);
  return s + "]";
}

// The tensor's "data": flat in row-major order or nested as the shape is (KServe allows both),
// at most `depth` arrays deep; calls leaf(value, index) for each element in order.
template <class Leaf>
void flatten(const json& data, int depth, size_t count, Leaf&& leaf) {
  size_t at = 0;
  auto walk = [&](auto&& self, const json& v, int level) -> void {
    if (!v.is_array()) {
      if (at >= count) reject(400, "input 'data' holds more than the ", count, " elements its shape says");
      leaf(v, at++);
      return;
    }
    if (level >= depth) reject(400, "input 'data' is nested deeper than its shape's ", depth, " dimensions");
    for (const json& e : v) self(self, e, level + 1);
  };
  if (!data.is_array()) reject(400, "input 'data': expected an array, found ", kind_of(data));
  walk(walk, data, 0);
  if (at != count)
    reject(400, "input 'data' holds ", at, at == 1 ? " element" : " elements", ", but its shape says ", count);
}

}  // namespace

const char* error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "method_not_allowed_error";
    case 413: return "payload_too_large_error";
    case 415: return "unsupported_media_type_error";
    case 429: return "rate_limit_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(int status, const std::string& message) {
  return json{{"error", {{"code", status}, {"message", message}, {"type", error_type(status)}}}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

json model_metadata(const ModelSpec& m) {
  json input = {{"name", m.input_name()}, {"datatype", m.input_datatype()}};
  json output = {{"name", "logits"}, {"datatype", "FP32"}};
  if (m.task == Task::image) {
    input["shape"] = {-1, m.channels, m.image_size, m.image_size};
    output["shape"] = {-1, m.num_classes};
  } else {
    input["shape"] = {-1, -1};
    output["shape"] = m.task == Task::fill_mask ? json{-1, -1, m.vocab_size} : json{-1, m.num_classes};
  }
  json meta = {
      {"name", m.name}, {"versions", {"1"}}, {"platform", m.platform}, {"inputs", {input}}, {"outputs", {output}}};
  const char* task = m.task == Task::image       ? "image-classification"
                     : m.task == Task::fill_mask ? "fill-mask"
                                                 : "text-classification";
  meta["parameters"] = {{"task", task}};
  if (m.task != Task::image) meta["parameters"]["max_tokens"] = m.seq_len;
  if (!m.labels.empty()) meta["parameters"]["labels"] = m.labels;
  return meta;
}

InferRequest parse_infer(std::string_view body, size_t json_size, const ModelSpec& m, int64_t max_batch) {
  if (json_size != kNoBinary && json_size > body.size())
    reject(400, "Inference-Header-Content-Length is ", json_size, ", but the body is only ", body.size(), " bytes");
  const std::string_view header = json_size == kNoBinary ? body : body.substr(0, json_size);
  std::string_view binary = json_size == kNoBinary ? std::string_view() : body.substr(json_size);
  const json root = parse_json(header, "the inference request");
  if (!root.is_object()) reject(400, "the inference request: expected a JSON object, found ", kind_of(root));

  InferRequest r;
  if (const json* id = member(root, "id")) {
    if (!id->is_string()) reject(400, "'id': expected a string, found ", kind_of(*id));
    r.id = id->get<std::string>();
  }
  if (const json* params = member(root, "parameters")) {
    if (!params->is_object()) reject(400, "'parameters': expected an object, found ", kind_of(*params));
    if (const json* b = member(*params, "binary_data_output")) {
      if (!b->is_boolean()) reject(400, "'binary_data_output': expected a boolean, found ", kind_of(*b));
      r.binary_output = b->get<bool>();
    }
  }
  if (const json* outputs = member(root, "outputs")) {
    if (!outputs->is_array()) reject(400, "'outputs': expected an array, found ", kind_of(*outputs));
    for (const json& o : *outputs) {
      const json* name = o.is_object() ? member(o, "name") : nullptr;
      if (!name || !name->is_string()) reject(400, "'outputs': expected objects with a 'name', found ", kind_of(o));
      if (*name != "logits")
        reject(400, "unknown output ", quoted(name->get<std::string>()), ": the model has \"logits\"");
      if (const json* p = member(o, "parameters")) {
        const json* b = p->is_object() ? member(*p, "binary_data") : nullptr;
        if (b && !b->is_boolean()) reject(400, "'binary_data': expected a boolean, found ", kind_of(*b));
        if (b) r.binary_output = b->get<bool>();
      }
    }
  }

  const json* inputs = member(root, "inputs");
  if (!inputs) reject(400, "the inference request has no 'inputs'");
  if (!inputs->is_array() || inputs->size() != 1)
    reject(400, "'inputs': expected an array of one tensor ('", m.input_name(), "'), found ",
           inputs->is_array() ? cat(inputs->size(), " tensors") : kind_of(*inputs));
  const json& in = (*inputs)[0];
  if (!in.is_object()) reject(400, "'inputs'[0]: expected an object, found ", kind_of(in));
  const json* name = member(in, "name");
  if (!name || !name->is_string()) reject(400, "'inputs'[0] has no 'name' string");
  if (*name != m.input_name())
    reject(400, "unknown input ", quoted(name->get<std::string>()), ": the model takes \"", m.input_name(), "\"");
  const json* datatype = member(in, "datatype");
  if (!datatype || !datatype->is_string()) reject(400, "input '", m.input_name(), "' has no 'datatype' string");
  const std::string dt = datatype->get<std::string>();
  const bool text = m.task != Task::image;
  if (text ? dt != "INT64" && dt != "INT32" : dt != "FP32")
    reject(400, "input '", m.input_name(), "': expected datatype ", text ? "INT64 (or INT32)" : "FP32", ", found ",
           quoted(dt));
  const json* shape_json = member(in, "shape");
  if (!shape_json || !shape_json->is_array())
    reject(400, "input '", m.input_name(), "': expected a 'shape' array, found ",
           shape_json ? kind_of(*shape_json) : "none");
  std::vector<int64_t> shape;
  for (const json& d : *shape_json) shape.push_back(whole(d, 0, std::numeric_limits<int32_t>::max(), "shape"));
  const std::vector<int64_t> expected =
      text ? std::vector<int64_t>{-1, -1} : std::vector<int64_t>{-1, m.channels, m.image_size, m.image_size};
  bool fits = shape.size() == expected.size() && shape[0] >= 1;
  for (size_t i = 1; fits && i < shape.size(); ++i) fits = expected[i] < 0 ? shape[i] >= 1 : shape[i] == expected[i];
  if (!fits)
    reject(400, "input '", m.input_name(), "': expected shape ",
           text ? cat("[B, n] with n in 1..", m.seq_len) : shape_text(expected).replace(1, 2, "B"), ", found ",
           shape_text(shape));
  if (text && shape[1] > m.seq_len)
    reject(400, "input '", m.input_name(), "': ", shape[1], " tokens per sequence, but the model reads at most ",
           m.seq_len);
  if (shape[0] > max_batch)
    reject(400, "input '", m.input_name(), "': a batch of ", shape[0], ", more than the server's --max-batch ",
           max_batch);
  r.rows = shape[0];
  r.tokens = text ? shape[1] : 0;
  size_t count = 1;
  for (int64_t d : shape) count *= size_t(d);  // bounded: rows <= max_batch, the rest the model's

  const json* data = member(in, "data");
  const json* params = member(in, "parameters");
  const json* binary_size = params && params->is_object() ? member(*params, "binary_data_size") : nullptr;
  if (data && binary_size) reject(400, "input '", m.input_name(), "' has both 'data' and binary_data_size");
  if (!data && !binary_size) reject(400, "input '", m.input_name(), "' has no 'data'");
  if (text) {
    r.ids.resize(count);
    auto put = [&](int64_t id, size_t at) {
      if (id < 0 || id >= m.vocab_size)
        reject(400, "input '", m.input_name(), "': token id ", id, " at element ", at, " is outside the vocabulary 0..",
               m.vocab_size - 1);
      r.ids[at] = int32_t(id);
    };
    if (data) {
      flatten(*data, 2, count, [&](const json& v, size_t at) {
        if (!v.is_number())
          reject(400, "input '", m.input_name(), "' element ", at, ": expected an integer, found ", kind_of(v));
        put(whole(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), "a token id"), at);
      });
    }
  } else {
    r.pixels.resize(count);
    if (data) {
      flatten(*data, 4, count, [&](const json& v, size_t at) {
        if (!v.is_number()) reject(400, "input 'input' element ", at, ": expected a number, found ", kind_of(v));
        const double x = v.get<double>();
        if (!std::isfinite(float(x)))
          reject(400, "input 'input' element ", at, ": ", v.dump(), " is not a finite FP32");
        r.pixels[at] = float(x);
      });
    }
  }
  if (binary_size) {
    const size_t element = dt == "INT32" ? 4 : dt == "INT64" ? 8 : 4;
    const int64_t bytes = whole(*binary_size, 0, std::numeric_limits<int64_t>::max(), "binary_data_size");
    if (uint64_t(bytes) != count * element)
      reject(400, "input '", m.input_name(), "': binary_data_size ", bytes, ", but shape ", shape_text(shape), " of ",
             dt, " is ", count * element, " bytes");
    if (binary.size() < size_t(bytes))
      reject(400, "input '", m.input_name(), "': binary_data_size ", bytes, ", but the body holds ", binary.size(),
             " bytes after the JSON header");
    const char* p = binary.data();
    for (size_t i = 0; i < count; ++i) {
      if (text) {
        int64_t id = 0;
        if (element == 4) {
          int32_t v;
          std::memcpy(&v, p + i * 4, 4);
          id = v;
        } else {
          std::memcpy(&id, p + i * 8, 8);
        }
        if (id < 0 || id >= m.vocab_size)
          reject(400, "input '", m.input_name(), "': token id ", id, " at element ", i,
                 " is outside the vocabulary 0..", m.vocab_size - 1);
        r.ids[i] = int32_t(id);
      } else {
        float v;
        std::memcpy(&v, p + i * 4, 4);
        if (!std::isfinite(v)) reject(400, "input 'input' element ", i, " is not a finite FP32");
        r.pixels[i] = v;
      }
    }
    binary.remove_prefix(size_t(bytes));
  }
  if (!binary.empty())
    reject(400, "the body holds ", binary.size(), " bytes after the JSON header and the tensors it declares");
  return r;
}

std::string infer_response(const ModelSpec& m, const InferRequest& request, const std::vector<float>& out,
                           size_t* json_size) {
  json shape =
      m.task == Task::fill_mask ? json{request.rows, request.tokens, m.vocab_size} : json{request.rows, m.num_classes};
  json output = {{"name", "logits"}, {"datatype", "FP32"}, {"shape", shape}};
  if (request.binary_output)
    output["parameters"] = {{"binary_data_size", out.size() * sizeof(float)}};
  else
    output["data"] = out;
  json response = {{"model_name", m.name}, {"model_version", "1"}};
  if (!request.id.empty()) response["id"] = request.id;
  response["outputs"] = {output};
  std::string body = response.dump(-1, ' ', false, json::error_handler_t::replace);
  *json_size = kNoBinary;
  if (request.binary_output) {
    *json_size = body.size();
    body.append(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float));
  }
  return body;
}

TextRequest parse_text_request(std::string_view body, int default_top, size_t max_inputs) {
  const json root = parse_json(body, "the request");
  if (!root.is_object()) reject(400, "the request: expected a JSON object with 'inputs', found ", kind_of(root));
  const json* inputs = member(root, "inputs");
  if (!inputs) reject(400, "the request has no 'inputs' (a text, or a list of texts)");
  TextRequest r;
  r.top = default_top;
  if (const json* params = member(root, "parameters")) {
    if (!params->is_object()) reject(400, "'parameters': expected an object, found ", kind_of(*params));
    if (const json* top = member(*params, "top_k")) r.top = int(whole(*top, 1, 1000000, "'top_k'"));
  }
  auto add = [&](const json& v) {
    if (v.is_string()) {
      r.texts.push_back(v.get<std::string>());
    } else if (v.is_object() && member(v, "text") && member(v, "text_pair") && member(v, "text")->is_string() &&
               member(v, "text_pair")->is_string()) {
      if (r.pairs.size() != r.texts.size()) reject(400, "'inputs' mixes single texts and pairs");
      r.texts.push_back(member(v, "text")->get<std::string>());
      r.pairs.push_back(member(v, "text_pair")->get<std::string>());
    } else {
      reject(400, "'inputs': expected a text or {\"text\", \"text_pair\"}, found ", kind_of(v));
    }
    if (!r.pairs.empty() && r.pairs.size() != r.texts.size()) reject(400, "'inputs' mixes single texts and pairs");
  };
  if (inputs->is_array()) {
    if (inputs->empty()) reject(400, "'inputs' is an empty list");
    if (inputs->size() > max_inputs)
      reject(400, "'inputs' holds ", inputs->size(), " texts, more than the server's --max-batch ", max_inputs);
    r.list = true;
    for (const json& v : *inputs) add(v);
  } else {
    add(*inputs);
  }
  return r;
}

int parse_top(const std::string& value, int max) {
  if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos)
    reject(400, "top: expected a whole number in 1..", max, ", found ", quoted(value));
  const int top = std::stoi(value);
  if (top < 1 || top > max) reject(400, "top: expected a whole number in 1..", max, ", found ", top);
  return top;
}

nlohmann::json fill_mask_json(const std::vector<std::vector<MaskFill>>& masks) {
  nlohmann::json per_mask = nlohmann::json::array();
  for (const auto& fills : masks) {
    nlohmann::json list = nlohmann::json::array();
    for (const MaskFill& f : fills)
      list.push_back({{"score", f.score}, {"token", f.token}, {"token_str", f.token_str}, {"sequence", f.sequence}});
    per_mask.push_back(list);
  }
  return masks.size() == 1 ? per_mask[0] : per_mask;
}

}  // namespace gmlp::serve
