#include "nn/config.h"

#include "core/error.h"

namespace gmlp {

void GmlpConfig::validate() const {
  auto need = [](bool ok, const char* what, auto got) {
    if (!ok) fail("invalid model config: ", what, " (got ", got, ")");
  };
  need(img_size > 0 && img_size <= 4096, "img_size must be in 1..4096", img_size);
  need(in_chans > 0 && in_chans <= 64, "in_chans must be in 1..64", in_chans);
  need(patch_size > 0 && img_size % patch_size == 0, "patch_size must divide img_size", patch_size);
  need(depth > 0 && depth <= 1000, "depth must be in 1..1000", depth);
  need(dim > 0 && dim <= 65536, "dim must be in 1..65536", dim);
  need(ffn > 0 && ffn % 2 == 0 && ffn <= 262144, "ffn must be even and positive", ffn);
  need(num_classes > 0 && num_classes <= 1000000, "num_classes must be positive", num_classes);
  need(drop_path >= 0.f && drop_path < 1.f, "drop_path must be in [0, 1)", drop_path);
  need(tokens() <= 65536, "the patch grid must have at most 65536 tokens", tokens());
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GmlpConfig, img_size, in_chans, patch_size, depth,
                                                dim, ffn, num_classes, drop_path, ln_eps, gate_eps)

nlohmann::json GmlpConfig::to_json() const {
  nlohmann::json j = *this;
  j["model"] = "gmlp";
  return j;
}

GmlpConfig GmlpConfig::from_json(const nlohmann::json& j) { return j.get<GmlpConfig>(); }

const std::vector<Preset>& presets() {
  auto vision = [](int depth, int dim, int ffn, float drop_path) {
    GmlpConfig c;
    c.img_size = 224, c.in_chans = 3, c.patch_size = 16, c.num_classes = 1000;
    c.depth = depth, c.dim = dim, c.ffn = ffn, c.drop_path = drop_path;
    return c;
  };
  auto fmnist = [](int depth, int dim, int ffn) {
    GmlpConfig c;  // 28×28 gray, 4×4 patches → 7×7 = 49 tokens
    c.depth = depth, c.dim = dim, c.ffn = ffn;
    return c;
  };
  auto cifar = [](int depth, int dim, int ffn) {
    GmlpConfig c;  // 32×32 RGB, 4×4 patches → 8×8 = 64 tokens
    c.img_size = 32, c.in_chans = 3, c.depth = depth, c.dim = dim, c.ffn = ffn;
    return c;
  };
  static const std::vector<Preset> all = {
      {"gmlp-ti16", "gMLP-Ti/16 (paper Table 1): 224 px, 30 blocks, d=128, e=768", vision(30, 128, 768, 0.f), {300, 1024, 1e-3f, 0.05f}},
      {"gmlp-s16", "gMLP-S/16 (paper Table 1): 224 px, 30 blocks, d=256, e=1536", vision(30, 256, 1536, 0.05f), {300, 1024, 1e-3f, 0.05f}},
      {"gmlp-b16", "gMLP-B/16 (paper Table 1): 224 px, 30 blocks, d=512, e=3072", vision(30, 512, 3072, 0.2f), {300, 1024, 1e-3f, 0.05f}},
      {"fmnist-ti", "28×28 gray, patch 4, 4 blocks, d=64, e=256 (0.1M params)", fmnist(4, 64, 256), {10, 128, 2e-3f, 0.05f}},
      {"fmnist-s", "28×28 gray, patch 4, 6 blocks, d=128, e=512 (0.6M params)", fmnist(6, 128, 512), {10, 128, 2e-3f, 0.05f}},
      {"cifar-s", "32×32 RGB, patch 4, 6 blocks, d=128, e=512 (0.6M params; CIFAR-sized)", cifar(6, 128, 512), {100, 128, 1e-3f, 0.05f}},
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
