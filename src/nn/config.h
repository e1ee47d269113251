// The vision gMLP's hyper-parameters (timm MlpMixer with SpatialGatingBlock), and the presets.
// Glossary used across the code: B batch, N tokens, D model width, F expanded width (d_ffn),
// H = F/2 gate width, K classes, L blocks, C image channels, S image side, P patch side.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gmlp {

struct GmlpConfig {
  int img_size = 28;      // S
  int in_chans = 1;       // C
  int patch_size = 4;     // P
  int depth = 6;          // L
  int dim = 128;          // D
  int ffn = 512;          // F (even)
  int num_classes = 10;   // K
  float drop_path = 0.f;  // stochastic-depth rate of the last block (linear in depth from 0)
  float ln_eps = 1e-6f;   // block and final LayerNorm (timm partial(LayerNorm, eps=1e-6))
  float gate_eps = 1e-5f; // the SGU's LayerNorm (torch default)

  int grid() const { return img_size / patch_size; }
  int tokens() const { return grid() * grid(); }
  int gate() const { return ffn / 2; }
  int patch_dim() const { return in_chans * patch_size * patch_size; }

  // Throws gmlp::Error naming the offending field.
  void validate() const;
  nlohmann::json to_json() const;
  static GmlpConfig from_json(const nlohmann::json& j);  // missing keys keep their defaults
};

// Training defaults that go with a preset (the CLI's flags override them).
struct PresetTrain {
  int epochs = 10;
  int batch_size = 128;
  float lr = 2e-3f;
  float weight_decay = 0.05f;
};

struct Preset {
  std::string name, description;
  GmlpConfig config;
  PresetTrain train;
};

const std::vector<Preset>& presets();
// Throws gmlp::Error listing the known names.
const Preset& find_preset(const std::string& name);

}  // namespace gmlp
