#include "train/checkpoint.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/error.h"
#include "io/safetensors.h"
#include "nn/model_kind.h"
#include "train/run_files.h"

namespace gmlp {

namespace fs = std::filesystem;

void save_checkpoint(const std::string& path, const Model<float>& model, const data::Normalization& norm,
                     const std::vector<std::string>& class_names, const std::map<std::string, std::string>& extra) {
  std::vector<st::Entry> entries;
  for (const ParamInfo& p : model.params()) entries.push_back({p.name, p.shape, model.weights() + p.offset});
  std::map<std::string, std::string> meta = extra;
  meta["format"] = "gmlp";
  meta["config"] = model.config().to_json().dump();
  meta["mean"] = nlohmann::json(norm.mean).dump();
  meta["std"] = nlohmann::json(norm.std).dump();
  meta["classes"] = nlohmann::json(class_names).dump();
  st::save(path, entries, meta);
}

void check_tensors(const st::File& file, const std::vector<ParamInfo>& table) {
  int64_t total = 0;
  for (const ParamInfo& p : table) total += p.numel;
  // What the config asks for, in every message.
  const std::string asked = cat(" (its config asks for ", table.size(), " tensors of ", total,
                                " values in all; the file has ", file.tensors().size(), ")");
  std::set<std::string> expected;
  for (const ParamInfo& p : table) {
    expected.insert(p.name);
    const st::TensorInfo* t = file.find(p.name);
    if (!t) fail("tensor '", p.name, "' is missing", asked);
    if (t->shape != p.shape)
      fail("tensor '", p.name, "' has shape ", st::shape_str(t->shape), ", expected ", st::shape_str(p.shape), asked);
    if (t->dtype != st::Dtype::F32 && t->dtype != st::Dtype::F16 && t->dtype != st::Dtype::BF16 &&
        t->dtype != st::Dtype::F64)
      fail("tensor '", p.name, "' has dtype ", st::dtype_name(t->dtype),
           ", expected a floating-point dtype (F32, F16, BF16 or F64)");
  }
  for (const st::TensorInfo& t : file.tensors())
    if (!expected.count(t.name) && !t.name.ends_with(".num_batches_tracked"))  // torch BN counter
      fail("unexpected tensor '", t.name, "'", asked);
}

namespace {
// The heads of a timm ViT of width D, which its tensors do not hold: timm's named models'
// (tiny 192 → 3, small 384 → 6, base 768 → 12, large 1024 and huge 1280 → 16), else one per 64
// channels, else one.
int timm_default_heads(int64_t D) {
  for (auto [width, heads] : {std::pair{192, 3}, {384, 6}, {768, 12}, {1024, 16}, {1280, 16}})
    if (D == width) return heads;
  return D % 64 == 0 ? int(D / 64) : 1;
}
}  // namespace

ModelConfig config_from_tensors(const st::File& file, std::vector<std::string>* notes) {
  const std::string expected =
      " (expected a timm state_dict: gMLP, MlpMixer with MixerBlock or ResBlock + Affine, or VisionTransformer)";
  auto shape = [&](const std::string& name) {
    const st::TensorInfo* t = file.find(name);
    if (!t) fail("failed to load checkpoint '", file.path(), "': tensor '", name, "' is missing", expected);
    return t->shape;
  };
  auto dims = [&](const std::string& name, size_t rank) {
    auto s = shape(name);
    if (s.size() != rank)
      fail("failed to load checkpoint '", file.path(), "': tensor '", name, "' has shape ", st::shape_str(s),
           ", expected ", rank, " dimensions");
    return s;
  };
  auto has = [&](const std::string& name) { return file.find(name) != nullptr; };
  ModelConfig c;
  // The kind, from the first block's tensors: each family names its token mixing its own way.
  std::string first;  // a tensor every block of the kind has
  if (has("blocks.0.mlp_channels.gate.proj.weight")) {
    c.model = ModelKind::gmlp, first = "norm.weight";
  } else if (has("blocks.0.mlp_tokens.fc1.weight")) {
    c.model = ModelKind::mixer, first = "norm1.weight";
  } else if (has("blocks.0.linear_tokens.weight")) {
    c.model = ModelKind::resmlp, first = "norm1.alpha";
  } else if (has("blocks.0.attn.qkv.weight")) {
    c.model = ModelKind::vit, first = "norm1.weight";
    // timm's pooling shows in its tensors: global_pool='avg' normalises after pooling (fc_norm).
    c.class_token = has("cls_token");
    c.global_pool = has("fc_norm.weight") ? "avg" : "token";
    if (!c.class_token && c.global_pool == "token")
      fail("failed to load checkpoint '", file.path(),
           "': a VisionTransformer without a class token or 'fc_norm.weight' (global_pool='avg' with "
           "fc_norm=False) is not one gmlp runs; timm's global_pool='token' and global_pool='avg' (fc_norm) are");
    if (has("reg_token"))
      fail("failed to load checkpoint '", file.path(),
           "': a VisionTransformer with register tokens ('reg_token') is not one gmlp runs");
  } else {
    fail("failed to load checkpoint '", file.path(), "': tensor 'blocks.0.norm.weight' is missing", expected);
  }
  const std::string stem_name = c.model == ModelKind::vit ? "patch_embed.proj.weight" : "stem.proj.weight";
  const auto stem = dims(stem_name, 4);
  if (stem[2] != stem[3])
    fail("failed to load checkpoint '", file.path(), "': tensor '", stem_name, "' has shape ", st::shape_str(stem),
         ", expected square patches [D, C, P, P]");
  c.dim = int(stem[0]), c.in_chans = int(stem[1]), c.patch_size = int(stem[2]);
  int depth = 0;
  while (has("blocks." + std::to_string(depth) + "." + first)) ++depth;
  c.depth = depth;
  int64_t patches = 0;  // the token mixing's size is the number of patches
  switch (c.model) {
    case ModelKind::gmlp: {
      c.ffn = int(dims("blocks.0.mlp_channels.fc1.weight", 2)[0]);
      const auto proj = dims("blocks.0.mlp_channels.gate.proj.weight", 2);
      if (proj[0] != proj[1])
        fail("failed to load checkpoint '", file.path(),
             "': tensor 'blocks.0.mlp_channels.gate.proj.weight' has shape ", st::shape_str(proj), ", expected [N, N]");
      patches = proj[0];
      break;
    }
    case ModelKind::mixer: {
      const auto tokens = dims("blocks.0.mlp_tokens.fc1.weight", 2);  // [token_ffn, N]
      c.token_ffn = int(tokens[0]), patches = tokens[1];
      c.ffn = int(dims("blocks.0.mlp_channels.fc1.weight", 2)[0]);
      break;
    }
    case ModelKind::resmlp:
      patches = dims("blocks.0.linear_tokens.weight", 2)[0];
      c.ffn = int(dims("blocks.0.mlp_channels.fc1.weight", 2)[0]);
      break;
    case ModelKind::vit: {
      patches = dims("pos_embed", 3)[1] - (c.class_token ? 1 : 0);  // the class token's position first
      c.ffn = int(dims("blocks.0.mlp.fc1.weight", 2)[0]);
      const auto meta = file.metadata().find("heads");
      if (meta != file.metadata().end()) {
        try {
          c.heads = std::stoi(meta->second);
        } catch (const std::exception&) {
          fail("failed to load checkpoint '", file.path(), "': metadata 'heads' is '", meta->second,
               "', expected a whole number");
        }
      } else {
        c.heads = timm_default_heads(c.dim);
        if (notes)
          notes->push_back(cat("'", file.path(), "' does not say its ViT's heads: reading it with ", c.heads,
                               ", timm's default for width ", c.dim,
                               " (save the state_dict with metadata {\"heads\": \"H\"} to say)"));
      }
      break;
    }
    default: break;
  }
  const int grid = int(std::lround(std::sqrt(double(patches))));
  if (patches <= 0 || int64_t(grid) * grid != patches)
    fail("failed to load checkpoint '", file.path(), "': its blocks mix ", patches,
         " tokens, expected a square number of patches");
  c.img_size = grid * c.patch_size;
  c.num_classes = int(dims("head.weight", 2)[0]);
  return c;
}

CheckpointKind checkpoint_kind(const st::File& file) {
  const auto& meta = file.metadata();
  const auto format = meta.find("format");
  if (meta.count("adamw_steps") && file.find("adamw.m")) return CheckpointKind::run_state;
  if (meta.count("tokenizer") || (format != meta.end() && format->second == "gmlp-text")) return CheckpointKind::text;
  if ((format != meta.end() && format->second == "gmlp") || file.find("stem.proj.weight") || file.find("head.weight"))
    return CheckpointKind::image;
  return CheckpointKind::unknown;
}

std::string describe_checkpoint(const st::File& file) {
  switch (checkpoint_kind(file)) {
    case CheckpointKind::image:
      return file.metadata().count("format") ? "an image classifier checkpoint (gmlp train)"
                                             : "an image classifier checkpoint (a timm state_dict)";
    case CheckpointKind::text: {
      const auto task = file.metadata().find("task");
      if (task != file.metadata().end()) return "a text checkpoint (gmlp finetune, task " + task->second + ")";
      return "a text checkpoint (a masked-language model from gmlp pretrain)";
    }
    case CheckpointKind::run_state: return "a run's optimizer state (the AdamW moments, no weights)";
    case CheckpointKind::unknown: break;
  }
  return "a safetensors file of neither gmlp's image nor its text checkpoints";
}

void refuse_run_state(const st::File& file, const std::string& path) {
  if (checkpoint_kind(file) != CheckpointKind::run_state) return;
  const std::string beside = (fs::path(path).parent_path() / RunFiles::kCheckpoint).string();
  fail("'", path, "' is ", describe_checkpoint(file), ", not a checkpoint: use '", beside, "' from the same run");
}

void change_image_size(Checkpoint& ck, const std::string& path, int img_size, GridFit fit) {
  if (img_size == ck.config.img_size) return;
  check_resizable(ck.config, img_size);
  ModelConfig to = ck.config;
  to.img_size = img_size;
  const std::vector<float> weights = resample_weights(ck.config, ck.model->weights(), to, fit);
  auto model = make_model<float>(to);
  GMLP_CHECK(int64_t(weights.size()) == model->num_params());
  std::copy(weights.begin(), weights.end(), model->weights());
  ck.notes.push_back(cat("'", path, "' was trained at ", ck.config.img_size, " px: running it at ", img_size,
                         " px, its grid-bound weights resampled for images ",
                         fit == GridFit::pad ? "padded" : "resized", " to that size"));
  ck.config = to;
  ck.model = std::move(model);
}

Checkpoint load_checkpoint(const std::string& path) {
  const st::File file = st::File::open(path);
  refuse_run_state(file, path);
  if (checkpoint_kind(file) == CheckpointKind::text)
    fail("'", path, "' is ", describe_checkpoint(file),
         ", not an image classifier (of gmlp train, or a timm state_dict): use it with gmlp fill-mask, "
         "or as gmlp finetune --init");
  Checkpoint ck;
  ck.metadata = file.metadata();
  auto meta_json = [&](const char* key) -> nlohmann::json {
    auto it = ck.metadata.find(key);
    if (it == ck.metadata.end()) return nullptr;
    try {
      return nlohmann::json::parse(it->second);
    } catch (const std::exception& e) {
      fail("failed to load checkpoint '", path, "': metadata '", key, "' is not valid JSON");
    }
  };
  const nlohmann::json cfg = meta_json("config");
  if (!cfg.is_object()) {
    ck.config = config_from_tensors(file, &ck.notes);  // its errors name the file
  } else {
    try {
      ck.config = ModelConfig::from_json(cfg);
    } catch (const nlohmann::json::exception& e) {
      fail("failed to load checkpoint '", path, "': metadata 'config' is malformed: ", e.what());
    } catch (const Error& e) {  // an unknown model kind
      fail("failed to load checkpoint '", path, "': ", e.what());
    }
  }
  try {  // the config, then the tensors it asks for, before anything is allocated
    ck.config.validate();
    check_tensors(file, param_table(ck.config));
  } catch (const Error& e) {
    fail("failed to load checkpoint '", path, "': ", e.what());
  }
  ck.norm = data::Normalization::gmlp_default(ck.config.in_chans);
  const nlohmann::json mean = meta_json("mean"), stdv = meta_json("std"), classes = meta_json("classes");
  try {
    if (mean.is_array()) ck.norm.mean = mean.get<std::vector<float>>();
    if (stdv.is_array()) ck.norm.std = stdv.get<std::vector<float>>();
    if (classes.is_array()) ck.class_names = classes.get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception&) {
    fail("failed to load checkpoint '", path, "': metadata 'mean', 'std' or 'classes' is malformed");
  }
  if (int(ck.norm.mean.size()) != ck.config.in_chans || int(ck.norm.std.size()) != ck.config.in_chans)
    fail("failed to load checkpoint '", path, "': metadata 'mean'/'std' must have ", ck.config.in_chans,
         " values, one per channel");
  for (float s : ck.norm.std)
    if (!(s > 0)) fail("failed to load checkpoint '", path, "': metadata 'std' must be positive");

  ck.model = make_model<float>(ck.config);
  for (const ParamInfo& p : ck.model->params()) {  // check_tensors has checked them all
    const std::vector<float> v = file.read_f32(p.name, p.shape);
    std::copy(v.begin(), v.end(), ck.model->weights() + p.offset);
  }
  return ck;
}

}  // namespace gmlp
