#include "nn/config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace gmlp {

const std::vector<std::string> kGateKinds = {"split", "multiplicative", "additive", "linear"};
const std::vector<std::string> kGlobalPools = {"token", "avg"};

namespace {
bool one_of(const std::string& s, const std::vector<std::string>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}
std::string joined(const std::vector<std::string>& set) {
  std::string out;
  for (const auto& s : set) out += (out.empty() ? "" : ", ") + s;
  return out;
}
}  // namespace

void ModelConfig::validate() const {
  auto need = [](bool ok, const char* what, auto got) {
    if (!ok) fail("invalid model config: ", what, " (got ", got, ")");
  };
  const ModelKindInfo& kind = model_kind_info(model);
  if (!kind.vision) parse_model_kind(kind.name, Domain::vision);  // throws, naming the vision kinds
  need(img_size > 0 && img_size <= 4096, "img_size must be in 1..4096", img_size);
  need(in_chans > 0 && in_chans <= 64, "in_chans must be in 1..64", in_chans);
  need(depth > 0 && depth <= 1000, "depth must be in 1..1000", depth);
  need(dim > 0 && dim <= 65536, "dim must be in 1..65536", dim);
  need(num_classes > 0 && num_classes <= 1000000, "num_classes must be in 1..1000000", num_classes);
  need(drop_path >= 0.f && drop_path < 1.f, "drop_path must be in [0, 1)", drop_path);
  need(ln_eps > 0 && ln_eps <= 1, "ln_eps must be in (0, 1]", ln_eps);
  need(gate_eps > 0 && gate_eps <= 1, "gate_eps must be in (0, 1]", gate_eps);
  need(std::isfinite(init_scale) && std::abs(init_scale) <= 1e3, "init_scale must be finite, at most 1000 in size",
       init_scale);
  if (!kind.patches) return;
  need(patch_size > 0 && img_size % patch_size == 0, "patch_size must divide img_size", patch_size);
  need(tokens() <= 65536, "the patch grid must have at most 65536 tokens", tokens());
  need(ffn > 0 && ffn <= 262144, "ffn must be in 1..262144", ffn);
  if (kind.gated) {
    if (!one_of(gate, kGateKinds))
      fail("invalid model config: gate must be one of ", joined(kGateKinds), " (got '", gate, "')");
    need(!split_gate() || ffn % 2 == 0, "ffn must be even for the split gate", ffn);
  }
  if (kind.tiny_attention) need(attn_dim > 0 && attn_dim <= 4096, "attn_dim must be in 1..4096", attn_dim);
  if (model == ModelKind::vit) {
    if (!one_of(global_pool, kGlobalPools))
      fail("invalid model config: global_pool must be one of ", joined(kGlobalPools), " (got '", global_pool, "')");
    if (global_pool == "token" && !class_token)
      fail("invalid model config: global_pool 'token' needs class_token true (got false): pool with 'avg' instead");
  }
  if (kind.heads) need(heads > 0 && dim % heads == 0, "heads must divide dim", heads);
  if (kind.token_mlp) need(token_ffn > 0 && token_ffn <= 65536, "token_ffn must be in 1..65536", token_ffn);
  if (kind.memory) need(memory > 0 && memory <= 65536, "memory must be in 1..65536", memory);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ModelConfig, model, img_size, in_chans, patch_size, depth, dim, ffn,
                                                num_classes, drop_path, ln_eps, gate_eps, gate, attn_dim, heads,
                                                class_token, global_pool, token_ffn, memory, init_scale)

nlohmann::json ModelConfig::to_json() const { return *this; }

ModelConfig ModelConfig::from_json(const nlohmann::json& j) {
  // The model's name first, so that an unknown one is answered with the vision kinds.
  if (const auto it = j.find("model"); it != j.end() && it->is_string())
    parse_model_kind(it->get<std::string>(), Domain::vision);
  return j.get<ModelConfig>();
}

const std::vector<Preset>& presets() {
  auto vision = [](int depth, int dim, int ffn, float drop_path) {
    ModelConfig c;
    c.img_size = 224, c.in_chans = 3, c.patch_size = 16, c.num_classes = 1000;
    c.depth = depth, c.dim = dim, c.ffn = ffn, c.drop_path = drop_path;
    return c;
  };
  // 28×28 gray, 4×4 patches → 7×7 = 49 tokens.
  auto fmnist = [](ModelKind model, int depth, int dim, int ffn) {
    ModelConfig c;
    c.model = model, c.depth = depth, c.dim = dim, c.ffn = ffn;
    return c;
  };
  auto with = [](ModelConfig c, auto edit) {
    edit(c);
    return c;
  };
  auto cifar = [](int depth, int dim, int ffn) {
    ModelConfig c;  // 32×32 RGB, 4×4 patches → 8×8 = 64 tokens
    c.img_size = 32, c.in_chans = 3, c.depth = depth, c.dim = dim, c.ffn = ffn;
    return c;
  };
  const PresetTrain small{10, 128, 2e-3f, 0.05f};
  static const std::vector<Preset> all = {
      {"gmlp-ti16",
       "gMLP-Ti/16 (paper Table 1): 224 px, 30 blocks, d=128, e=768",
       vision(30, 128, 768, 0.f),
       {300, 1024, 1e-3f, 0.05f}},
      {"gmlp-s16",
       "gMLP-S/16 (paper Table 1): 224 px, 30 blocks, d=256, e=1536",
       vision(30, 256, 1536, 0.05f),
       {300, 1024, 1e-3f, 0.05f}},
      {"gmlp-b16",
       "gMLP-B/16 (paper Table 1): 224 px, 30 blocks, d=512, e=3072",
       vision(30, 512, 3072, 0.2f),
       {300, 1024, 1e-3f, 0.05f}},
      {"fmnist-ti", "gMLP, 28×28 gray, patch 4, 4 blocks, d=64, e=256 (0.1M params)",
       fmnist(ModelKind::gmlp, 4, 64, 256), small},
      {"fmnist-s", "gMLP, 28×28 gray, patch 4, 6 blocks, d=128, e=512 (0.6M params)",
       fmnist(ModelKind::gmlp, 6, 128, 512), small},
      // The comparison at about 1M parameters (gmlp compare; README).
      {"fmnist-gmlp", "gMLP, patch 4, 8 blocks, d=128, e=768 (1.2M params)", fmnist(ModelKind::gmlp, 8, 128, 768),
       small},
      {"fmnist-amlp", "aMLP, patch 4, 8 blocks, d=128, e=512, tiny attention 64 (1.2M params)",
       fmnist(ModelKind::amlp, 8, 128, 512), small},
      {"fmnist-vit", "ViT/DeiT, patch 4, 6 blocks, d=128, 4 heads, MLP 512, class token (1.2M params)",
       fmnist(ModelKind::vit, 6, 128, 512), small},
      {"fmnist-mixer", "MLP-Mixer, patch 4, 8 blocks, d=128, token MLP 64, channel MLP 512 (1.1M params)",
       with(fmnist(ModelKind::mixer, 8, 128, 512), [](ModelConfig& c) { c.token_ffn = 64; }), small},
      {"fmnist-resmlp", "ResMLP, patch 4, 8 blocks, d=128, MLP 512, layer scale 0.1 (1.1M params)",
       fmnist(ModelKind::resmlp, 8, 128, 512), small},
      {"fmnist-ffonly", "feed-forward only, patch 4, 8 blocks, d=128, MLP 512, token MLP 64 (1.1M params)",
       with(fmnist(ModelKind::ffonly, 8, 128, 512), [](ModelConfig& c) { c.token_ffn = 64; }), small},
      {"fmnist-eamlp", "external attention, patch 4, 6 blocks, d=128, 4 heads, memory 64, MLP 512 (1.0M params)",
       fmnist(ModelKind::eamlp, 6, 128, 512), small},
      {"fmnist-cnn", "residual CNN, widths 40/80/160, 2 basic blocks per stage (1.1M params)",
       fmnist(ModelKind::cnn, 2, 40, 0), small},
      {"cifar-s",
       "gMLP, 32×32 RGB, patch 4, 6 blocks, d=128, e=512 (0.6M params; CIFAR-sized)",
       cifar(6, 128, 512),
       {100, 128, 1e-3f, 0.05f}},
  };
  return all;
}

const Preset& find_preset(const std::string& name) {
  for (const auto& p : presets())
    if (p.name == name) return p;
  std::string known;
  for (const auto& p : presets()) known += (known.empty() ? "" : ", ") + p.name;
  fail("unknown preset '", name, "': known presets are ", known);
}

}  // namespace gmlp
