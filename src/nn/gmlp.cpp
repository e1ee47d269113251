#include "nn/gmlp.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/profile.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/patch_embed.h"
#include "ops/pool.h"
#include "ops/residual.h"
#include "ops/sgu.h"

// One profile bucket per op: { GMLP_PROFILE("fwd.fc1"); ... }
#define GMLP_PROFILE(name) const ::gmlp::profile::Scope gmlp_profile_scope(name)

namespace gmlp {

template <class T>
int64_t Gmlp<T>::add_param(const std::string& name, std::vector<int64_t> shape, bool decay) {
  ParamInfo p;
  p.name = name;
  p.numel = 1;
  for (int64_t d : shape) p.numel *= d;
  p.shape = std::move(shape);
  p.offset = params_.empty() ? 0 : params_.back().offset + params_.back().numel;
  p.decay = decay;
  params_.push_back(p);
  return p.offset;
}

template <class T>
Gmlp<T>::Gmlp(const GmlpConfig& config) : cfg_(config) {
  cfg_.validate();
  const int64_t C = cfg_.in_chans, P = cfg_.patch_size, D = cfg_.dim, F = cfg_.ffn,
                H = cfg_.gate(), N = cfg_.tokens(), K = cfg_.num_classes;
  stem_w_ = add_param("stem.proj.weight", {D, C, P, P}, true);
  stem_b_ = add_param("stem.proj.bias", {D}, false);
  for (int l = 0; l < cfg_.depth; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    BlockParams o;
    o.norm_w = add_param(b + "norm.weight", {D}, false);
    o.norm_b = add_param(b + "norm.bias", {D}, false);
    o.fc1_w = add_param(b + "mlp_channels.fc1.weight", {F, D}, true);
    o.fc1_b = add_param(b + "mlp_channels.fc1.bias", {F}, false);
    o.gnorm_w = add_param(b + "mlp_channels.gate.norm.weight", {H}, false);
    o.gnorm_b = add_param(b + "mlp_channels.gate.norm.bias", {H}, false);
    o.proj_w = add_param(b + "mlp_channels.gate.proj.weight", {N, N}, true);
    o.proj_b = add_param(b + "mlp_channels.gate.proj.bias", {N}, false);
    o.fc2_w = add_param(b + "mlp_channels.fc2.weight", {D, H}, true);
    o.fc2_b = add_param(b + "mlp_channels.fc2.bias", {D}, false);
    blocks_.push_back(o);
  }
  norm_w_ = add_param("norm.weight", {D}, false);
  norm_b_ = add_param("norm.bias", {D}, false);
  head_w_ = add_param("head.weight", {K, D}, true);
  head_b_ = add_param("head.bias", {K}, false);
  const int64_t total = params_.back().offset + params_.back().numel;
  w_.resize(total);
  g_.resize(total);
}

template <class T>
const ParamInfo& Gmlp<T>::param(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return p;
  fail("the model has no parameter named '", name, "'");
}

template <class T>
void Gmlp<T>::init(Rng& rng) {
  T* w = w_.data();
  auto fill = [&](int64_t off, int64_t n, T v) { std::fill(w + off, w + off + n, v); };
  auto normal = [&](int64_t off, int64_t n, double std) {
    for (int64_t i = 0; i < n; ++i) w[off + i] = T(rng.normal() * std);
  };
  auto xavier = [&](int64_t off, int64_t out, int64_t in) {
    const double bound = std::sqrt(6.0 / double(in + out));
    for (int64_t i = 0; i < out * in; ++i) w[off + i] = T(rng.uniform(-bound, bound));
  };
  const int64_t C = cfg_.in_chans, P = cfg_.patch_size, D = cfg_.dim, F = cfg_.ffn,
                H = cfg_.gate(), N = cfg_.tokens(), K = cfg_.num_classes;
  // lecun_normal_: truncated normal on [-2, 2] scaled so the result has variance 1/fan_in.
  const double stem_std = std::sqrt(1.0 / double(C * P * P)) / 0.87962566103423978;
  for (int64_t i = 0; i < D * C * P * P; ++i) {
    double x = rng.normal();
    while (std::abs(x) > 2.0) x = rng.normal();
    w[stem_w_ + i] = T(x * stem_std);
  }
  fill(stem_b_, D, T(0));
  for (const auto& o : blocks_) {
    fill(o.norm_w, D, T(1));
    fill(o.norm_b, D, T(0));
    xavier(o.fc1_w, F, D);
    normal(o.fc1_b, F, 1e-6);
    fill(o.gnorm_w, H, T(1));
    fill(o.gnorm_b, H, T(0));
    normal(o.proj_w, N * N, 1e-6);  // spatial mixing starts near zero ...
    fill(o.proj_b, N, T(1));        // ... and the gate near one: each block starts as an FFN
    xavier(o.fc2_w, D, H);
    normal(o.fc2_b, D, 1e-6);
  }
  fill(norm_w_, D, T(1));
  fill(norm_b_, D, T(0));
  fill(head_w_, K * D, T(0));
  fill(head_b_, K, T(0));
}

template <class T>
void Gmlp<T>::plan(int64_t max_batch, Mode mode) {
  GMLP_CHECK(max_batch > 0);
  const bool train = mode == Mode::train;
  const int64_t M = int64_t(cfg_.tokens()) * max_batch, D = cfg_.dim, F = cfg_.ffn,
                H = cfg_.gate(), K = cfg_.num_classes, L = cfg_.depth;
  // Sizes first, then one allocation carved into views. Inference needs two residual-stream
  // buffers (in, out) and one block's activations, whatever the depth.
  std::vector<std::pair<T**, int64_t>> views;
  x_.assign(L + 1, nullptr);
  acts_by_block_.assign(L, BlockActs{});
  views.push_back({&patches_, M * cfg_.patch_dim()});
  for (int64_t l = 0; l < (train ? L + 1 : 2); ++l) views.push_back({&x_[l], M * D});
  for (int64_t l = 0; l < (train ? L : 1); ++l) {
    BlockActs& a = acts_by_block_[l];
    for (auto [ptr, n] : {std::pair{&a.xn, M * D}, {&a.mean1, M}, {&a.rstd1, M}, {&a.z, M * F},
                          {&a.a, M * F}, {&a.vn, M * H}, {&a.mean2, M}, {&a.rstd2, M},
                          {&a.g, M * H}, {&a.s, M * H}, {&a.keep, max_batch}})
      views.push_back({ptr, n});
  }
  for (auto [ptr, n] : {std::pair{&y_, M * D}, {&xf_, M * D}, {&meanf_, M}, {&rstdf_, M},
                        {&pooled_, max_batch * D}, {&logits_, max_batch * K}})
    views.push_back({ptr, n});
  if (train)
    for (auto [ptr, n] : {std::pair{&dpooled_, max_batch * D}, {&dxf_, M * D}, {&dX_, M * D},
                          {&dY_, M * D}, {&ds_, M * H}, {&dz_, M * F}, {&dxn_, M * D},
                          {&sgu_scratch_, 2 * M * H}})
      views.push_back({ptr, n});
  auto round = [](int64_t n) { return (n + 15) / 16 * 16; };  // keep every view 64-byte aligned
  int64_t total = 0;
  for (auto& [ptr, n] : views) total += round(n);
  acts_.resize(total);
  int64_t off = 0;
  for (auto& [ptr, n] : views) {
    *ptr = acts_.data() + off;
    off += round(n);
  }
  if (!train) {
    for (int64_t l = 2; l <= L; ++l) x_[l] = x_[l % 2];
    for (int64_t l = 1; l < L; ++l) acts_by_block_[l] = acts_by_block_[0];
  }
  max_batch_ = max_batch;
  mode_ = mode;
}

template <class T>
const T* Gmlp<T>::forward(const T* images, int64_t B, Rng* drop_rng) {
  GMLP_CHECK(B > 0 && B <= max_batch_);
  batch_ = B;
  const int64_t N = cfg_.tokens(), M = N * B, D = cfg_.dim, F = cfg_.ffn, H = cfg_.gate(),
                K = cfg_.num_classes, L = cfg_.depth;
  const T* w = w_.data();
  const PatchShape ps{B, cfg_.in_chans, cfg_.img_size, cfg_.patch_size};
  {
    GMLP_PROFILE("fwd.patch_embed");
    patchify(patches_, images, ps);
    linear_forward(x_[0], patches_, w + stem_w_, w + stem_b_, M, ps.patch_dim(), D);
  }
  for (int64_t l = 0; l < L; ++l) {
    const BlockParams& o = blocks_[l];
    BlockActs& a = acts_by_block_[l];
    {
      GMLP_PROFILE("fwd.layernorm");
      layernorm_forward(a.xn, D, a.mean1, a.rstd1, x_[l], D, w + o.norm_w, w + o.norm_b, M, D,
                        T(cfg_.ln_eps));
    }
    {
      GMLP_PROFILE("fwd.fc1");
      linear_forward(a.z, a.xn, w + o.fc1_w, w + o.fc1_b, M, D, F);
    }
    {
      GMLP_PROFILE("fwd.gelu");
      gelu_forward(a.a, a.z, M * F);
    }
    {
      GMLP_PROFILE("fwd.sgu");
      sgu_forward(a.s, a.vn, a.mean2, a.rstd2, a.g, a.a, w + o.gnorm_w, w + o.gnorm_b,
                  w + o.proj_w, w + o.proj_b, SguShape{N, B, F}, T(cfg_.gate_eps));
    }
    {
      GMLP_PROFILE("fwd.fc2");
      linear_forward(y_, a.s, w + o.fc2_w, w + o.fc2_b, M, H, D);
    }
    // timm: drop-path rates rise linearly from 0 at the first block to drop_path at the last.
    const double rate = L > 1 ? double(cfg_.drop_path) * double(l) / double(L - 1) : cfg_.drop_path;
    a.dropped = drop_rng && rate > 0;
    if (a.dropped) drop_path_sample(a.keep, B, rate, *drop_rng);
    {
      GMLP_PROFILE("fwd.residual");
      residual_forward(x_[l + 1], x_[l], y_, a.dropped ? a.keep : nullptr, N, B, D);
    }
  }
  {
    GMLP_PROFILE("fwd.head");
    layernorm_forward(xf_, D, meanf_, rstdf_, x_[L], D, w + norm_w_, w + norm_b_, M, D,
                      T(cfg_.ln_eps));
    mean_pool_forward(pooled_, xf_, N, B, D);
    linear_forward(logits_, pooled_, w + head_w_, w + head_b_, B, D, K);
  }
  return logits_;
}

template <class T>
void Gmlp<T>::backward(const T* dlogits) {
  GMLP_CHECK(mode_ == Mode::train);  // an inference plan keeps nothing for backward
  const int64_t B = batch_, N = cfg_.tokens(), M = N * B, D = cfg_.dim, F = cfg_.ffn,
                H = cfg_.gate(), K = cfg_.num_classes, L = cfg_.depth;
  GMLP_CHECK(B > 0);
  const T* w = w_.data();
  T* g = g_.data();
  auto zero = [](T* p, int64_t n) { std::fill(p, p + n, T(0)); };

  {
    GMLP_PROFILE("bwd.head");
    zero(dpooled_, B * D);
    linear_backward(dpooled_, g + head_w_, g + head_b_, dlogits, pooled_, w + head_w_, B, D, K);
    zero(dxf_, M * D);
    mean_pool_backward(dxf_, dpooled_, N, B, D);
    zero(dX_, M * D);
    layernorm_backward(dX_, D, g + norm_w_, g + norm_b_, dxf_, D, x_[L], D, meanf_, rstdf_,
                       w + norm_w_, M, D);
  }
  for (int64_t l = L - 1; l >= 0; --l) {
    const BlockParams& o = blocks_[l];
    const BlockActs& a = acts_by_block_[l];
    // dX holds ∂L/∂x_{l+1}; the identity path carries it unchanged to x_l, the branch adds to it.
    {
      GMLP_PROFILE("bwd.residual");
      residual_backward(dY_, dX_, a.dropped ? a.keep : nullptr, N, B, D);
    }
    // Fresh activation gradients are overwritten, not zeroed then accumulated.
    {
      GMLP_PROFILE("bwd.fc2");
      linear_backward(ds_, g + o.fc2_w, g + o.fc2_b, dY_, a.s, w + o.fc2_w, M, H, D, true);
    }
    {
      GMLP_PROFILE("bwd.sgu");
      sgu_backward(dz_, g + o.gnorm_w, g + o.gnorm_b, g + o.proj_w, g + o.proj_b, ds_, a.a, a.vn,
                   a.mean2, a.rstd2, a.g, w + o.gnorm_w, w + o.proj_w, SguShape{N, B, F},
                   sgu_scratch_);
    }
    {
      GMLP_PROFILE("bwd.gelu");
      gelu_backward_inplace(dz_, a.z, M * F);  // ∂L/∂a → ∂L/∂z
    }
    {
      GMLP_PROFILE("bwd.fc1");
      linear_backward(dxn_, g + o.fc1_w, g + o.fc1_b, dz_, a.xn, w + o.fc1_w, M, D, F, true);
    }
    {
      GMLP_PROFILE("bwd.layernorm");
      layernorm_backward(dX_, D, g + o.norm_w, g + o.norm_b, dxn_, D, x_[l], D, a.mean1, a.rstd1,
                         w + o.norm_w, M, D);
    }
  }
  {
    GMLP_PROFILE("bwd.patch_embed");
    linear_backward<T>(nullptr, g + stem_w_, g + stem_b_, dX_, patches_, w + stem_w_, M,
                       cfg_.patch_dim(), D);
  }
}

template <class T>
double Gmlp<T>::flops_per_image() const {
  const double N = cfg_.tokens(), D = cfg_.dim, F = cfg_.ffn, H = cfg_.gate(),
               K = cfg_.num_classes, PD = cfg_.patch_dim();
  const double block = 2 * N * D * F + 2 * N * N * H + 2 * N * H * D;
  return 2 * N * PD * D + cfg_.depth * block + 2 * D * K;
}

template class Gmlp<float>;
template class Gmlp<double>;

}  // namespace gmlp
