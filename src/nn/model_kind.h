// The model kinds, vision and text, in one table: each kind's name in configs, JSON and checkpoint
// metadata, the domains it serves, the properties the code branches on, and the PyTorch class its
// parity test holds it to. A new kind is a row here plus its block code (token_model.cpp,
// text_model.cpp or its own file); the switches over ModelKind (-Wswitch) name the block code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace gmlp {

enum class ModelKind : uint8_t { gmlp, amlp, vit, mixer, resmlp, ffonly, eamlp, cnn, bert, bert_rel };

// Image classifiers (ModelConfig) and masked-language models (TextConfig).
enum class Domain : uint8_t { vision, text };

// The position information a text model adds to its tokens.
enum class Positions : uint8_t { none, learned, relative };

struct ModelKindInfo {
  ModelKind kind;
  const char* name;                       // in configs, JSON, --set and checkpoint metadata: a saved name never changes
  bool vision = false, text = false;      // the domains it serves
  bool patches = false;                   // vision: a token model over image patches (false: convolutional)
  bool class_token = false;               // vision: a learned class token and positions ahead of the patches
  bool gated = false;                     // the spatial gating unit (gate, gate_eps)
  bool tiny_attention = false;            // aMLP's one-head attention of width attn_dim inside the gate
  bool self_attention = false;            // multi-head softmax attention blocks (Transformer)
  bool heads = false;                     // attention heads: heads must divide dim
  bool token_mlp = false;                 // an MLP across tokens, token_ffn wide
  bool memory = false;                    // external attention's memory units
  bool affine_norm = false;               // ResMLP's Affine in place of every LayerNorm, the final one included
  Positions positions = Positions::none;  // text
  const char* spatial_matrix = nullptr;   // per block, the learned N×N token-mixing weight (gmlp viz draws it)
  const char* vision_reference = nullptr;  // the PyTorch model its vision parity test compares against
  const char* text_reference = nullptr;    // ... and its text one
  const char* description = nullptr;
};

// One row per ModelKind, in the enum's order.
inline constexpr ModelKindInfo kModelKindTable[] = {
    {.kind = ModelKind::gmlp,
     .name = "gmlp",
     .vision = true,
     .text = true,
     .patches = true,
     .gated = true,
     .spatial_matrix = ".mlp_channels.gate.proj.weight",
     .vision_reference = "timm MlpMixer + SpatialGatingBlock (split gate; tests/reference/timm_gmlp.py), "
                         "tests/reference/models.py GmlpBlock (the other gates)",
     .text_reference = "tests/reference/text_models.py TextModel (models.GmlpBlock)",
     .description = "gMLP (Liu et al. 2021): LN, fc1, GELU, spatial gating unit, fc2"},
    {.kind = ModelKind::amlp,
     .name = "amlp",
     .vision = true,
     .text = true,
     .patches = true,
     .gated = true,
     .tiny_attention = true,
     .spatial_matrix = ".mlp_channels.gate.proj.weight",
     .vision_reference = "tests/reference/models.py GmlpBlock with TinyAttention",
     .text_reference = "tests/reference/text_models.py TextModel (models.GmlpBlock with TinyAttention)",
     .description = "aMLP: gMLP plus a tiny single-head attention added inside the gate"},
    {.kind = ModelKind::vit,
     .name = "vit",
     .vision = true,
     .patches = true,
     .class_token = true,
     .self_attention = true,
     .heads = true,
     .vision_reference = "timm VisionTransformer",
     .description = "ViT/DeiT: class token, learned positions, multi-head self-attention and MLP"},
    {.kind = ModelKind::mixer,
     .name = "mixer",
     .vision = true,
     .patches = true,
     .token_mlp = true,
     .vision_reference = "timm MlpMixer",
     .description = "MLP-Mixer: an MLP across tokens, then one across channels"},
    {.kind = ModelKind::resmlp,
     .name = "resmlp",
     .vision = true,
     .patches = true,
     .affine_norm = true,
     .spatial_matrix = ".linear_tokens.weight",
     .vision_reference = "timm MlpMixer + ResBlock + Affine (timm's ResMLP)",
     .description = "ResMLP: Affine norms, linear token mixing, layer scale"},
    {.kind = ModelKind::ffonly,
     .name = "ffonly",
     .vision = true,
     .patches = true,
     .class_token = true,
     .token_mlp = true,
     .vision_reference = "tests/reference/models.py PatchModel + LinearBlock",
     .description = "feed-forward only (Melas-Kyriazi 2021): an MLP across channels, then one across tokens"},
    {.kind = ModelKind::eamlp,
     .name = "eamlp",
     .vision = true,
     .patches = true,
     .class_token = true,
     .heads = true,
     .memory = true,
     .vision_reference = "tests/reference/models.py PatchModel + EaBlock",
     .description = "external attention (Guo et al. 2021): two linear memories, double normalisation"},
    {.kind = ModelKind::cnn,
     .name = "cnn",
     .vision = true,
     .vision_reference = "tests/reference/models.py Cnn",
     .description = "a small residual CNN (ResNet basic blocks, BatchNorm), the reference the MLPs chase"},
    {.kind = ModelKind::bert,
     .name = "bert",
     .text = true,
     .self_attention = true,
     .heads = true,
     .positions = Positions::learned,
     .text_reference = "tests/reference/text_models.py TextModel (TransformerBlock, pos_embed)",
     .description = "BERT-style pre-LN Transformer with learned absolute positions"},
    {.kind = ModelKind::bert_rel,
     .name = "bert_rel",
     .text = true,
     .self_attention = true,
     .heads = true,
     .positions = Positions::relative,
     .text_reference = "tests/reference/text_models.py TextModel (TransformerBlock, rel_bias)",
     .description = "BERT-style pre-LN Transformer with T5 relative position biases"},
};

constexpr bool model_kind_table_in_order() {
  for (size_t i = 0; i < std::size(kModelKindTable); ++i)
    if (size_t(kModelKindTable[i].kind) != i) return false;
  return std::size(kModelKindTable) == size_t(ModelKind::bert_rel) + 1;
}
static_assert(model_kind_table_in_order(), "kModelKindTable: one row per ModelKind, in the enum's order");

constexpr const ModelKindInfo& model_kind_info(ModelKind kind) { return kModelKindTable[size_t(kind)]; }
constexpr const char* model_kind_name(ModelKind kind) { return model_kind_info(kind).name; }
constexpr bool model_kind_serves(ModelKind kind, Domain domain) {
  return domain == Domain::vision ? model_kind_info(kind).vision : model_kind_info(kind).text;
}

// The kinds of a domain, in the table's order, and their names joined: "gmlp, amlp, ...".
std::vector<ModelKind> model_kinds(Domain domain);
std::string model_kind_names(Domain domain);

// The kind named `name` among the domain's; throws gmlp::Error, one line naming the value and the
// valid names: "invalid model config: model must be one of gmlp, ..., cnn (got 'x')" (vision),
// "invalid text model config: model must be one of gmlp, amlp, bert, bert_rel (got 'x')" (text).
ModelKind parse_model_kind(std::string_view name, Domain domain);

// JSON holds the name. from_json takes any kind's name (ModelConfig and TextConfig parse theirs
// with their domain first, and validate() checks it) and throws gmlp::Error listing every name.
void to_json(nlohmann::json& j, ModelKind kind);
void from_json(const nlohmann::json& j, ModelKind& kind);
std::ostream& operator<<(std::ostream& os, ModelKind kind);

}  // namespace gmlp
