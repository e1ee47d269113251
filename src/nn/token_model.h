// Every patch-token model (gMLP, aMLP, ViT/DeiT, MLP-Mixer, ResMLP, feed-forward-only, EAMLP) is
// one composition:
//   x = PatchEmbed(img) [+ class token, + learned positions];
//   x = x + DropPath(LayerScale · f(Norm(x)))   for each residual sublayer;
//   logits = head(pool(Norm(x)))                 pool: token mean, or the class token
// A model kind is a choice of sublayers (Residual: norm, branch f, optional layer scale) and of
// stem, norm and pool; the names of the parameters are those of the reference (timm's where timm
// has the model). Activations are token-major (N, B, ·): a branch that mixes tokens sees the
// batch as one (N × B·D) matrix, so its products are single matrix products.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/operand.h"
#include "nn/model.h"

namespace gmlp {

// f in x + f(Norm(x)): reads xn (N, B, D), writes y (N, B, D).
template <class T>
class Branch {
 public:
  virtual ~Branch() = default;
  virtual void init(T* w, Rng& rng) const = 0;
  virtual void lay_out(Arena<T>& arena, int64_t max_batch) = 0;
  // Whether xn is read only as an operand of matrix products: then the norm stores it as bf16
  // where the activations are (bf16_activations(), core/operand.h), and xn arrives so.
  virtual bool multiplies_xn_only() const { return false; }
  // Whether forward can add the residual stream into y (forward's add): y = add + f(xn), summed
  // in the epilogue of the branch's last product (linear_forward), with the bits of
  // residual_forward after it and without its pass over the three arrays.
  virtual bool adds_residual() const { return false; }
  // add: nullptr, or (where adds_residual()) the (N, B, D) input to add to the branch's output.
  virtual void forward(T* y, OperandOf<T> xn, const T* w, int64_t B, const T* add) = 0;
  // dxn overwritten with ∂L/∂xn from dy = ∂L/∂y (read only); parameter gradients accumulate into g.
  virtual void backward(T* dxn, const T* dy, OperandOf<T> xn, const T* w, T* g, int64_t B) = 0;
  virtual double flops_per_image() const = 0;
  // Its nodes in an ONNX graph (nn/onnx_graph.h): xn (B, N, D) → returns y's value (B, N, D).
  virtual std::string emit(OnnxBuilder& g, const std::string& xn) const = 0;
};

// How a branch's weights start: timm MlpMixer's (xavier-uniform, biases of 'mlp' layers
// N(0, 1e-6)) or timm VisionTransformer's (truncated normal std 0.02, zero biases).
enum class InitStyle { mixer, vit };

enum class NormKind { layernorm, affine, none };  // affine: ResMLP's α ⊙ x + β

struct ResidualSpec {
  NormKind norm = NormKind::layernorm;
  std::string norm_name;   // e.g. "blocks.0.norm1" (weight/bias, or alpha/beta)
  std::string scale_name;  // layer scale (ResMLP "blocks.0.ls1"), or empty for none
  float scale_init = 0.1f;
  double drop_rate = 0;  // stochastic depth
  float eps = 1e-6f;
};

template <class T>
class Residual {
 public:
  // Registers the norm's and the layer scale's parameters; the branch registers its own, then
  // is attached (so names follow the reference's order: norm, then branch).
  Residual(ParamTable& table, const ResidualSpec& spec, int64_t N, int64_t D);
  void attach(std::unique_ptr<Branch<T>> branch) { branch_ = std::move(branch); }
  void init(T* w, Rng& rng) const;
  void lay_out(Arena<T>& arena, int64_t max_batch);
  // out (N, B, D) overwritten; must not alias in. rng non-null: training (drop path).
  void forward(T* out, const T* in, const T* w, int64_t B, Rng* rng);
  // dx: ∂L/∂out on entry, ∂L/∂in on exit. in: this sublayer's forward input.
  void backward(T* dx, const T* in, const T* w, T* g, int64_t B);
  double flops_per_image() const { return branch_->flops_per_image(); }
  // x (B, N, D) → returns out's value, in eval mode (no drop path).
  std::string emit(OnnxBuilder& g, const std::string& x) const;

 private:
  ResidualSpec spec_;
  std::unique_ptr<Branch<T>> branch_;
  int64_t N_, D_;
  int64_t norm_w_ = -1, norm_b_ = -1, scale_ = -1;
  T *xn_ = nullptr, *mean_ = nullptr, *rstd_ = nullptr, *y_ = nullptr, *keep_ = nullptr;
  T *dy_ = nullptr, *dxn_ = nullptr;
  bool dropped_ = false;
  bool xn_bf16_ = false;  // xn_ holds bfloat16, as the last forward wrote it
};

template <class T>
class TokenModel final : public Model<T> {
 public:
  explicit TokenModel(const ModelConfig& config, Storage storage = Storage::allocate);
  void init(Rng& rng) override;
  const T* forward(const T* images, int64_t B, Rng* rng = nullptr) override;
  void backward(const T* dlogits) override;
  double flops_per_image() const override;
  std::string emit(OnnxBuilder& g, const std::string& images) const override;

 protected:
  void lay_out(Arena<T>& arena, int64_t max_batch) override;

 private:
  using Model<T>::cfg_;
  std::vector<std::unique_ptr<Residual<T>>> layers_;
  InitStyle style_ = InitStyle::mixer;
  NormKind final_norm_ = NormKind::layernorm;
  bool vit_stem_ = false;  // timm's ViT stem: patch_embed.proj, then learned positions (and the class token)
  bool cls_ = false;       // a class token ahead of the patches
  bool fc_norm_ = false;   // ViT global_pool avg: the mean of the patch tokens first, then the final norm (fc_norm)
  int64_t stem_w_ = 0, stem_b_ = 0, cls_token_ = -1, pos_embed_ = -1;
  int64_t norm_w_ = 0, norm_b_ = 0, head_w_ = 0, head_b_ = 0;

  T *patches_ = nullptr, *xf_ = nullptr, *meanf_ = nullptr, *rstdf_ = nullptr, *pooled_ = nullptr, *logits_ = nullptr;
  std::vector<T*> x_;  // residual stream: x_[i] is sublayer i's input, x_[L] the last output
  T *dpooled_ = nullptr, *dxf_ = nullptr, *dX_ = nullptr;
};

}  // namespace gmlp
