// gmlp's side of tests/onnx_export_test.py: checkpoints with random weights everywhere, and the
// engine's own logits on random inputs, for the test to hold the exported ONNX models to.
//   gmlp_onnx_reference image  --config JSON --seed S --out CK
//   gmlp_onnx_reference text   --config JSON --corpus FILE --seed S [--task NAME] --out CK
//   gmlp_onnx_reference logits --checkpoint CK --batch B --seed S [--head mlm|classifier]
//                              --inputs IN.npy --logits OUT.npy
// Inputs are written as float32 .npy: normalised images (B, C, S, S) ~ N(0, 1), or token ids
// (B, N) (exact in float32), each row [CLS] first, a [SEP] in the middle (segments), and a tail
// of [PAD] after a random length (the attention's padding mask).
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "io/atomic_file.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "nn/model.h"
#include "nn/text_model.h"
#include "text/tokenizer.h"
#include "train/checkpoint.h"
#include "train/lm_trainer.h"

namespace gmlp {
namespace {

// O(1) random weights everywhere, as tests/test_model.cpp's randomize: timm's init would leave
// parts of the graph untested (a zero head, the SGU's W ≈ 0). Norm scales (LayerNorm, BatchNorm,
// Affine α) stay near 1, BatchNorm's running variance positive.
void randomize(const std::vector<ParamInfo>& params, float* w, Rng& rng) {
  for (const ParamInfo& p : params) {
    const bool vector = p.shape.size() == 1;
    const bool scale = (vector && p.name.ends_with(".weight")) || p.name.ends_with(".alpha");
    const bool variance = p.name.ends_with(".running_var");
    const int64_t fan_in = p.numel / p.shape[0];
    for (int64_t i = 0; i < p.numel; ++i) {
      const double x = rng.normal();
      w[p.offset + i] = float(variance ? std::exp(0.3 * x)
                              : scale  ? 1 + 0.2 * x
                              : vector ? 0.2 * x
                                       : x / std::sqrt(double(fan_in)));
    }
  }
}

std::map<std::string, std::string> parse(int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (!key.starts_with("--")) fail("expected an option, found '", key, "'");
    a[key.substr(2)] = argv[i + 1];
  }
  return a;
}

std::string need(const std::map<std::string, std::string>& a, const std::string& key) {
  const auto it = a.find(key);
  if (it == a.end()) fail("missing --", key);
  return it->second;
}

void make_image(const std::map<std::string, std::string>& a) {
  const ModelConfig config = ModelConfig::from_json(nlohmann::json::parse(need(a, "config")));
  auto model = make_model<float>(config);
  Rng rng(std::stoull(need(a, "seed")));
  randomize(model->params(), model->weights(), rng);
  data::Normalization norm;  // not the default 0.5, so that the test sees the metadata is copied
  std::vector<std::string> classes;
  classes.reserve(size_t(config.num_classes));
  for (int c = 0; c < config.in_chans; ++c) norm.mean.push_back(0.25f + 0.1f * c), norm.std.push_back(0.3f);
  for (int k = 0; k < config.num_classes; ++k) classes.push_back("class" + std::to_string(k));
  save_checkpoint(need(a, "out"), *model, norm, classes);
}

void make_text(const std::map<std::string, std::string>& a) {
  const TextConfig config = TextConfig::from_json(nlohmann::json::parse(need(a, "config")));
  std::vector<std::string> lines;
  {
    const std::string corpus = read_file(need(a, "corpus"), size_t(1) << 24);
    size_t at = 0;
    while (at < corpus.size()) {
      const size_t end = std::min(corpus.find('\n', at), corpus.size());
      lines.push_back(corpus.substr(at, end - at));
      at = end + 1;
    }
  }
  const std::string out = need(a, "out");
  const text::Tokenizer tokenizer = text::Tokenizer::train(lines, out + ".tokenizer", config.vocab_size);
  TextModel<float> model(config);
  Rng rng(std::stoull(need(a, "seed")));
  randomize(model.params(), model.weights(), rng);
  std::map<std::string, std::string> meta;
  if (a.count("task")) meta["task"] = a.at("task");
  save_text_checkpoint(out, model, tokenizer, meta);
}

void logits(const std::map<std::string, std::string>& a) {
  const std::string path = need(a, "checkpoint");
  const int64_t B = std::stoll(need(a, "batch"));
  Rng rng(std::stoull(need(a, "seed")));
  if (checkpoint_kind(st::File::open(path)) != CheckpointKind::text) {
    Checkpoint ck = load_checkpoint(path);
    const ModelConfig& c = ck.config;
    std::vector<float> images(size_t(B * c.in_chans * c.img_size * c.img_size));
    for (float& v : images) v = float(rng.normal());
    ck.model->plan(B, Mode::infer);
    const float* out = ck.model->infer(images.data(), B);
    save_npy_f32(need(a, "inputs"), images.data(), {B, c.in_chans, c.img_size, c.img_size});
    save_npy_f32(need(a, "logits"), out, {B, c.num_classes});
    return;
  }
  TextCheckpoint ck = load_text_checkpoint(path);
  const TextConfig& c = ck.config;
  const int64_t N = c.seq_len, V = c.vocab_size;
  std::vector<int32_t> ids(size_t(B * N));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t length = N / 2 + int64_t(rng.below(uint64_t(N - N / 2 + 1)));  // N/2 .. N
    for (int64_t n = 0; n < N; ++n) {
      int32_t id = int32_t(text::Tokenizer::kNumReserved + rng.below(uint64_t(V - text::Tokenizer::kNumReserved)));
      if (n == 0) id = text::Tokenizer::kCls;
      if (n == N / 3 || n == length - 1) id = text::Tokenizer::kSep;
      if (rng.uniform() < 0.1) id = text::Tokenizer::kMask;
      if (n >= length) id = text::Tokenizer::kPad;
      ids[size_t(b * N + n)] = id;
    }
  }
  ck.model->plan(B, Mode::infer);
  ck.model->encode(ids.data(), B);
  std::vector<float> out;
  std::vector<int64_t> shape;
  if (need(a, "head") == "classifier") {
    const float* l = ck.model->classify();
    out.assign(l, l + B * c.num_classes);
    shape = {B, c.num_classes};
  } else {
    for (int64_t p0 = 0; p0 < B * N; p0 += TextModel<float>::kMlmChunk) {
      const int64_t count = std::min(TextModel<float>::kMlmChunk, B * N - p0);
      std::vector<int64_t> positions(static_cast<size_t>(count));
      for (int64_t k = 0; k < count; ++k) positions[size_t(k)] = p0 + k;  // flat b·N + n
      const float* l = ck.model->mlm_logits(positions.data(), count);
      out.insert(out.end(), l, l + count * V);
    }
    shape = {B, N, V};
  }
  const std::vector<float> as_float(ids.begin(), ids.end());
  save_npy_f32(need(a, "inputs"), as_float.data(), {B, N});
  save_npy_f32(need(a, "logits"), out.data(), shape);
}

}  // namespace
}  // namespace gmlp

int main(int argc, char** argv) {
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    const auto args = gmlp::parse(argc, argv);
    if (cmd == "image")
      gmlp::make_image(args);
    else if (cmd == "text")
      gmlp::make_text(args);
    else if (cmd == "logits")
      gmlp::logits(args);
    else
      gmlp::fail("expected a command: image, text or logits (found '", cmd, "')");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gmlp_onnx_reference: %s\n", e.what());
    return 1;
  }
  return 0;
}
