// Checkpoints are safetensors files whose tensors are exactly timm's gMLP state_dict (names,
// shapes, float32), so they load into timm with strict=True, and a state_dict saved from timm
// loads here with no flags: the architecture is read from the tensor shapes. Our metadata:
// "config" (ModelConfig JSON), "mean"/"std" (input normalisation), "classes" (names), and
// anything the caller adds (epoch, step). Writes are atomic.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/transform.h"
#include "nn/model.h"

namespace gmlp {

namespace st {
class File;
}

struct Checkpoint {
  ModelConfig config;
  data::Normalization norm;
  std::vector<std::string> class_names;  // may be empty (a timm file)
  std::map<std::string, std::string> metadata;
  std::unique_ptr<Model<float>> model;
};

void save_checkpoint(const std::string& path, const Model<float>& model, const data::Normalization& norm,
                     const std::vector<std::string>& class_names, const std::map<std::string, std::string>& extra = {});

Checkpoint load_checkpoint(const std::string& path);

// Checks that `file` holds exactly the tensors of `table` (param_table of its config): every
// name, shape and a floating-point dtype, and no other tensor (torch's BatchNorm counters
// aside). Runs before the model is allocated, so a small file whose config asks for a large
// model fails at once. Throws gmlp::Error naming the first mismatch, for the caller to prefix
// with the file.
void check_tensors(const st::File& file, const std::vector<ParamInfo>& table);

// The architecture of a gMLP state_dict, from its tensor shapes alone.
ModelConfig config_from_tensors(const st::File& file);

// What a safetensors file holds, from its metadata and tensor names, so that a command given
// the other kind says so: an image classifier (gmlp train's, or a timm gMLP state_dict), a text
// model (gmlp pretrain's or finetune's, with its tokenizer), or neither that it can tell.
enum class CheckpointKind { image, text, unknown };
CheckpointKind checkpoint_kind(const st::File& file);
// The kind in words, for such errors: "an image classifier checkpoint (gmlp train)", "a text
// checkpoint (a masked-language model from gmlp pretrain)", "a text checkpoint (gmlp finetune,
// task genre)".
std::string describe_checkpoint(const st::File& file);

}  // namespace gmlp
