// The small residual CNN the MLPs are compared against: CIFAR-style ResNet basic blocks
// (torchvision's BasicBlock), NCHW activations throughout.
//   stem:    conv3x3(C → D) → BN → ReLU
//   stages:  three, of widths D, 2D, 4D, each `depth` basic blocks; the first block of stages
//            1 and 2 has stride 2:
//              out = ReLU(BN2(conv3x3(ReLU(BN1(conv3x3(x, stride))))) + shortcut(x)),
//            shortcut the identity, or conv1x1(stride) → BN where the shape changes
//   head:    global average pool → Linear(4D → K)
// Convolutions have no bias. BatchNorm is torch's (momentum 0.1, eps 1e-5); its running
// statistics are parameters with trainable = false (no gradient, no decay) that a training
// forward updates in place in the weights array. Names are the reference's state_dict keys
// (tests/reference/models.py: Cnn): stem.conv, stem.bn, stages.{s}.{i}.conv1 / bn1 / conv2 /
// bn2 / shortcut.conv / shortcut.bn, head.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"
#include "ops/batchnorm.h"
#include "ops/conv2d.h"

namespace gmlp {

// conv (k×k, no bias, pad k/2) → BatchNorm2d on square (S × S) inputs. Keeps the convolution's
// output and the statistics BN normalised with, for backward.
// The convolution runs over chunks of images (NCHW batch slices are contiguous), so that its
// im2col scratch stays about the size of the layer's output instead of k²·Cin/Cout times it:
// chunk = the planned batch · Cout / (k²·Cin) images, at least kMinColumns output pixels' worth
// (the matrix products stay wide), at most the batch. It depends on the plan's batch only, not
// on its mode, so the training and inference plans compute the same numbers.
template <class T>
class ConvBn {
 public:
  ConvBn(ParamTable& t, const std::string& conv_name, const std::string& bn_name, int64_t cin, int64_t cout, int64_t k,
         int64_t stride, int64_t S);
  void init(T* w, Rng& rng) const;
  void lay_out(Arena<T>& arena, int64_t max_batch);
  // y (B, Cout, So, So) overwritten with BN(conv(x)); x (B, Cin, S, S). training: batch
  // statistics, running statistics (in w) updated; otherwise the running statistics.
  // col: scratch of at least col_size() values (for the planned batch).
  void forward(T* y, const T* x, T* w, int64_t B, bool training, T* col);
  // Training-mode backward. dx (B, Cin, S, S) overwritten (nullptr: skipped); dy (B, Cout, So,
  // So) read only; dz: scratch of out_size(B) (ends holding ∂L/∂conv output).
  void backward(T* dx, const T* dy, const T* x, const T* w, T* g, int64_t B, T* dz, T* col);

  ConvShape shape(int64_t B) const { return {B, cin_, S_, S_, cout_, k_, stride_, k_ / 2}; }
  int64_t out_side() const { return shape(1).Ho(); }
  int64_t out_size(int64_t B) const { return B * cout_ * out_side() * out_side(); }
  int64_t col_size() const { return shape(chunk_).col_size(); }  // after lay_out
  double flops_per_image() const { return 2.0 * double(cout_ * cin_ * k_ * k_ * out_side() * out_side()); }
  // Eval mode (the running statistics): x (B, Cin, S, S) → returns the value (B, Cout, So, So).
  std::string emit(OnnxBuilder& g, const std::string& x) const;

 private:
  static constexpr int64_t kMinColumns = 128;
  int64_t cin_, cout_, k_, stride_, S_, chunk_ = 1;
  int64_t conv_ = 0, bn_w_ = 0, bn_b_ = 0, bn_rm_ = 0, bn_rv_ = 0;
  T *z_ = nullptr, *mean_ = nullptr, *rstd_ = nullptr;
};

// torchvision's BasicBlock (expansion 1), the shortcut conv1x1 → BN where the shape changes.
template <class T>
class BasicBlock {
 public:
  BasicBlock(ParamTable& t, const std::string& prefix, int64_t cin, int64_t cout, int64_t stride, int64_t S);
  void init(T* w, Rng& rng) const;
  void lay_out(Arena<T>& arena, int64_t max_batch);  // one layer: ends with next_layer()
  // out (B, Cout, So, So) overwritten; must not alias x (B, Cin, S, S).
  void forward(T* out, const T* x, T* w, int64_t B, bool training);
  // dy: ∂L/∂out (clobbered); dx overwritten with ∂L/∂x. x, out: this block's forward input and
  // output.
  void backward(T* dx, T* dy, const T* x, const T* out, const T* w, T* g, int64_t B);

  int64_t out_side() const { return conv1_.out_side(); }
  int64_t out_size(int64_t B) const { return conv1_.out_size(B); }
  double flops_per_image() const;
  std::string emit(OnnxBuilder& g, const std::string& x) const;  // eval mode

 private:
  int64_t cin_, S_;
  ConvBn<T> conv1_, conv2_;
  std::unique_ptr<ConvBn<T>> shortcut_;
  T *h1_ = nullptr, *ta_ = nullptr, *tb_ = nullptr, *col_ = nullptr, *dxs_ = nullptr;
};

template <class T>
class Cnn final : public Model<T> {
 public:
  explicit Cnn(const ModelConfig& config, Storage storage = Storage::allocate);
  void init(Rng& rng) override;
  // Training (batch statistics) only with rng and a training plan; else eval (running stats).
  const T* forward(const T* images, int64_t B, Rng* rng = nullptr) override;
  void backward(const T* dlogits) override;  // the last forward must have been training
  double flops_per_image() const override;
  std::string emit(OnnxBuilder& g, const std::string& images) const override;

 protected:
  void lay_out(Arena<T>& arena, int64_t max_batch) override;

 private:
  using Model<T>::cfg_;
  int64_t width() const { return int64_t(cfg_.dim) * 4; }  // the last stage's, the head's input
  int64_t image_size() const { return int64_t(cfg_.in_chans) * cfg_.img_size * cfg_.img_size; }
  int64_t max_stream(int64_t B) const;  // the largest activation between layers

  std::unique_ptr<ConvBn<T>> stem_;
  std::vector<std::unique_ptr<BasicBlock<T>>> blocks_;
  int64_t head_w_ = 0, head_b_ = 0;
  bool trained_ = false;  // the last forward was in training mode

  T *input_ = nullptr, *stem_col_ = nullptr, *stem_dz_ = nullptr;
  std::vector<T*> x_;  // x_[0] the stem's output, x_[i + 1] block i's (inference: two, alternating)
  T *pooled_ = nullptr, *logits_ = nullptr, *dpooled_ = nullptr, *dX_[2] = {nullptr, nullptr};
};

}  // namespace gmlp
