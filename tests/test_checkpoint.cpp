// Loading checkpoints: a file that is a valid safetensors file but not a valid gMLP checkpoint
// (missing, extra, mis-shaped or integer tensors, bad metadata) gets one sentence naming the
// file and the tensor; a timm state_dict without metadata loads with its config from shapes.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train/lm_trainer.h"

namespace gmlp {
namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.img_size = 8, c.patch_size = 2, c.depth = 2, c.dim = 4, c.ffn = 6, c.num_classes = 3;
  return c;
}

struct Tensors {  // a model's tensors as safetensors entries, editable before saving
  std::unique_ptr<Model<float>> model_ptr = make_model<float>(tiny());
  Model<float>& model = *model_ptr;
  std::vector<st::Entry> entries;
  Tensors() {
    for (const ParamInfo& p : model.params()) entries.push_back({p.name, p.shape, model.weights() + p.offset});
  }
  std::string save(const std::string& name, const std::map<std::string, std::string>& meta = {}) {
    std::string path = ::testing::TempDir() + name;
    st::save(path, entries, meta);
    return path;
  }
};

void expect_load_error(const std::string& path, const std::string& phrase) {
  try {
    load_checkpoint(path);
    ADD_FAILURE() << "loading " << path << " should fail with '" << phrase << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    const size_t at = msg.find(path);
    EXPECT_NE(at, std::string::npos) << msg;
    EXPECT_EQ(msg.find(path, at + 1), std::string::npos) << "the file is named twice: " << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
  }
  std::filesystem::remove(path);
}

TEST(Checkpoint, TimmStateDictWithoutMetadataLoads) {
  Tensors t;
  const std::string path = t.save("ck_plain.safetensors");
  const Checkpoint ck = load_checkpoint(path);
  std::filesystem::remove(path);
  EXPECT_EQ(ck.config.to_json(), tiny().to_json());
  EXPECT_EQ(ck.norm.mean, std::vector<float>{0.5f});
}

TEST(Checkpoint, MissingTensor) {
  Tensors t;
  t.entries.erase(t.entries.begin() + 5);
  expect_load_error(t.save("ck_missing.safetensors"), "tensor 'blocks.0.mlp_channels.fc1.bias' is missing");
}

TEST(Checkpoint, UnexpectedTensor) {
  Tensors t;
  t.entries.push_back({"pos_embed", {4}, t.model.weights()});
  expect_load_error(t.save("ck_extra.safetensors"), "unexpected tensor 'pos_embed'");
}

TEST(Checkpoint, WrongShapeAgainstMetadataConfig) {
  Tensors t;
  t.entries[3].shape = {6, 2, 2};  // blocks.0.norm.bias is [4]
  auto meta = std::map<std::string, std::string>{{"config", tiny().to_json().dump()}};
  expect_load_error(t.save("ck_shape.safetensors", meta), "has shape [6, 2, 2], expected [4]");
}

TEST(Checkpoint, NonSquareTokenCount) {
  Tensors t;
  for (auto& e : t.entries)
    if (e.name == "blocks.0.mlp_channels.gate.proj.weight") e.shape = {8, 2};
  expect_load_error(t.save("ck_tokens.safetensors"), "gate.proj.weight' has shape [8, 2]");
}

TEST(Checkpoint, IntegerDtypeIsRejected) {
  // Write by hand: one tensor as I32 (safetensors::save writes F32 only).
  Tensors t;
  const std::string path = t.save("ck_int.safetensors");
  std::string bytes;
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
    std::fclose(f);
  }
  const size_t at = bytes.find("\"head.bias\":{\"dtype\":\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + 22, 3, "I32");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  expect_load_error(path, "tensor 'head.bias' has dtype I32, expected a floating-point dtype");
}

TEST(Checkpoint, MalformedMetadata) {
  Tensors t;
  expect_load_error(t.save("ck_meta.safetensors", {{"config", "{not json"}}), "metadata 'config' is not valid JSON");
  Tensors t2;
  expect_load_error(t2.save("ck_std.safetensors", {{"std", "[0.0]"}}), "'std' must be positive");
  Tensors t3;
  expect_load_error(t3.save("ck_cfg.safetensors", {{"config", "{\"img_size\": 9}"}}),
                    "patch_size must divide img_size");
}

TEST(Checkpoint, TheOtherKindIsNamedWithTheCommandsItIsFor) {
  // A text checkpoint given where an image classifier belongs (predict, eval, viz, train
  // --resume) says what it is and which commands take it, not a config field's complaint.
  Tensors text;
  const std::string text_path = text.save(
      "ck_text.safetensors", {{"format", "gmlp-text"}, {"tokenizer", "AAAA"}, {"config", "{\"num_classes\": 0}"}});
  expect_load_error(text_path,
                    "is a text checkpoint (a masked-language model from gmlp pretrain), not an image classifier");
  Tensors task;
  const std::string task_path =
      task.save("ck_task.safetensors", {{"format", "gmlp-text"}, {"tokenizer", "AAAA"}, {"task", "genre"}});
  expect_load_error(task_path,
                    "is a text checkpoint (gmlp finetune, task genre), not an image classifier (of gmlp train, or a "
                    "timm state_dict): use it with gmlp fill-mask");
  // A run's optimizer state (train_state.safetensors), given to either kind of command.
  const float moments[2] = {0, 0};
  const std::string state_path = ::testing::TempDir() + "train_state.safetensors";
  st::save(state_path, {{"adamw.m", {2}, moments}, {"adamw.v", {2}, moments}}, {{"epoch", "1"}, {"adamw_steps", "9"}});
  const std::string beside = (std::filesystem::path(state_path).parent_path() / "checkpoint.safetensors").string();
  for (auto load :
       {+[](const std::string& p) { load_checkpoint(p); }, +[](const std::string& p) { load_text_checkpoint(p); }}) {
    try {
      load(state_path);
      ADD_FAILURE() << "an optimizer state loaded as a model";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), cat("'", state_path,
                                           "' is a run's optimizer state (the AdamW moments, no weights), not a "
                                           "checkpoint: use '",
                                           beside, "' from the same run"));
    }
  }
  std::filesystem::remove(state_path);
  // And the other way: an image classifier given to fill-mask or finetune --init.
  for (const auto& meta :
       {std::map<std::string, std::string>{{"format", "gmlp"}}, std::map<std::string, std::string>{}}) {
    Tensors image;
    const std::string path = image.save("ck_image.safetensors", meta);
    try {
      load_text_checkpoint(path);
      ADD_FAILURE() << "an image checkpoint loaded as a text one";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + path + "' is an image classifier checkpoint ("), std::string::npos) << msg;
      EXPECT_NE(msg.find("not a text model (of gmlp pretrain or finetune): use it with gmlp predict"),
                std::string::npos)
          << msg;
    }
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace gmlp
