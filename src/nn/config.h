// The hyper-parameters of every vision model (one struct, one JSON object in checkpoints), and
// the presets. Glossary used across the code (CONTRIBUTING.md): B batch, N tokens, D model width,
// F expanded width (d_ffn), H gate width (F/2 with the split gate), A attention width,
// V vocabulary, K classes, L blocks, C image channels, S image side, P patch side.
// The kinds of model, what each is and which fields it reads: nn/model_kind.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nn/model_kind.h"

namespace gmlp {

struct ModelConfig {
  ModelKind model = ModelKind::gmlp;  // a vision kind (JSON: its name)
  int img_size = 28;                  // S
  int in_chans = 1;                   // C
  int patch_size = 4;                 // P (token models)
  int depth = 6;                      // L: blocks (cnn: basic blocks per stage, three stages)
  int dim = 128;                      // D (cnn: the first stage's width; then 2D, 4D)
  int ffn = 512;                      // F: gMLP's d_ffn; the channel MLP's hidden width elsewhere
  int num_classes = 10;               // K
  double drop_path = 0;               // stochastic depth: rate of the last block, linear in depth from 0
  double ln_eps = 1e-6;               // block and final LayerNorm (timm partial(LayerNorm, eps=1e-6))
  double gate_eps = 1e-5;             // the SGU's LayerNorm (torch default)
  std::string gate = "split";         // gmlp/amlp gating s(Z): split, multiplicative, additive, linear
  int attn_dim = 64;                  // amlp: width of the tiny attention
  int heads = 4;                      // vit, eamlp: attention heads
  bool class_token = true;            // vit: a learned class token ahead of the patches (ffonly, eamlp: always)
  std::string global_pool = "token";  // vit (timm's name): "token", the class token's row after the final
                                      // norm; "avg", the mean of the patch tokens, then its own norm (fc_norm)
  int token_ffn = 64;                 // mixer, ffonly: hidden width of the MLP across tokens
  int memory = 64;                    // eamlp: memory units per head
  double init_scale = 0.1;            // resmlp: layer-scale initial value

  int grid() const { return img_size / patch_size; }
  int patches() const { return grid() * grid(); }
  bool has_class_token() const {
    return model_kind_info(model).class_token && (model != ModelKind::vit || class_token);
  }
  bool avg_pool_then_norm() const { return model == ModelKind::vit && global_pool == "avg"; }  // timm's fc_norm
  int tokens() const { return patches() + (has_class_token() ? 1 : 0); }
  bool split_gate() const { return gate == "split"; }
  int gate_width() const { return split_gate() ? ffn / 2 : ffn; }  // H: the gate's output
  int patch_dim() const { return in_chans * patch_size * patch_size; }

  // Throws gmlp::Error naming the offending field.
  void validate() const;
  nlohmann::json to_json() const;
  static ModelConfig from_json(const nlohmann::json& j);  // missing keys keep their defaults
};

extern const std::vector<std::string> kGateKinds;
extern const std::vector<std::string> kGlobalPools;  // vit: token, avg

// Training defaults that go with a preset (the CLI's flags override them).
struct PresetTrain {
  int epochs = 10;
  int batch_size = 128;
  float lr = 2e-3f;
  float weight_decay = 0.05f;
};

struct Preset {
  std::string name, description;
  ModelConfig config;
  PresetTrain train;
};

const std::vector<Preset>& presets();
// Throws gmlp::Error listing the known names.
const Preset& find_preset(const std::string& name);

}  // namespace gmlp
