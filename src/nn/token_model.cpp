#include "nn/token_model.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/matmul.h"
#include "core/profile.h"
#include "nn/branches.h"
#include "nn/init.h"
#include "nn/onnx_graph.h"
#include "ops/affine.h"
#include "ops/layer_scale.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/patch_embed.h"
#include "ops/pool.h"
#include "ops/residual.h"

#define GMLP_PROFILE(name) const ::gmlp::profile::Scope gmlp_profile_scope(name)

namespace gmlp {

// ---------------------------------------------------------------------------------------------
template <class T>
Residual<T>::Residual(ParamTable& table, const ResidualSpec& spec, int64_t N, int64_t D) : spec_(spec), N_(N), D_(D) {
  if (spec.norm == NormKind::layernorm) {
    norm_w_ = table.add(spec.norm_name + ".weight", {D}, false);
    norm_b_ = table.add(spec.norm_name + ".bias", {D}, false);
  } else if (spec.norm == NormKind::affine) {  // timm Affine: (1, 1, D), so timm decays it
    norm_w_ = table.add(spec.norm_name + ".alpha", {1, 1, D}, true);
    norm_b_ = table.add(spec.norm_name + ".beta", {1, 1, D}, true);
  }
  if (!spec.scale_name.empty()) scale_ = table.add(spec.scale_name, {D}, false);
}

template <class T>
void Residual<T>::init(T* w, Rng& rng) const {
  if (norm_w_ >= 0) init::fill(w + norm_w_, D_, T(1)), init::fill(w + norm_b_, D_, T(0));
  branch_->init(w, rng);
  if (scale_ >= 0) init::fill(w + scale_, D_, T(spec_.scale_init));
}

template <class T>
void Residual<T>::lay_out(Arena<T>& a, int64_t B) {
  const int64_t M = N_ * B;
  if (spec_.norm != NormKind::none) a.keep(&xn_, M * D_);
  if (spec_.norm == NormKind::layernorm) a.keep(&mean_, M), a.keep(&rstd_, M);
  y_ = nullptr;  // the branch's output, where the residual is not summed by the branch (forward)
  if (scale_ >= 0)
    a.keep(&y_, M * D_);  // layer scale's gradient needs the unscaled branch
  else if (!branch_->adds_residual() || (a.training() && spec_.drop_rate > 0))
    a.temp(&y_, M * D_);
  a.keep(&keep_, B);
  branch_->lay_out(a, B);
  dy_ = nullptr;  // the branch's output gradient, when a layer scale or stochastic depth scales it
  if (a.training() && (scale_ >= 0 || spec_.drop_rate > 0)) a.temp(&dy_, M * D_);
  if (a.training()) a.temp(&dxn_, M * D_);
  a.next_layer();
}

template <class T>
void Residual<T>::forward(T* out, const T* in, const T* w, int64_t B, Rng* rng) {
  const int64_t M = N_ * B, D = D_;
  // A branch that only multiplies xn reads it as bf16 where the activations are stored so.
  xn_bf16_ = spec_.norm == NormKind::layernorm && std::is_same_v<T, float> && bf16_activations() &&
             branch_->multiplies_xn_only();
  const T* xn = in;
  if (spec_.norm == NormKind::layernorm) {
    GMLP_PROFILE("fwd.layernorm");
    layernorm_forward(xn_, D, mean_, rstd_, in, D, w + norm_w_, w + norm_b_, M, D, T(spec_.eps), xn_bf16_);
    xn = xn_;
  } else if (spec_.norm == NormKind::affine) {
    affine_forward(xn_, in, w + norm_w_, w + norm_b_, M, D);
    xn = xn_;
  }
  dropped_ = rng && spec_.drop_rate > 0;
  if (dropped_) drop_path_sample(keep_, B, spec_.drop_rate, *rng);
  // out = in + f(xn): summed by the branch's last product where it can (and nothing scales f).
  if (scale_ < 0 && !dropped_ && branch_->adds_residual()) return branch_->forward(out, stored(xn, xn_bf16_), w, B, in);
  branch_->forward(y_, stored(xn, xn_bf16_), w, B, nullptr);
  GMLP_PROFILE("fwd.residual");
  if (scale_ < 0)
    residual_forward(out, in, y_, dropped_ ? keep_ : nullptr, N_, B, D);
  else
    layer_scale_forward(out, in, y_, dropped_ ? keep_ : nullptr, w + scale_, N_, B, D);
}

template <class T>
void Residual<T>::backward(T* dx, const T* in, const T* w, T* g, int64_t B) {
  const int64_t M = N_ * B, D = D_;
  // The branch's output gradient: dout itself, which the branch only reads, unless a layer scale
  // or a dropped path scales it.
  const T* dy = dx;
  if (scale_ >= 0 || dropped_) {
    GMLP_PROFILE("bwd.residual");
    if (scale_ < 0)  // dy = keep · dout
      residual_backward(dy_, dx, dropped_ ? keep_ : nullptr, N_, B, D);
    else  // dy = keep · ls ⊙ dout
      layer_scale_backward(dy_, g + scale_, dx, y_, dropped_ ? keep_ : nullptr, w + scale_, N_, B, D);
    dy = dy_;
  }
  const T* xn = spec_.norm == NormKind::none ? in : xn_;
  branch_->backward(dxn_, dy, stored(xn, xn_bf16_), w, g, B);
  GMLP_PROFILE("bwd.layernorm");
  switch (spec_.norm) {
    case NormKind::layernorm:
      layernorm_backward(dx, D, g + norm_w_, g + norm_b_, dxn_, D, in, D, mean_, rstd_, w + norm_w_, M, D);
      break;
    case NormKind::affine: affine_backward(dx, g + norm_w_, g + norm_b_, dxn_, in, w + norm_w_, M, D); break;
    case NormKind::none:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < M * D; ++i) dx[i] += dxn_[i];
      break;
  }
}

template <class T>
std::string Residual<T>::emit(OnnxBuilder& g, const std::string& x) const {
  std::string xn = x;
  if (spec_.norm == NormKind::layernorm) xn = g.layernorm(x, norm_w_, norm_b_, spec_.eps);
  if (spec_.norm == NormKind::affine) xn = g.add(g.mul(x, g.param(norm_w_)), g.param(norm_b_));
  std::string y = branch_->emit(g, xn);
  if (scale_ >= 0) y = g.mul(g.param(scale_), y);
  return g.add(x, y);
}

// ---------------------------------------------------------------------------------------------
template <class T>
TokenModel<T>::TokenModel(const ModelConfig& config, Storage storage) : Model<T>(config) {
  const ModelConfig& c = cfg_;
  c.validate();
  const ModelKindInfo& kind = model_kind_info(c.model);
  GMLP_CHECK(kind.patches);
  ParamTable& t = this->table_;
  const int64_t C = c.in_chans, P = c.patch_size, D = c.dim, N = c.tokens(), L = c.depth;
  const BranchDims dims{N, D};
  vit_stem_ = kind.class_token;
  cls_ = c.has_class_token();
  fc_norm_ = c.avg_pool_then_norm();
  style_ = vit_stem_ ? InitStyle::vit : InitStyle::mixer;
  final_norm_ = kind.affine_norm ? NormKind::affine : NormKind::layernorm;

  const std::string stem = vit_stem_ ? "patch_embed.proj" : "stem.proj";
  stem_w_ = t.add(stem + ".weight", {D, C, P, P}, true);
  stem_b_ = t.add(stem + ".bias", {D}, false);
  if (cls_) cls_token_ = t.add("cls_token", {1, 1, D}, false);
  if (vit_stem_) pos_embed_ = t.add("pos_embed", {1, N, D}, false);
  for (int64_t l = 0; l < L; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    // timm: drop-path rates rise linearly from 0 at the first block to drop_path at the last.
    const double rate = L > 1 ? double(c.drop_path) * double(l) / double(L - 1) : c.drop_path;
    // One residual sublayer: its norm (and layer scale) first, then its branch.
    auto sublayer = [&](NormKind norm, const std::string& norm_name, const std::string& scale, auto make_branch) {
      this->mark_layer_begin();
      ResidualSpec s;
      s.norm = norm, s.norm_name = b + norm_name, s.eps = c.ln_eps, s.drop_rate = rate;
      if (!scale.empty()) s.scale_name = b + scale, s.scale_init = c.init_scale;
      auto r = std::make_unique<Residual<T>>(t, s, N, D);
      r->attach(make_branch());
      layers_.push_back(std::move(r));
    };
    const auto LN = NormKind::layernorm;
    switch (c.model) {  // each kind's blocks
      case ModelKind::gmlp:
      case ModelKind::amlp:
        sublayer(LN, "norm", "", [&] {
          return make_gating_mlp<T>(t, b + "mlp_channels", dims, c.ffn, c.gate, c.gate_eps,
                                    kind.tiny_attention ? c.attn_dim : 0);
        });
        break;
      case ModelKind::mixer:
        sublayer(LN, "norm1", "", [&] { return make_token_mlp<T>(t, b + "mlp_tokens", dims, c.token_ffn, style_); });
        sublayer(LN, "norm2", "", [&] { return make_channel_mlp<T>(t, b + "mlp_channels", dims, c.ffn, style_); });
        break;
      case ModelKind::resmlp:
        sublayer(NormKind::affine, "norm1", "ls1", [&] { return make_token_linear<T>(t, b + "linear_tokens", dims); });
        sublayer(NormKind::affine, "norm2", "ls2",
                 [&] { return make_channel_mlp<T>(t, b + "mlp_channels", dims, c.ffn, style_); });
        break;
      case ModelKind::vit:
        sublayer(LN, "norm1", "", [&] { return make_self_attention<T>(t, b + "attn", dims, c.heads, style_); });
        sublayer(LN, "norm2", "", [&] { return make_channel_mlp<T>(t, b + "mlp", dims, c.ffn, style_); });
        break;
      case ModelKind::ffonly:  // Melas-Kyriazi's LinearBlock: channels first, then tokens
        sublayer(LN, "norm1", "", [&] { return make_channel_mlp<T>(t, b + "mlp1", dims, c.ffn, style_); });
        sublayer(NormKind::none, "", "",
                 [&] { return make_token_mlp<T>(t, b + "mlp2", dims, c.token_ffn, style_, b + "norm2", c.ln_eps); });
        break;
      case ModelKind::eamlp:
        sublayer(LN, "norm1", "",
                 [&] { return make_external_attention<T>(t, b + "attn", dims, c.heads, c.memory, style_); });
        sublayer(LN, "norm2", "", [&] { return make_channel_mlp<T>(t, b + "mlp", dims, c.ffn, style_); });
        break;
      case ModelKind::cnn:
      case ModelKind::bert:
      case ModelKind::bert_rel: fail("model '", c.model, "' is not a token model");
    }
  }
  this->mark_layers_end();
  if (final_norm_ == NormKind::affine) {
    norm_w_ = t.add("norm.alpha", {1, 1, D}, true);
    norm_b_ = t.add("norm.beta", {1, 1, D}, true);
  } else {
    const std::string norm = fc_norm_ ? "fc_norm" : "norm";
    norm_w_ = t.add(norm + ".weight", {D}, false);
    norm_b_ = t.add(norm + ".bias", {D}, false);
  }
  head_w_ = t.add("head.weight", {int64_t(c.num_classes), D}, true);
  head_b_ = t.add("head.bias", {int64_t(c.num_classes)}, false);
  this->allocate_params(storage, c.to_json());
}

template <class T>
void TokenModel<T>::init(Rng& rng) {
  T* w = this->weights();
  const int64_t C = cfg_.in_chans, P = cfg_.patch_size, D = cfg_.dim, N = cfg_.tokens(), K = cfg_.num_classes;
  if (style_ == InitStyle::mixer) {  // timm MlpMixer: lecun-normal stem, zero head
    init::lecun_normal(w + stem_w_, D * C * P * P, C * P * P, rng);
    init::fill(w + stem_b_, D, T(0));
  } else {  // timm ViT: torch's default conv init, then trunc-normal positions, tiny class token
    init::torch_default(w + stem_w_, D * C * P * P, C * P * P, rng);
    init::torch_default(w + stem_b_, D, C * P * P, rng);
    init::trunc_normal(w + pos_embed_, N * D, 0.02, rng);
    if (cls_) init::normal(w + cls_token_, D, 1e-6, rng);
  }
  for (const auto& layer : layers_) layer->init(w, rng);
  init::fill(w + norm_w_, D, T(1));
  init::fill(w + norm_b_, D, T(0));
  if (style_ == InitStyle::mixer) {
    init::fill(w + head_w_, K * D, T(0));
  } else {
    init::trunc_normal(w + head_w_, K * D, 0.02, rng);
  }
  init::fill(w + head_b_, K, T(0));
}

template <class T>
void TokenModel<T>::lay_out(Arena<T>& a, int64_t max_batch) {
  const int64_t B = max_batch, N = cfg_.tokens(), M = N * B, D = cfg_.dim, K = cfg_.num_classes;
  const int64_t L = int64_t(layers_.size());
  const bool train = a.training();
  a.global(&patches_, int64_t(cfg_.patches()) * B * cfg_.patch_dim());
  x_.assign(L + 1, nullptr);
  for (int64_t l = 0; l < (train ? L + 1 : 2); ++l) a.global(&x_[l], M * D);
  for (auto [p, n] : {std::pair{&xf_, M * D}, {&meanf_, M}, {&rstdf_, M}, {&pooled_, B * D}, {&logits_, B * K}})
    a.global(p, n);
  if (train)
    for (auto [p, n] : {std::pair{&dpooled_, B * D}, {&dxf_, M * D}, {&dX_, M * D}}) a.global(p, n);
  for (const auto& layer : layers_) layer->lay_out(a, max_batch);  // inference: x_[0], x_[1] alternate
}

template <class T>
const T* TokenModel<T>::forward(const T* images, int64_t B, Rng* rng) {
  GMLP_CHECK(B > 0 && B <= this->chunk_batch_);
  this->batch_ = B;
  const int64_t N = cfg_.tokens(), Np = cfg_.patches(), M = N * B, D = cfg_.dim, K = cfg_.num_classes,
                L = int64_t(layers_.size());
  const bool train = this->mode_ == Mode::train;
  auto stream = [&](int64_t l) { return train ? x_[l] : x_[l % 2]; };
  const T* w = this->weights();
  const PatchShape ps{B, cfg_.in_chans, cfg_.img_size, cfg_.patch_size};
  {
    GMLP_PROFILE("fwd.patch_embed");
    patchify(patches_, images, ps);
    T* x0 = stream(0);
    // Token-major: with a class token, its B rows come first, then the patches'.
    linear_forward(x0 + (cls_ ? B * D : 0), patches_, w + stem_w_, w + stem_b_, Np * B, ps.patch_dim(), D);
    if (cls_)
      for (int64_t b = 0; b < B; ++b) std::copy(w + cls_token_, w + cls_token_ + D, x0 + b * D);
    if (vit_stem_) {
      const T* pos = w + pos_embed_;
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < M; ++r)
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) x0[r * D + d] += pos[(r / B) * D + d];
    }
  }
  for (int64_t l = 0; l < L; ++l) layers_[l]->forward(stream(l + 1), stream(l), w, B, rng);
  {
    GMLP_PROFILE("fwd.head");
    const T* xl = stream(L);
    if (fc_norm_) {  // xf_'s first B rows: the mean of the patch tokens (after the class token's rows)
      mean_pool_forward(xf_, xl + (cls_ ? B * D : 0), Np, B, D);
      layernorm_forward(pooled_, D, meanf_, rstdf_, xf_, D, w + norm_w_, w + norm_b_, B, D, T(cfg_.ln_eps));
    } else {
      if (final_norm_ == NormKind::affine)
        affine_forward(xf_, xl, w + norm_w_, w + norm_b_, M, D);
      else
        layernorm_forward(xf_, D, meanf_, rstdf_, xl, D, w + norm_w_, w + norm_b_, M, D, T(cfg_.ln_eps));
      if (cls_)
        std::copy(xf_, xf_ + B * D, pooled_);  // the class token's rows
      else
        mean_pool_forward(pooled_, xf_, N, B, D);
    }
    linear_forward(logits_, pooled_, w + head_w_, w + head_b_, B, D, K);
  }
  return logits_;
}

template <class T>
void TokenModel<T>::backward(const T* dlogits) {
  GMLP_CHECK(this->mode_ == Mode::train);  // an inference plan keeps nothing for backward
  const int64_t B = this->batch_, N = cfg_.tokens(), Np = cfg_.patches(), M = N * B, D = cfg_.dim, K = cfg_.num_classes,
                L = int64_t(layers_.size());
  GMLP_CHECK(B > 0);
  const T* w = this->weights();
  T* g = this->g_.data();
  {
    GMLP_PROFILE("bwd.head");
    std::fill(dpooled_, dpooled_ + B * D, T(0));
    linear_backward(dpooled_, g + head_w_, g + head_b_, dlogits, pooled_, w + head_w_, B, D, K);
    std::fill(dxf_, dxf_ + M * D, T(0));
    std::fill(dX_, dX_ + M * D, T(0));
    if (fc_norm_) {
      layernorm_backward(dxf_, D, g + norm_w_, g + norm_b_, dpooled_, D, xf_, D, meanf_, rstdf_, w + norm_w_, B, D);
      mean_pool_backward(dX_ + (cls_ ? B * D : 0), dxf_, Np, B, D);
    } else {
      if (cls_)
        std::copy(dpooled_, dpooled_ + B * D, dxf_);
      else
        mean_pool_backward(dxf_, dpooled_, N, B, D);
      if (final_norm_ == NormKind::affine)
        affine_backward(dX_, g + norm_w_, g + norm_b_, dxf_, x_[L], w + norm_w_, M, D);
      else
        layernorm_backward(dX_, D, g + norm_w_, g + norm_b_, dxf_, D, x_[L], D, meanf_, rstdf_, w + norm_w_, M, D);
    }
  }
  this->head_grads_ready();
  for (int64_t l = L - 1; l >= 0; --l) {
    layers_[l]->backward(dX_, x_[l], w, g, B);
    this->layer_grads_ready(size_t(l));
  }
  {
    GMLP_PROFILE("bwd.patch_embed");
    if (vit_stem_) {
      T* gpos = g + pos_embed_;
      for (int64_t r = 0; r < M; ++r)
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) gpos[(r / B) * D + d] += dX_[r * D + d];
    }
    if (cls_) {
      T* gcls = g + cls_token_;
      for (int64_t b = 0; b < B; ++b)
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) gcls[d] += dX_[b * D + d];
    }
    linear_backward<T>(nullptr, g + stem_w_, g + stem_b_, dX_ + (cls_ ? B * D : 0), patches_, w + stem_w_, Np * B,
                       cfg_.patch_dim(), D);
  }
}

template <class T>
std::string TokenModel<T>::emit(OnnxBuilder& g, const std::string& images) const {
  const int64_t P = cfg_.patch_size, D = cfg_.dim, Np = cfg_.patches();
  std::string x;
  {
    // timm's PatchEmbed: a P×P convolution of stride P, its (B, D, G, G) output flattened to
    // tokens in row-major grid order.
    const OnnxBuilder::Scope scope(g, vit_stem_ ? "patch_embed" : "stem");
    x = g.op(
        "Conv", {images, g.param(stem_w_), g.param(stem_b_)},
        {onnx::attr("kernel_shape", std::vector<int64_t>{P, P}), onnx::attr("strides", std::vector<int64_t>{P, P})});
    x = g.transpose(g.reshape(x, {0, D, Np}), {0, 2, 1});
  }
  if (cls_) {  // the class token first, then positions added to every token
    const std::string batch = g.op("Shape", {images}, {onnx::attr("start", int64_t(0)), onnx::attr("end", int64_t(1))});
    const std::string shape = g.op("Concat", {batch, g.ints({1, D})}, {onnx::attr("axis", int64_t(0))});
    const std::string cls = g.op("Expand", {g.param(cls_token_), shape});
    x = g.op("Concat", {cls, x}, {onnx::attr("axis", int64_t(1))});
  }
  if (vit_stem_) x = g.add(x, g.param(pos_embed_));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const OnnxBuilder::Scope scope(g, "residual." + std::to_string(l));
    x = layers_[l]->emit(g, x);
  }
  if (fc_norm_) {  // the mean of the patch tokens, then the norm
    if (cls_) x = g.op("Slice", {x, g.ints({1}), g.ints({int64_t(cfg_.tokens())}), g.ints({1})});
    return g.linear(g.layernorm(g.reduce_mean(x, 1, false), norm_w_, norm_b_, cfg_.ln_eps), head_w_, head_b_);
  }
  if (final_norm_ == NormKind::affine)
    x = g.add(g.mul(x, g.param(norm_w_)), g.param(norm_b_));
  else
    x = g.layernorm(x, norm_w_, norm_b_, cfg_.ln_eps);
  const std::string pooled = cls_ ? g.select(x, 1, 0) : g.reduce_mean(x, 1, false);  // (B, D)
  return g.linear(pooled, head_w_, head_b_);
}

template <class T>
double TokenModel<T>::flops_per_image() const {
  double f = 2.0 * cfg_.patches() * cfg_.patch_dim() * cfg_.dim + 2.0 * cfg_.dim * cfg_.num_classes;
  for (const auto& layer : layers_) f += layer->flops_per_image();
  return f;
}

template class Residual<float>;
template class Residual<double>;
template class TokenModel<float>;
template class TokenModel<double>;

}  // namespace gmlp
