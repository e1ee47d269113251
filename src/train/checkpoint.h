// Checkpoints are safetensors files whose tensors are exactly timm's state_dict where timm has
// the model (gMLP, Mixer, ResMLP, ViT: names, shapes, float32), so they load into timm with
// strict=True, and a state_dict saved from timm loads here with no flags: the architecture is
// read from the tensor names and shapes. Our metadata:
// "config" (ModelConfig JSON), "mean"/"std" (input normalisation), "classes" (names), and
// anything the caller adds (epoch, step). Writes are atomic.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/transform.h"
#include "nn/model.h"
#include "nn/resample.h"

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
  // What reading a timm file had to assume (a ViT's heads, which its tensors do not hold), for
  // the command to say.
  std::vector<std::string> notes;
};

void save_checkpoint(const std::string& path, const Model<float>& model, const data::Normalization& norm,
                     const std::vector<std::string>& class_names, const std::map<std::string, std::string>& extra = {});

Checkpoint load_checkpoint(const std::string& path);

// The checkpoint's model at another image size, its grid-bound weights resampled for images
// brought to that size by `fit` (nn/resample.h); adds a note saying so. Nothing changes when
// img_size is the model's; a kind or size that cannot change is a one-line gmlp::Error.
void change_image_size(Checkpoint& ck, const std::string& path, int img_size, GridFit fit);

// Checks that `file` holds exactly the tensors of `table` (param_table of its config): every
// name, shape and a floating-point dtype, and no other tensor (torch's BatchNorm counters
// aside). Runs before the model is allocated, so a small file whose config asks for a large
// model fails at once. Throws gmlp::Error naming the first mismatch, for the caller to prefix
// with the file.
void check_tensors(const st::File& file, const std::vector<ParamInfo>& table);

// The architecture of a timm state_dict (gMLP, MlpMixer with MixerBlock or with ResBlock +
// Affine, VisionTransformer with global_pool token or avg), from its tensor names and shapes. A ViT's heads
// come from the metadata key "heads", else timm's default for its width, which is added to notes.
ModelConfig config_from_tensors(const st::File& file, std::vector<std::string>* notes = nullptr);

// What a safetensors file holds, from its metadata and tensor names, so that a command given
// the other kind says so: an image classifier (gmlp train's, or a timm state_dict), a text
// model (gmlp pretrain's or finetune's, with its tokenizer), a run's optimizer state (its
// train_state.safetensors, which holds no weights), or none that it can tell.
enum class CheckpointKind { image, text, run_state, unknown };
CheckpointKind checkpoint_kind(const st::File& file);
// The kind in words, for such errors: "an image classifier checkpoint (gmlp train)", "a text
// checkpoint (a masked-language model from gmlp pretrain)", "a text checkpoint (gmlp finetune,
// task genre)".
std::string describe_checkpoint(const st::File& file);
// Throws gmlp::Error if `file` (read from path) is a run's optimizer state rather than a model:
// a one-line error naming the checkpoint beside it.
void refuse_run_state(const st::File& file, const std::string& path);

}  // namespace gmlp
