// The vision gMLP (Liu et al. 2021, §2; timm MlpMixer with SpatialGatingBlock):
//   x = PatchEmbed(img);  L × [ x += DropPath(fc2(SGU(GELU(fc1(LayerNorm(x)))))) ];
//   logits = head(mean_tokens(LayerNorm(x)))
// Parameters, gradients (and the optimizer's moments, elsewhere) share one flat layout described
// by params(), whose names and shapes are timm's state_dict. Activations are token-major (N, B, ·)
// and planned once for a maximum batch: forward and backward allocate nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/rng.h"
#include "nn/config.h"

namespace gmlp {

struct ParamInfo {
  std::string name;            // timm state_dict key
  std::vector<int64_t> shape;  // timm shape
  int64_t offset = 0, numel = 0;
  bool decay = false;          // weight decay applies (timm: not to biases and 1-D params)
};

template <class T>
class Gmlp {
 public:
  explicit Gmlp(const GmlpConfig& config);

  const GmlpConfig& config() const { return cfg_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t num_params() const { return int64_t(w_.size()); }
  T* weights() { return w_.data(); }
  const T* weights() const { return w_.data(); }
  T* grads() { return g_.data(); }
  const T* grads() const { return g_.data(); }
  const ParamInfo& param(const std::string& name) const;  // throws gmlp::Error if unknown

  // timm's initialisation: xavier-uniform linears (fc biases N(0, 1e-6)), lecun-normal stem,
  // zero head, LayerNorm (1, 0), SGU W ~ N(0, 1e-6) and b = 1.
  void init(Rng& rng);
  void zero_grad() { g_.zero(); }

  // What plan() lays out memory for: training keeps every block's activations for backward;
  // inference reuses one block's buffers for all blocks and has no backward scratch.
  enum class Mode { train, infer };
  // Plans activations for batches of up to max_batch images. Must precede forward().
  void plan(int64_t max_batch, Mode mode = Mode::train);
  int64_t planned_batch() const { return max_batch_; }
  size_t activation_bytes() const { return acts_.size() * sizeof(T); }

  // images: (B, C, S, S), normalised. Returns logits (B, K), valid until the next forward.
  // drop_rng non-null means training: stochastic depth is sampled from it.
  const T* forward(const T* images, int64_t B, Rng* drop_rng = nullptr);
  // Accumulates parameter gradients for the last forward's batch; dlogits: (B, K).
  void backward(const T* dlogits);

  // Multiply-adds ×2 of one image's forward pass (matrix products only).
  double flops_per_image() const;

 private:
  struct BlockParams {  // offsets into the flat parameter array
    int64_t norm_w, norm_b, fc1_w, fc1_b, gnorm_w, gnorm_b, proj_w, proj_b, fc2_w, fc2_b;
  };
  struct BlockActs {  // saved for backward, token-major
    T *xn, *mean1, *rstd1;        // LayerNorm(x): (N,B,D), (N·B), (N·B)
    T *z, *a;                     // fc1 output before and after GELU: (N,B,F)
    T *vn, *mean2, *rstd2, *g;    // the gate: LayerNorm(v), its stats, W·v̂ + b: (N,B,H)
    T *s;                         // gate output u ⊙ g: (N,B,H)
    T *keep;                      // drop-path weights (B), or unused
    bool dropped;                 // keep holds this step's draw
  };

  int64_t add_param(const std::string& name, std::vector<int64_t> shape, bool decay);

  GmlpConfig cfg_;
  std::vector<ParamInfo> params_;
  int64_t stem_w_ = 0, stem_b_ = 0, norm_w_ = 0, norm_b_ = 0, head_w_ = 0, head_b_ = 0;
  std::vector<BlockParams> blocks_;
  Buffer<T> w_, g_;

  int64_t max_batch_ = 0, batch_ = 0;
  Mode mode_ = Mode::train;
  Buffer<T> acts_;
  T *patches_ = nullptr, *y_ = nullptr, *xf_ = nullptr, *meanf_ = nullptr, *rstdf_ = nullptr,
    *pooled_ = nullptr, *logits_ = nullptr;
  std::vector<T*> x_;  // residual stream: x_[l] is block l's input, x_[L] the last output
  std::vector<BlockActs> acts_by_block_;
  // backward scratch
  T *dpooled_ = nullptr, *dxf_ = nullptr, *dX_ = nullptr, *dY_ = nullptr, *ds_ = nullptr,
    *dz_ = nullptr, *dxn_ = nullptr, *sgu_scratch_ = nullptr;
};

}  // namespace gmlp
