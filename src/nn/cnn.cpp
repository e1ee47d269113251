#include "nn/cnn.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/profile.h"
#include "nn/init.h"
#include "nn/onnx_graph.h"
#include "ops/add_relu.h"
#include "ops/global_avg_pool.h"
#include "ops/linear.h"
#include "ops/relu.h"

#define GMLP_PROFILE(name) const ::gmlp::profile::Scope gmlp_profile_scope(name)

namespace gmlp {
namespace {

constexpr double kBnEps = 1e-5, kBnMomentum = 0.1;  // torch.nn.BatchNorm2d's defaults

// dx += d.
template <class T>
void add_into(T* dx, const T* d, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] += d[i];
}

}  // namespace

// ---------------------------------------------------------------------------------------------
template <class T>
ConvBn<T>::ConvBn(ParamTable& t, const std::string& conv_name, const std::string& bn_name, int64_t cin, int64_t cout,
                  int64_t k, int64_t stride, int64_t S)
    : cin_(cin), cout_(cout), k_(k), stride_(stride), S_(S) {
  conv_ = t.add(conv_name + ".weight", {cout, cin, k, k}, true);
  bn_w_ = t.add(bn_name + ".weight", {cout}, false);
  bn_b_ = t.add(bn_name + ".bias", {cout}, false);
  bn_rm_ = t.add(bn_name + ".running_mean", {cout}, false, false);
  bn_rv_ = t.add(bn_name + ".running_var", {cout}, false, false);
}

template <class T>
void ConvBn<T>::init(T* w, Rng& rng) const {
  // torchvision ResNet: kaiming_normal_(mode="fan_out", nonlinearity="relu"); BN (1, 0), stats (0, 1).
  init::normal(w + conv_, cout_ * cin_ * k_ * k_, std::sqrt(2.0 / double(cout_ * k_ * k_)), rng);
  init::fill(w + bn_w_, cout_, T(1));
  init::fill(w + bn_b_, cout_, T(0));
  init::fill(w + bn_rm_, cout_, T(0));
  init::fill(w + bn_rv_, cout_, T(1));
}

template <class T>
void ConvBn<T>::lay_out(Arena<T>& a, int64_t B) {
  const int64_t pixels = out_side() * out_side();
  chunk_ = std::max(B * cout_ / (k_ * k_ * cin_), (kMinColumns + pixels - 1) / pixels);
  chunk_ = std::clamp<int64_t>(chunk_, 1, B);
  a.keep(&z_, out_size(B));
  a.keep(&mean_, cout_);
  a.keep(&rstd_, cout_);
}

template <class T>
void ConvBn<T>::forward(T* y, const T* x, T* w, int64_t B, bool training, T* col) {
  {
    GMLP_PROFILE("fwd.conv");
    const int64_t in = cin_ * S_ * S_, out = out_size(1);
    for (int64_t b = 0; b < B; b += chunk_)
      conv2d_forward(z_ + b * out, x + b * in, w + conv_, shape(std::min(chunk_, B - b)), col);
  }
  GMLP_PROFILE("fwd.batchnorm");
  const int64_t So = out_side();
  batchnorm_forward(y, mean_, rstd_, z_, w + bn_w_, w + bn_b_, w + bn_rm_, w + bn_rv_, B, cout_, So * So, training,
                    T(kBnEps), T(kBnMomentum));
}

template <class T>
void ConvBn<T>::backward(T* dx, const T* dy, const T* x, const T* w, T* g, int64_t B, T* dz, T* col) {
  const int64_t So = out_side();
  {
    GMLP_PROFILE("bwd.batchnorm");
    batchnorm_backward(dz, g + bn_w_, g + bn_b_, dy, z_, mean_, rstd_, w + bn_w_, B, cout_, So * So);
  }
  GMLP_PROFILE("bwd.conv");
  const int64_t in = cin_ * S_ * S_, out = out_size(1);
  for (int64_t b = 0; b < B; b += chunk_)
    conv2d_backward(dx ? dx + b * in : nullptr, g + conv_, dz + b * out, x + b * in, w + conv_,
                    shape(std::min(chunk_, B - b)), col);
}

template <class T>
std::string ConvBn<T>::emit(OnnxBuilder& g, const std::string& x) const {
  const int64_t pad = k_ / 2;
  const std::string w = g.param(conv_);
  const OnnxBuilder::Scope scope(g, w.substr(0, w.rfind('.')));
  const std::string z = g.op("Conv", {x, w},
                             {onnx::attr("kernel_shape", std::vector<int64_t>{k_, k_}),
                              onnx::attr("strides", std::vector<int64_t>{stride_, stride_}),
                              onnx::attr("pads", std::vector<int64_t>{pad, pad, pad, pad})});
  return g.op("BatchNormalization", {z, g.param(bn_w_), g.param(bn_b_), g.param(bn_rm_), g.param(bn_rv_)},
              {onnx::attr("epsilon", float(kBnEps))});
}

// ---------------------------------------------------------------------------------------------
template <class T>
BasicBlock<T>::BasicBlock(ParamTable& t, const std::string& p, int64_t cin, int64_t cout, int64_t stride, int64_t S)
    : cin_(cin),
      S_(S),
      conv1_(t, p + ".conv1", p + ".bn1", cin, cout, 3, stride, S),
      conv2_(t, p + ".conv2", p + ".bn2", cout, cout, 3, 1, conv1_.out_side()) {
  if (stride != 1 || cin != cout)
    shortcut_ = std::make_unique<ConvBn<T>>(t, p + ".shortcut.conv", p + ".shortcut.bn", cin, cout, 1, stride, S);
}

template <class T>
void BasicBlock<T>::init(T* w, Rng& rng) const {
  conv1_.init(w, rng);
  conv2_.init(w, rng);
  if (shortcut_) shortcut_->init(w, rng);
}

template <class T>
void BasicBlock<T>::lay_out(Arena<T>& a, int64_t B) {
  const int64_t n = out_size(B);
  conv1_.lay_out(a, B);
  a.keep(&h1_, n);  // ReLU(BN1(conv1(x))): conv2's input, ReLU's mask
  conv2_.lay_out(a, B);
  if (shortcut_) shortcut_->lay_out(a, B);
  int64_t col = std::max(conv1_.col_size(), conv2_.col_size());
  if (shortcut_) col = std::max(col, shortcut_->col_size());
  a.temp(&col_, col);
  a.temp(&ta_, n);  // forward: BN2's output; backward: ∂L/∂(a conv's output)
  a.temp(&tb_, n);  // forward: the shortcut's output; backward: ∂L/∂h1
  if (a.training() && shortcut_) a.temp(&dxs_, B * cin_ * S_ * S_);
  a.next_layer();
}

template <class T>
void BasicBlock<T>::forward(T* out, const T* x, T* w, int64_t B, bool training) {
  const int64_t n = out_size(B);
  conv1_.forward(h1_, x, w, B, training, col_);
  {
    GMLP_PROFILE("fwd.relu");
    relu_forward(h1_, h1_, n);
  }
  conv2_.forward(ta_, h1_, w, B, training, col_);
  const T* s = x;
  if (shortcut_) {
    shortcut_->forward(tb_, x, w, B, training, col_);
    s = tb_;
  }
  GMLP_PROFILE("fwd.residual");
  add_relu_forward(out, ta_, s, n);
}

template <class T>
void BasicBlock<T>::backward(T* dx, T* dy, const T* x, const T* out, const T* w, T* g, int64_t B) {
  const int64_t n = out_size(B);
  {
    GMLP_PROFILE("bwd.residual");
    add_relu_backward(dy, dy, out, n);  // dy: ∂L/∂(BN2 output) = ∂L/∂(shortcut)
  }
  if (shortcut_) shortcut_->backward(dxs_, dy, x, w, g, B, ta_, col_);
  conv2_.backward(tb_, dy, h1_, w, g, B, ta_, col_);
  {
    GMLP_PROFILE("bwd.relu");
    relu_backward_inplace(tb_, h1_, n);
  }
  conv1_.backward(dx, tb_, x, w, g, B, ta_, col_);
  GMLP_PROFILE("bwd.residual");
  add_into(dx, shortcut_ ? dxs_ : dy, B * cin_ * S_ * S_);
}

template <class T>
std::string BasicBlock<T>::emit(OnnxBuilder& g, const std::string& x) const {
  const std::string h1 = g.op("Relu", {conv1_.emit(g, x)});
  const std::string s = shortcut_ ? shortcut_->emit(g, x) : x;
  return g.op("Relu", {g.add(conv2_.emit(g, h1), s)});
}

template <class T>
double BasicBlock<T>::flops_per_image() const {
  return conv1_.flops_per_image() + conv2_.flops_per_image() + (shortcut_ ? shortcut_->flops_per_image() : 0.0);
}

// ---------------------------------------------------------------------------------------------
template <class T>
Cnn<T>::Cnn(const ModelConfig& config, Storage storage) : Model<T>(config) {
  const ModelConfig& c = cfg_;
  c.validate();
  GMLP_CHECK(c.model == ModelKind::cnn);
  ParamTable& t = this->table_;
  const int64_t D = c.dim;
  int64_t S = c.img_size;
  stem_ = std::make_unique<ConvBn<T>>(t, "stem.conv", "stem.bn", c.in_chans, D, 3, 1, S);
  int64_t cin = D;
  for (int64_t s = 0; s < 3; ++s) {
    const int64_t cout = D << s;
    for (int64_t i = 0; i < c.depth; ++i) {
      const int64_t stride = (s > 0 && i == 0) ? 2 : 1;
      const std::string prefix = "stages." + std::to_string(s) + "." + std::to_string(i);
      this->mark_layer_begin();
      blocks_.push_back(std::make_unique<BasicBlock<T>>(t, prefix, cin, cout, stride, S));
      S = blocks_.back()->out_side();
      cin = cout;
    }
  }
  this->mark_layers_end();
  head_w_ = t.add("head.weight", {int64_t(c.num_classes), width()}, true);
  head_b_ = t.add("head.bias", {int64_t(c.num_classes)}, false);
  this->allocate_params(storage, c.to_json());
}

template <class T>
void Cnn<T>::init(Rng& rng) {
  T* w = this->weights();
  stem_->init(w, rng);
  for (const auto& b : blocks_) b->init(w, rng);
  const int64_t K = cfg_.num_classes;
  init::torch_default(w + head_w_, K * width(), width(), rng);  // nn.Linear's default
  init::torch_default(w + head_b_, K, width(), rng);
}

template <class T>
int64_t Cnn<T>::max_stream(int64_t B) const {
  int64_t n = stem_->out_size(B);
  for (const auto& b : blocks_) n = std::max(n, b->out_size(B));
  return n;
}

template <class T>
void Cnn<T>::lay_out(Arena<T>& a, int64_t max_batch) {
  const int64_t B = max_batch, K = cfg_.num_classes, L = int64_t(blocks_.size());
  const bool train = a.training();
  if (train) a.global(&input_, B * image_size());  // the stem's backward needs the images
  x_.assign(L + 1, nullptr);
  if (train) {
    a.global(&x_[0], stem_->out_size(B));
    for (int64_t l = 0; l < L; ++l) a.global(&x_[l + 1], blocks_[l]->out_size(B));
  } else {
    a.global(&x_[0], max_stream(B));
    a.global(&x_[1], max_stream(B));
  }
  a.global(&pooled_, B * width());
  a.global(&logits_, B * K);
  if (train) {
    a.global(&dpooled_, B * width());
    a.global(&dX_[0], max_stream(B));
    a.global(&dX_[1], max_stream(B));
  }
  stem_->lay_out(a, B);
  a.temp(&stem_col_, stem_->col_size());
  if (train) a.temp(&stem_dz_, stem_->out_size(B));
  a.next_layer();
  for (const auto& b : blocks_) b->lay_out(a, B);  // inference: x_[0], x_[1] alternate
}

template <class T>
const T* Cnn<T>::forward(const T* images, int64_t B, Rng* rng) {
  GMLP_CHECK(B > 0 && B <= this->chunk_batch_);
  this->batch_ = B;
  const bool train_plan = this->mode_ == Mode::train;
  const bool training = rng && train_plan;
  trained_ = training;
  auto stream = [&](int64_t l) { return train_plan ? x_[l] : x_[l % 2]; };
  T* w = this->weights();
  const int64_t L = int64_t(blocks_.size()), K = cfg_.num_classes;
  const T* in = images;
  if (train_plan) {
    std::copy(images, images + B * image_size(), input_);
    in = input_;
  }
  stem_->forward(stream(0), in, w, B, training, stem_col_);
  {
    GMLP_PROFILE("fwd.relu");
    relu_forward(stream(0), stream(0), stem_->out_size(B));
  }
  for (int64_t l = 0; l < L; ++l) blocks_[l]->forward(stream(l + 1), stream(l), w, B, training);
  GMLP_PROFILE("fwd.head");
  const int64_t So = blocks_.back()->out_side();
  global_avg_pool_forward(pooled_, stream(L), B, width(), So * So);
  linear_forward(logits_, pooled_, w + head_w_, w + head_b_, B, width(), K);
  return logits_;
}

template <class T>
void Cnn<T>::backward(const T* dlogits) {
  GMLP_CHECK(this->mode_ == Mode::train);  // an inference plan keeps nothing for backward
  GMLP_CHECK(trained_);                    // BatchNorm's backward is through the batch statistics
  const int64_t B = this->batch_, K = cfg_.num_classes, L = int64_t(blocks_.size());
  GMLP_CHECK(B > 0);
  const T* w = this->weights();
  T* g = this->g_.data();
  int cur = 0;  // dX_[cur]: ∂L/∂(the current layer's output)
  {
    GMLP_PROFILE("bwd.head");
    linear_backward(dpooled_, g + head_w_, g + head_b_, dlogits, pooled_, w + head_w_, B, width(), K, Write::overwrite);
    const int64_t So = blocks_.back()->out_side();
    global_avg_pool_backward(dX_[cur], dpooled_, B, width(), So * So);
  }
  this->head_grads_ready();
  for (int64_t l = L - 1; l >= 0; --l) {
    blocks_[l]->backward(dX_[1 - cur], dX_[cur], x_[l], x_[l + 1], w, g, B);
    this->layer_grads_ready(size_t(l));
    cur = 1 - cur;
  }
  {
    GMLP_PROFILE("bwd.relu");
    relu_backward_inplace(dX_[cur], x_[0], stem_->out_size(B));
  }
  stem_->backward(nullptr, dX_[cur], input_, w, g, B, stem_dz_, stem_col_);
}

template <class T>
std::string Cnn<T>::emit(OnnxBuilder& g, const std::string& images) const {
  std::string x = g.op("Relu", {stem_->emit(g, images)});
  for (const auto& b : blocks_) x = b->emit(g, x);
  const std::string pooled = g.op("Flatten", {g.op("GlobalAveragePool", {x})}, {onnx::attr("axis", int64_t(1))});
  return g.linear(pooled, head_w_, head_b_);  // (B, 4D) → (B, K)
}

template <class T>
double Cnn<T>::flops_per_image() const {
  double f = stem_->flops_per_image() + 2.0 * double(width() * cfg_.num_classes);
  for (const auto& b : blocks_) f += b->flops_per_image();
  return f;
}

template class ConvBn<float>;
template class ConvBn<double>;
template class BasicBlock<float>;
template class BasicBlock<double>;
template class Cnn<float>;
template class Cnn<double>;

}  // namespace gmlp
