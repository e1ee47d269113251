// What every model is to the trainer, the evaluator, checkpoints and the CLI: a table of named
// parameters in one flat array (gradients and the optimizer's moments share its layout), a
// memory plan for a maximum batch, and forward/backward on token-major activations.
//
//   auto model = make_model<float>(config);   // any kind in config.model
//   model->init(rng);  model->plan(128);
//   const float* logits = model->forward(images, B, &rng);   // rng: training (drop path, BN stats)
//   model->zero_grad();  model->backward(dlogits);
//
// Memory is planned once (Arena below): forward and backward allocate nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/rng.h"
#include "nn/config.h"

namespace gmlp {

class OnnxBuilder;  // nn/onnx_graph.h

struct ParamInfo {
  std::string name;            // state_dict key (timm's, where timm has the model)
  std::vector<int64_t> shape;  // state_dict shape
  int64_t offset = 0, numel = 0;
  bool decay = false;     // weight decay applies (timm: not to biases and 1-D params)
  bool trainable = true;  // false for buffers such as BatchNorm's running statistics
};

// Registers parameters and hands out their offsets into the flat array.
class ParamTable {
 public:
  int64_t add(const std::string& name, std::vector<int64_t> shape, bool decay, bool trainable = true);
  const std::vector<ParamInfo>& list() const { return params_; }
  int64_t total() const { return params_.empty() ? 0 : params_.back().offset + params_.back().numel; }

 private:
  std::vector<ParamInfo> params_;
};

// What a model's constructor does with its parameter table: allocate the weights and gradients
// (a model to use), or fill in the table only (param_table: names, shapes and the size check,
// so that a file or a config is checked before anything large is allocated).
enum class Storage { allocate, table_only };

// The most parameters a model may have: 8 GiB of float32 weights, as much again for their
// gradients, twice that for AdamW's moments.
inline constexpr int64_t kMaxParams = int64_t{1} << 31;

// What plan() lays out memory for: training keeps every layer's activations for backward;
// inference lets all layers share one layer's worth and has no backward scratch.
enum class Mode { train, infer };

// A memory plan: views are requested first, then one allocation is carved into them.
//   global(p, n)  the model's own buffers (input, residual stream, head), always distinct
//   keep(p, n)    a layer's activations saved for backward: distinct per layer in training,
//                 one shared region in inference
//   temp(p, n)    a layer's scratch within one forward or backward call: shared by all layers
// Layers call next_layer() between themselves so the plan knows where one ends.
template <class T>
class Arena {
 public:
  explicit Arena(Mode mode) : mode_(mode) {}
  bool training() const { return mode_ == Mode::train; }
  void global(T** p, int64_t n) { requests_.push_back({p, n, Region::global, layer_}); }
  void keep(T** p, int64_t n) { requests_.push_back({p, n, Region::keep, layer_}); }
  void temp(T** p, int64_t n) { requests_.push_back({p, n, Region::temp, layer_}); }
  void next_layer() { ++layer_; }
  // Elements allocate() would allocate.
  int64_t size() const;
  // Allocates buf and points every requested view into it (64-byte aligned each).
  void allocate(Buffer<T>& buf);
  // Points every requested view into base, size() elements laid out as allocate() lays them out.
  void place(T* base) const;

 private:
  enum class Region { global, keep, temp };
  struct Request {
    T** ptr;
    int64_t n;
    Region region;
    int layer;
  };
  Mode mode_;
  int layer_ = 0;
  std::vector<Request> requests_;
};

// What every model shares: the parameter table and its flat weights and gradients, and the
// activation plan. Vision models (Model) and text models (TextModel) add their inputs and heads.
template <class T>
class ParamModel {
 public:
  ParamModel() = default;
  virtual ~ParamModel();
  ParamModel(const ParamModel&) = delete;
  ParamModel& operator=(const ParamModel&) = delete;

  const std::vector<ParamInfo>& params() const { return table_.list(); }
  int64_t num_params() const { return int64_t(w_.size()); }
  // Trainable parameters only (what papers count; buffers excluded).
  int64_t num_trainable() const;
  // The weights the layers read: this model's own, or those of the model it shares them with.
  T* weights() { return shared_w_ ? shared_w_ : w_.data(); }
  const T* weights() const { return shared_w_ ? shared_w_ : w_.data(); }
  // The gradients, allocated by the first training plan (plan(B, Mode::train)); before it, null:
  // a model that only runs inference holds none.
  T* grads() { return g_.data(); }
  const T* grads() const { return g_.data(); }
  const ParamInfo& param(const std::string& name) const;  // throws gmlp::Error if unknown
  void zero_grad() { g_.zero(); }

  // Called by backward as it finishes gradients: from then on every gradient at an offset >= from
  // is final for the batch. Parameters are laid out in the order of the layers and backward runs
  // the layers last first, so the tail of grads() is ready first; data-parallel training starts
  // summing it over the ranks while backward goes on (dist::ChunkedSum). Empty: none.
  using GradsReady = std::function<void(int64_t from)>;
  void set_grads_ready(GradsReady ready) { grads_ready_ = std::move(ready); }

  // The reference implementation's initialisation (timm's where timm has the model).
  virtual void init(Rng& rng) = 0;

  // The weights stay as they are from now on (an inference-only process, once it has loaded
  // them): the matrix products that multiply by them keep them packed after their first call
  // (hold_constant in core/matmul.h) instead of packing them again on every call. A frozen model
  // plans no training. Released with the model.
  void freeze();
  bool frozen() const { return frozen_; }
  // Reads owner's weights from now on instead of holding its own: a model built to the same
  // config with Storage::table_only, for inference beside its owner (Model::infer's streams),
  // whose products then find the owner's packed weights. It plans inference only.
  void share_weights(ParamModel& owner);

  // Plans activations for batches of up to max_batch inputs. Must precede forward. Throws
  // gmlp::Error, before allocating, if they cannot fit in memory (naming --batch-size where a
  // smaller batch would lay out less). Under Mode::infer a model that infers in chunks
  // (Model::infer) lays out one chunk's activations (chunk_batch()), however large max_batch:
  // its infer() takes up to max_batch inputs, a chunk at a time, and a single forward up to
  // chunk_batch().
  void plan(int64_t max_batch, Mode mode = Mode::train);
  // The bytes plan(max_batch, mode) would allocate; allocates nothing, and leaves the model's
  // plan in place (not the host-side state of its last forward: call it between passes).
  int64_t plan_bytes(int64_t max_batch, Mode mode = Mode::train);
  int64_t planned_batch() const { return max_batch_; }
  // The inputs the activations are laid out for, the most one forward pass takes: planned_batch(),
  // or under an inference plan of a model that infers in chunks, the largest chunk (infer_chunk()).
  int64_t chunk_batch() const { return chunk_batch_; }
  Mode planned_mode() const { return mode_; }
  size_t activation_bytes() const { return acts_.size() * sizeof(T); }
  // Inputs per chunk of inference: the activation bytes an input takes in a plan of
  // planned_batch() into chunk_bytes, at least one and at most chunk_batch().
  int64_t infer_chunk(int64_t chunk_bytes = kInferChunkBytes) const;
  // Chosen on a 2-core Zen 3 (512 KB L2 a core) from inference at several batch sizes: the best
  // held 7–13 MB of planned activations. Whole batch → chunks there (`gmlp bench`, images/s,
  // median of three runs): fmnist-s at 64 1,145 → 1,651 (chunks of 17), cifar-s at 64 754 →
  // 1,048 (13), gmlp-ti16 at 8 32 → 39 (2). Since the gate saves nothing under an inference
  // plan an image plans fewer bytes, and the chunks are 22, 16 and 3 images.
  static constexpr int64_t kInferChunkBytes = int64_t(8) << 20;

 protected:
  int64_t add_param(const std::string& name, std::vector<int64_t> shape, bool decay, bool trainable = true) {
    return table_.add(name, std::move(shape), decay, trainable);
  }
  // After the last add_param: checks the total against kMaxParams and memory (an error names
  // the largest tensor and the fields of `config`, the model's JSON, that size it), then
  // allocates unless storage is table_only.
  void allocate_params(Storage storage, const nlohmann::json& config);
  virtual void lay_out(Arena<T>& arena, int64_t max_batch) = 0;
  // Whether inference runs in chunks of the plan's inputs (Model::infer), so that an inference
  // plan lays out one chunk.
  virtual bool infers_in_chunks() const { return false; }
  // The constructor marks where each layer's parameters begin (before adding them) and where the
  // layers end; backward then reports each layer's (grads_ready).
  void mark_layer_begin() { layer_begin_.push_back(table_.total()); }
  void mark_layers_end() { layers_end_ = table_.total(); }
  void layer_grads_ready(size_t layer) const {
    if (grads_ready_) grads_ready_(layer_begin_[layer]);
  }
  void head_grads_ready() const {
    if (grads_ready_) grads_ready_(layers_end_);
  }

  ParamTable table_;
  Buffer<T> w_, g_;
  Buffer<T> acts_;
  int64_t max_batch_ = 0, chunk_batch_ = 0, batch_ = 0;
  Mode mode_ = Mode::train;

 private:
  // The arena of plan(max_batch, mode), laid out for chunk_batch inputs (set here), and the bytes
  // an input takes in a plan of max_batch.
  Arena<T> lay_out_plan(int64_t max_batch, Mode mode, int64_t& chunk_batch, int64_t& per_input);

  GradsReady grads_ready_;
  int64_t per_input_bytes_ = 0;  // activation bytes per input in a plan of planned_batch()
  std::vector<int64_t> layer_begin_;
  int64_t layers_end_ = 0;
  bool frozen_ = false;
  T* shared_w_ = nullptr;  // share_weights' owner's weights, or null
};

// An image classifier.
template <class T>
class Model : public ParamModel<T> {
 public:
  explicit Model(const ModelConfig& config) : cfg_(config) {}
  const ModelConfig& config() const { return cfg_; }

  // images: (B, C, S, S), normalised. Returns logits (B, K), valid until the next forward.
  // rng non-null means training: stochastic depth is drawn from it and BatchNorm uses (and
  // updates) batch statistics.
  virtual const T* forward(const T* images, int64_t B, Rng* rng = nullptr) = 0;
  // Accumulates parameter gradients for the last forward's batch; dlogits: (B, K).
  virtual void backward(const T* dlogits) = 0;

  // Multiply-adds ×2 of one image's forward pass (matrix products and convolutions).
  virtual double flops_per_image() const = 0;

  // The eval-mode forward pass as ONNX nodes (nn/onnx_graph.h): images (B, C, S, S) → returns
  // the logits' value (B, K).
  virtual std::string emit(OnnxBuilder& g, const std::string& images) const = 0;

  // Inference (forward with no rng) on B <= planned_batch() images. Under an inference plan it
  // runs in chunks of at most infer_chunk() images and gathers the logits: a chunk's activations
  // stay in cache, where a whole batch's spill to memory between ops. Returns logits (B, K),
  // valid until the next call: forward(images, B)'s, up to summation order.
  const T* infer(const T* images, int64_t B, int64_t chunk_bytes = ParamModel<T>::kInferChunkBytes);
  // How many threads infer() runs B images on as streams, each thread taking whole chunks of
  // images through its own forward passes with its own activations (a model sharing these
  // weights), where otherwise all the threads share each op of one forward pass: every thread,
  // under an inference plan outside a parallel region with at least as many images as threads;
  // else 1 (no streams).
  int infer_streams(int64_t B) const;

 protected:
  ModelConfig cfg_;

  bool infers_in_chunks() const override { return true; }

 private:
  std::vector<T> gathered_;  // infer's logits when it runs in chunks; grows, never shrinks
  // infer's other streams: models of this config that share its weights, made on first use.
  std::vector<std::unique_ptr<Model<T>>> streams_;
};

// Builds the model config.model names (validating the config first).
template <class T>
std::unique_ptr<Model<T>> make_model(const ModelConfig& config, Storage storage = Storage::allocate);

// The parameters a model of `config` has (names, shapes, sizes), from a model built with
// Storage::table_only: validates the config and its size, allocates no weights.
std::vector<ParamInfo> param_table(const ModelConfig& config);

}  // namespace gmlp
