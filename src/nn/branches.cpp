#include "nn/branches.h"

#include <cmath>
#include <type_traits>

#include "core/bf16.h"
#include "core/error.h"
#include "core/matmul.h"
#include "core/profile.h"
#include "nn/init.h"
#include "nn/onnx_graph.h"
#include "ops/attention.h"
#include "ops/column_layernorm.h"
#include "ops/column_softmax.h"
#include "ops/gelu.h"
#include "ops/linear.h"
#include "ops/sgu.h"
#include "ops/sum_normalize.h"

#define GMLP_PROFILE(name) const ::gmlp::profile::Scope gmlp_profile_scope(name)

namespace gmlp {
namespace {

// x[i] rounded to the nearest bfloat16 (as the products round, round_to_bf16), kept as floats:
// the values of an activation stored as bf16, where activations are not (bf16_activations() off).
template <class T>
void round_to_bf16_values(T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_float(float_to_bf16_daz(x[i]));
  } else {
    GMLP_CHECK(false);
  }
}

// A linear layer's parameters: weight (out, in), bias (out).
struct LinearParams {
  int64_t w = 0, b = -1, in = 0, out = 0;
  std::string name;
  LinearParams() = default;
  LinearParams(ParamTable& t, const std::string& name, int64_t in, int64_t out, bool bias = true)
      : w(t.add(name + ".weight", {out, in}, true)),
        b(bias ? t.add(name + ".bias", {out}, false) : -1),
        in(in),
        out(out),
        name(name) {}

  template <class T>
  void init(T* wt, InitStyle style, Rng& rng) const {
    if (style == InitStyle::vit) {  // timm init_weights_vit_timm
      init::trunc_normal(wt + w, in * out, 0.02, rng);
      if (b >= 0) init::fill(wt + b, out, T(0));
      return;
    }
    // timm MlpMixer _init_weights: xavier-uniform, biases of layers named '*mlp*' N(0, 1e-6).
    init::xavier_uniform(wt + w, out, in, rng);
    if (b < 0) return;
    if (name.find("mlp") != std::string::npos)
      init::normal(wt + b, out, 1e-6, rng);
    else
      init::fill(wt + b, out, T(0));
  }
  // With act, y is the activation of the product plus bias, and slope (when given) its
  // derivative there (linear_forward). y may be stored as bf16 (core/operand.h's Output).
  template <class T>
  void forward(OutputOf<T> y, OperandOf<T> x, const T* wt, int64_t M, Activation act = Activation::none,
               T* slope = nullptr, bool slope_bf16 = false) const {
    linear_forward(y, x, wt + w, b >= 0 ? wt + b : nullptr, M, in, out, act, slope, slope_bf16);
  }
  // y = add + (x·Wᵀ + b), the residual summed by the product (linear_forward); add may be null.
  template <class T>
  void forward_adding(T* y, OperandOf<T> x, const T* wt, int64_t M, const T* add) const {
    linear_forward(y, x, wt + w, b >= 0 ? wt + b : nullptr, M, in, out, Activation::none, static_cast<T*>(nullptr),
                   false, add);
  }
  // The layer over tokens: y (out, C) = add + act(W·x + b) with x (in, C), the batch as one matrix
  // (token_linear_forward); add and slope may be null, y stored as bf16.
  template <class T>
  void forward_over_tokens(OutputOf<T> y, OperandOf<T> x, const T* wt, int64_t C, Activation act = Activation::none,
                           T* slope = nullptr, bool slope_bf16 = false, const T* add = nullptr) const {
    token_linear_forward(y, x, wt + w, b >= 0 ? wt + b : nullptr, in, out, C, act, slope, slope_bf16, add);
  }
  // Its backward (token_linear_backward): dx (nullptr: not wanted) overwritten.
  template <class T>
  void backward_over_tokens(T* dx, const T* dy, OperandOf<T> x, const T* wt, T* g, int64_t C,
                            Activation act = Activation::none, const T* slope = nullptr,
                            bool slope_bf16 = false) const {
    token_linear_backward(dx, g + w, b >= 0 ? g + b : nullptr, dy, x, wt + w, in, out, C, act, slope, slope_bf16);
  }
  std::string emit(OnnxBuilder& g, const std::string& x) const { return g.linear(x, w, b); }
  // dx (nullptr: not wanted) overwritten, or with Write::accumulate added to. With act, x is
  // act(z), slope act's derivative at z, and dx the gradient of z (linear_backward). bias_summed:
  // the op that made dy has added the bias's gradient already.
  template <class T>
  void backward(T* dx, OperandOf<T> dy, OperandOf<T> x, const T* wt, T* g, int64_t M, Write dx_write = Write::overwrite,
                Activation act = Activation::none, const T* slope = nullptr, bool slope_bf16 = false,
                bool bias_summed = false) const {
    linear_backward(dx, g + w, b >= 0 && !bias_summed ? g + b : nullptr, dy, x, wt + w, M, in, out, dx_write, act,
                    slope, slope_bf16);
  }
};

// ---------------------------------------------------------------------------------------------
template <class T>
class ChannelMlp final : public Branch<T> {
 public:
  ChannelMlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t hidden, InitStyle style)
      : d_(d),
        F_(hidden),
        style_(style),
        fc1_(t, prefix + ".fc1", d.D, hidden),
        fc2_(t, prefix + ".fc2", hidden, d.D) {}
  void init(T* w, Rng& rng) const override {
    fc1_.init(w, style_, rng);
    fc2_.init(w, style_, rng);
  }
  void lay_out(Arena<T>& a, int64_t B) override {
    const int64_t M = d_.N * B;
    z_ = nullptr;  // GELU's slope at fc1's output, for backward only
    if (a.training()) a.keep(&z_, M * F_);
    a.keep(&a_, M * F_);
    if (a.training()) a.temp(&da_, M * F_);
  }
  bool multiplies_xn_only() const override { return true; }
  bool adds_residual() const override { return true; }
  void forward(T* y, OperandOf<T> xn, const T* w, int64_t B, const T* add) override {
    const int64_t M = d_.N * B;
    slope_bf16_ = gelu_slope_bf16<T>();
    // In bf16 precision GELU's output is stored as bf16 by fc1's product: only fc2's products read
    // it (core/operand.h), so its floats never reach memory.
    stored_ = std::is_same_v<T, float> && bf16_activations();
    {
      GMLP_PROFILE("fwd.fc1");  // and GELU, fused into the product
      fc1_.forward(storing(a_, stored_), xn, w, M, Activation::gelu, z_, slope_bf16_);
    }
    {
      GMLP_PROFILE("fwd.fc2");  // and the residual's sum
      fc2_.forward_adding(y, stored(a_, stored_), w, M, add);
    }
  }
  void backward(T* dxn, const T* dy, OperandOf<T> xn, const T* w, T* g, int64_t B) override {
    const int64_t M = d_.N * B;
    {
      GMLP_PROFILE("bwd.fc2");  // and GELU's backward, fused into the product
      fc2_.backward(da_, dy, stored(a_, stored_), w, g, M, Write::overwrite, Activation::gelu, z_, slope_bf16_);
    }
    {
      GMLP_PROFILE("bwd.fc1");
      fc1_.backward(dxn, da_, xn, w, g, M);
    }
  }
  double flops_per_image() const override { return 4.0 * double(d_.N * d_.D * F_); }
  std::string emit(OnnxBuilder& g, const std::string& xn) const override {
    return fc2_.emit(g, g.gelu(fc1_.emit(g, xn)));
  }

 private:
  BranchDims d_;
  int64_t F_;
  InitStyle style_;
  LinearParams fc1_, fc2_;
  T *z_ = nullptr, *a_ = nullptr, *da_ = nullptr;
  // As the last forward wrote them: z_ holds GELU's slope as bfloat16 (gelu_slope_bf16), a_ GELU's
  // output as bfloat16 (bf16_activations()).
  bool slope_bf16_ = false, stored_ = false;
};

// ---------------------------------------------------------------------------------------------
template <class T>
class TokenMlp final : public Branch<T> {
 public:
  TokenMlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t hidden, InitStyle style,
           const std::string& norm_name, float eps)
      : d_(d), Tn_(hidden), style_(style), eps_(eps) {
    if (!norm_name.empty()) {
      norm_w_ = t.add(norm_name + ".weight", {d.N}, false);
      norm_b_ = t.add(norm_name + ".bias", {d.N}, false);
    }
    fc1_ = LinearParams(t, prefix + ".fc1", d.N, hidden);
    fc2_ = LinearParams(t, prefix + ".fc2", hidden, d.N);
  }
  void init(T* w, Rng& rng) const override {
    if (norm_w_ >= 0) init::fill(w + norm_w_, d_.N, T(1)), init::fill(w + norm_b_, d_.N, T(0));
    fc1_.init(w, style_, rng);
    fc2_.init(w, style_, rng);
  }
  void lay_out(Arena<T>& a, int64_t B) override {
    const int64_t BD = B * d_.D;
    if (norm_w_ >= 0) {
      a.keep(&xt_, d_.N * BD);
      a.keep(&cmean_, BD);
      a.keep(&crstd_, BD);
      if (a.training()) a.temp(&dxt_, d_.N * BD);
    }
    z_ = nullptr;  // GELU's slope at fc1's output, for backward only
    if (a.training()) a.keep(&z_, Tn_ * BD);
    a.keep(&a_, Tn_ * BD);
    if (a.training()) a.temp(&da_, Tn_ * BD);
  }
  // The batch as one (N × B·D) matrix: A = GELU(W1·X + b1), Y = W2·A + b2, each product applying
  // its bias, GELU and the residual's sum to its blocks (token_linear_forward).
  // Without its own norm over the tokens, xn is fc1's operand only.
  bool multiplies_xn_only() const override { return norm_w_ < 0; }
  bool adds_residual() const override { return true; }
  void forward(T* y, OperandOf<T> xn, const T* w, int64_t B, const T* add) override {
    GMLP_PROFILE("fwd.token_mlp");
    const int64_t N = d_.N, BD = B * d_.D;
    Operand<T> x = xn;
    if (norm_w_ >= 0) {
      column_layernorm_forward(xt_, cmean_, crstd_, xn.data(), w + norm_w_, w + norm_b_, N, BD, T(eps_));
      x = xt_;
    }
    slope_bf16_ = gelu_slope_bf16<T>();
    stored_ = std::is_same_v<T, float> && bf16_activations();  // GELU's output: only fc2's products read it
    fc1_.forward_over_tokens(storing(a_, stored_), x, w, BD, Activation::gelu, z_, slope_bf16_);
    fc2_.forward_over_tokens(y, stored(a_, stored_), w, BD, Activation::none, static_cast<T*>(nullptr), false, add);
  }
  void backward(T* dxn, const T* dy, OperandOf<T> xn, const T* w, T* g, int64_t B) override {
    GMLP_PROFILE("bwd.token_mlp");
    const int64_t BD = B * d_.D;
    const Operand<T> x = norm_w_ >= 0 ? Operand<T>(xt_) : xn;
    fc2_.backward_over_tokens(da_, dy, stored(a_, stored_), w, g, BD, Activation::gelu, z_, slope_bf16_);
    T* dx = norm_w_ >= 0 ? dxt_ : dxn;
    fc1_.backward_over_tokens(dx, da_, x, w, g, BD);
    if (norm_w_ >= 0)
      column_layernorm_backward(dxn, g + norm_w_, g + norm_b_, dxt_, xn.data(), cmean_, crstd_, w + norm_w_, d_.N, BD);
  }
  double flops_per_image() const override { return 4.0 * double(d_.N * Tn_ * d_.D); }
  std::string emit(OnnxBuilder& g, const std::string& xn) const override {
    std::string x = xn;  // (B, N, D)
    if (norm_w_ >= 0)    // LayerNorm over the tokens: on (B, D, N), then back
      x = g.transpose(g.layernorm(g.transpose(xn, {0, 2, 1}), norm_w_, norm_b_, eps_), {0, 2, 1});
    return g.mix_tokens(g.gelu(g.mix_tokens(x, fc1_.w, fc1_.b)), fc2_.w, fc2_.b);
  }

 private:
  BranchDims d_;
  int64_t Tn_;
  InitStyle style_;
  float eps_;
  int64_t norm_w_ = -1, norm_b_ = -1;
  LinearParams fc1_, fc2_;
  T *xt_ = nullptr, *cmean_ = nullptr, *crstd_ = nullptr, *dxt_ = nullptr;
  T *z_ = nullptr, *a_ = nullptr, *da_ = nullptr;
  // As the last forward wrote them: z_ holds GELU's slope as bfloat16 (gelu_slope_bf16), a_ GELU's
  // output as bfloat16 (bf16_activations()).
  bool slope_bf16_ = false, stored_ = false;
};

// ---------------------------------------------------------------------------------------------
template <class T>
class TokenLinear final : public Branch<T> {
 public:
  TokenLinear(ParamTable& t, const std::string& prefix, BranchDims d) : d_(d), lin_(t, prefix, d.N, d.N) {}
  void init(T* w, Rng& rng) const override { lin_.init(w, InitStyle::mixer, rng); }
  void lay_out(Arena<T>&, int64_t) override {}
  bool multiplies_xn_only() const override { return true; }
  bool adds_residual() const override { return true; }
  void forward(T* y, OperandOf<T> xn, const T* w, int64_t B, const T* add) override {
    GMLP_PROFILE("fwd.token_linear");
    lin_.forward_over_tokens(y, xn, w, B * d_.D, Activation::none, static_cast<T*>(nullptr), false, add);
  }
  void backward(T* dxn, const T* dy, OperandOf<T> xn, const T* w, T* g, int64_t B) override {
    GMLP_PROFILE("bwd.token_linear");
    lin_.backward_over_tokens(dxn, dy, xn, w, g, B * d_.D);
  }
  double flops_per_image() const override { return 2.0 * double(d_.N * d_.N * d_.D); }
  std::string emit(OnnxBuilder& g, const std::string& xn) const override { return g.mix_tokens(xn, lin_.w, lin_.b); }

 private:
  BranchDims d_;
  LinearParams lin_;
};

// ---------------------------------------------------------------------------------------------
template <class T>
class GatingMlp final : public Branch<T> {
 public:
  GatingMlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t ffn, const std::string& gate,
            float gate_eps, int64_t attn_dim, const SharedScoreBias<T>* score_bias)
      : d_(d),
        F_(ffn),
        gate_(parse_sgu_gate(gate.c_str())),
        H_(SguShape{d.N, 1, ffn, gate_}.H()),
        eps_(gate_eps),
        A_(attn_dim),
        score_bias_(score_bias) {
    fc1_ = LinearParams(t, prefix + ".fc1", d.D, ffn);
    gnorm_w_ = t.add(prefix + ".gate.norm.weight", {H_}, false);
    gnorm_b_ = t.add(prefix + ".gate.norm.bias", {H_}, false);
    proj_w_ = t.add(prefix + ".gate.proj.weight", {d.N, d.N}, true);
    proj_b_ = t.add(prefix + ".gate.proj.bias", {d.N}, false);
    fc2_ = LinearParams(t, prefix + ".fc2", H_, d.D);
    if (A_ > 0) {  // aMLP: reads the block's normalised input, writes into the gate
      qkv_ = LinearParams(t, prefix + ".attn.qkv", d.D, 3 * A_);
      aproj_ = LinearParams(t, prefix + ".attn.proj", A_, H_);
    }
  }
  void init(T* w, Rng& rng) const override {
    fc1_.init(w, InitStyle::mixer, rng);
    init::fill(w + gnorm_w_, H_, T(1));
    init::fill(w + gnorm_b_, H_, T(0));
    init::normal(w + proj_w_, d_.N * d_.N, 1e-6, rng);  // spatial mixing starts near zero ...
    init::fill(w + proj_b_, d_.N, T(1));                // ... and the gate near one
    fc2_.init(w, InitStyle::mixer, rng);
    if (A_ > 0) {
      qkv_.init(w, InitStyle::mixer, rng);
      aproj_.init(w, InitStyle::mixer, rng);
    }
  }
  void lay_out(Arena<T>& a, int64_t B) override {
    const int64_t M = d_.N * B, H = H_;
    // a_: fc1's output. Training keeps it before GELU, which the gate applies as it reads each row
    // (SguShape::gelu), in the forward and again in the backward with GELU's slope, so that
    // neither GELU's output nor its slope is kept; in bf16 precision rounded to bf16 (SguBf16::z).
    // Inference has fc1's epilogue apply GELU.
    for (auto [p, n] : {std::pair{&a_, M * F_}, {&s_, M * H}}) a.keep(p, n);
    training_ = a.training();
    // The gate's saved state is for backward only; inference keeps its tiles in cache.
    mean_ = rstd_ = g_ = nullptr;
    if (a.training())
      for (auto [p, n] : {std::pair{&mean_, M}, {&rstd_, M}, {&g_, M * H}}) a.keep(p, n);
    if (A_ > 0)
      for (auto [p, n] : {std::pair{&qkv_buf_, M * 3 * A_}, {&probs_, B * d_.N * d_.N}, {&ao_, M * A_}, {&r_, M * H}})
        a.keep(p, n);
    if (!a.training()) return;
    for (auto [p, n] : {std::pair{&ds_, M * H}, {&dz_, M * F_}}) a.temp(p, n);
    dz16_ = nullptr;  // dz as bf16 for fc1's products, in bf16 precision (half the floats)
    if (std::is_same_v<T, float> && bf16_activations()) a.temp(&dz16_, (M * F_ + 1) / 2);
    if (A_ > 0)
      for (auto [p, n] : {std::pair{&dr_, M * H}, {&dao_, M * A_}, {&dqkv_, M * 3 * A_}, {&ascratch_, B * d_.N * d_.N}})
        a.temp(p, n);
  }
  bool multiplies_xn_only() const override { return true; }  // fc1's and aMLP's qkv's operand
  bool adds_residual() const override { return true; }
  void forward(T* y, OperandOf<T> xn, const T* w, int64_t B, const T* add) override {
    const int64_t M = d_.N * B;
    // In bf16 precision the gate's saved g is rounded to bf16 (SguBf16); the gate's output and
    // backward's dz are stored as bf16 as well: only products read them (core/operand.h).
    rounded_ = gelu_slope_bf16<T>();
    stored_ = std::is_same_v<T, float> && bf16_activations();
    {
      GMLP_PROFILE("fwd.fc1");  // and in inference GELU, fused into the product
      fc1_.forward(storing(a_, z_bf16()), xn, w, M, training_ ? Activation::none : Activation::gelu);
      if (training_ && rounded_ && !stored_) round_to_bf16_values(a_, M * F_);  // z_bf16()'s values
    }
    if (A_ > 0) {  // qkv and the attention's output are stored as bf16 too: only products read them
      GMLP_PROFILE("fwd.tiny_attn");
      qkv_.forward(storing(qkv_buf_, stored_), xn, w, M);
      const T* key_bias = score_bias_ ? score_bias_->key_bias : nullptr;
      attention_forward(storing(ao_, stored_), probs_, stored(qkv_buf_, stored_), AttnShape{d_.N, B, 1, A_},
                        static_cast<const T*>(nullptr), key_bias);
      aproj_.forward(r_, stored(ao_, stored_), w, M);
    }
    {
      GMLP_PROFILE("fwd.sgu");  // and in training fc1's GELU
      sgu_forward(s_, mean_, rstd_, g_, a_, w + gnorm_w_, w + gnorm_b_, w + proj_w_, w + proj_b_, shape(B), T(eps_),
                  A_ > 0 ? r_ : nullptr, gate_bf16());
    }
    {
      GMLP_PROFILE("fwd.fc2");  // and the residual's sum
      fc2_.forward_adding(y, stored(s_, stored_), w, M, add);
    }
  }
  void backward(T* dxn, const T* dy, OperandOf<T> xn, const T* w, T* g, int64_t B) override {
    const int64_t M = d_.N * B;
    {
      GMLP_PROFILE("bwd.fc2");
      fc2_.backward(ds_, dy, stored(s_, stored_), w, g, M);
    }
    // GELU's backward runs inside the gate's, on each row of dz once the row is final, with the
    // slope made again from the row of fc1's output the gate reads anyway (SguShape::gelu), and
    // fc1's bias gradient summed on the way. In bf16 precision its result is stored as bf16 for
    // fc1's products, so dz's floats never reach memory.
    const bool dz_bf16 = stored_ && dz16_;
    T* fc1_db = fc1_.b >= 0 ? g + fc1_.b : nullptr;
    {
      GMLP_PROFILE("bwd.sgu");  // and GELU
      const SguGelu<T> gelu{nullptr, false, fc1_db, dz_bf16 ? reinterpret_cast<uint16_t*>(dz16_) : nullptr};
      sgu_backward(dz_, g + gnorm_w_, g + gnorm_b_, g + proj_w_, g + proj_b_, ds_, a_, mean_, rstd_, g_, w + gnorm_w_,
                   w + gnorm_b_, w + proj_w_, shape(B), A_ > 0 ? dr_ : nullptr, gate_bf16(), &gelu);
    }
    {
      GMLP_PROFILE("bwd.fc1");
      fc1_.backward(dxn, stored(dz_bf16 ? dz16_ : dz_, dz_bf16), xn, w, g, M, Write::overwrite, Activation::none,
                    static_cast<const T*>(nullptr), false, /*bias_summed=*/true);
    }
    if (A_ > 0) {
      GMLP_PROFILE("bwd.tiny_attn");
      aproj_.backward(dao_, dr_, stored(ao_, stored_), w, g, M);
      attention_backward(dqkv_, dao_, stored(qkv_buf_, stored_), probs_, AttnShape{d_.N, B, 1, A_}, ascratch_);
      qkv_.backward(dxn, dqkv_, xn, w, g, M, Write::accumulate);
    }
  }
  double flops_per_image() const override {
    const double N = double(d_.N), D = double(d_.D), F = double(F_), H = double(H_), A = double(A_);
    double f = 2 * N * D * F + 2 * N * N * H + 2 * N * H * D;
    if (A_ > 0) f += 2 * N * D * 3 * A + 4 * N * N * A + 2 * N * A * H;
    return f;
  }
  std::string emit(OnnxBuilder& g, const std::string& xn) const override {
    const std::string a = g.gelu(fc1_.emit(g, xn));  // (B, N, F)
    std::string u = a, v = a;
    if (gate_ == SguGate::split) u = g.slice(a, 2, 0, H_), v = g.slice(a, 2, H_, F_);
    std::string vn = g.layernorm(v, gnorm_w_, gnorm_b_, eps_);
    if (score_bias_) vn = g.mul(vn, g.shared("token_keep"));  // padding's rows zeroed, as sgu_forward does
    std::string gate = g.mix_tokens(vn, proj_w_, proj_b_);
    if (A_ > 0)
      gate = g.add(gate, aproj_.emit(g, g.attention(qkv_.emit(g, xn), d_.N, 1, A_, "",
                                                    score_bias_ ? g.shared("key_bias") : "")));
    std::string s = gate;  // the linear gate: s(Z) = gate
    if (gate_ == SguGate::split || gate_ == SguGate::multiplicative) s = g.mul(u, gate);
    if (gate_ == SguGate::additive) s = g.add(u, gate);
    return fc2_.emit(g, s);
  }

 private:
  SguBf16 gate_bf16() const { return SguBf16{stored_, rounded_, z_bf16()}; }
  // Whether a_ holds fc1's output (before GELU, in training) as bfloat16: in bf16 precision, as
  // autocast keeps a linear layer's output; stored so where the activations are.
  bool z_bf16() const { return training_ && stored_; }
  SguShape shape(int64_t B) const {
    return SguShape{d_.N, B, F_, gate_, score_bias_ ? score_bias_->pad : nullptr, /*gelu=*/training_};
  }
  BranchDims d_;
  int64_t F_;
  SguGate gate_;
  int64_t H_;
  float eps_;
  int64_t A_;
  const SharedScoreBias<T>* score_bias_;
  LinearParams fc1_, fc2_, qkv_, aproj_;
  int64_t gnorm_w_ = 0, gnorm_b_ = 0, proj_w_ = 0, proj_b_ = 0;
  // As the last forward wrote them: s_, dz16_, and with the tiny attention qkv_buf_ and ao_ in use
  // (bf16_activations()); g_ holding bfloat16 (gelu_slope_bf16).
  bool stored_ = false, rounded_ = false;
  bool training_ = false;  // as lay_out planned: a_ holds fc1's output before GELU
  T *a_ = nullptr, *mean_ = nullptr, *rstd_ = nullptr, *g_ = nullptr, *s_ = nullptr;
  T *qkv_buf_ = nullptr, *probs_ = nullptr, *ao_ = nullptr, *r_ = nullptr;
  T *ds_ = nullptr, *dz_ = nullptr, *dz16_ = nullptr;
  T *dr_ = nullptr, *dao_ = nullptr, *dqkv_ = nullptr, *ascratch_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
template <class T>
class SelfAttention final : public Branch<T> {
 public:
  SelfAttention(ParamTable& t, const std::string& prefix, BranchDims d, int64_t heads, InitStyle style,
                const SharedScoreBias<T>* score_bias)
      : d_(d),
        heads_(heads),
        style_(style),
        score_bias_(score_bias),
        qkv_(t, prefix + ".qkv", d.D, 3 * d.D),
        proj_(t, prefix + ".proj", d.D, d.D) {}
  void init(T* w, Rng& rng) const override {
    qkv_.init(w, style_, rng);
    proj_.init(w, style_, rng);
  }
  void lay_out(Arena<T>& a, int64_t B) override {
    const int64_t M = d_.N * B;
    a.keep(&qkv_buf_, M * 3 * d_.D);
    a.keep(&probs_, B * heads_ * d_.N * d_.N);
    a.keep(&o_, M * d_.D);
    if (!a.training()) return;
    a.temp(&do_, M * d_.D);
    a.temp(&dqkv_, M * 3 * d_.D);
    a.temp(&scratch_, B * heads_ * d_.N * d_.N);
  }
  bool multiplies_xn_only() const override { return true; }
  bool adds_residual() const override { return true; }
  void forward(T* y, OperandOf<T> xn, const T* w, int64_t B, const T* add) override {
    GMLP_PROFILE("fwd.attention");
    const int64_t M = d_.N * B;
    // In bf16 precision qkv and the attention's output are stored as bf16 by the products that
    // make them: only products read them (core/operand.h).
    stored_ = std::is_same_v<T, float> && bf16_activations();
    qkv_.forward(storing(qkv_buf_, stored_), xn, w, M);
    attention_forward(storing(o_, stored_), probs_, stored(qkv_buf_, stored_), shape(B),
                      score_bias_ ? score_bias_->bias : nullptr, score_bias_ ? score_bias_->key_bias : nullptr);
    proj_.forward_adding(y, stored(o_, stored_), w, M, add);
  }
  void backward(T* dxn, const T* dy, OperandOf<T> xn, const T* w, T* g, int64_t B) override {
    GMLP_PROFILE("bwd.attention");
    const int64_t M = d_.N * B;
    proj_.backward(do_, dy, stored(o_, stored_), w, g, M);
    attention_backward(dqkv_, do_, stored(qkv_buf_, stored_), probs_, shape(B), scratch_,
                       score_bias_ ? score_bias_->dbias : nullptr);
    qkv_.backward(dxn, dqkv_, xn, w, g, M);
  }
  double flops_per_image() const override {
    const double N = double(d_.N), D = double(d_.D);
    return 2 * N * D * 3 * D + 4 * N * N * D + 2 * N * D * D;
  }
  // The model's score biases, when it has any, are shared values of the graph.
  std::string emit(OnnxBuilder& g, const std::string& xn) const override {
    const std::string o =
        g.attention(qkv_.emit(g, xn), d_.N, heads_, d_.D / heads_, score_bias_ ? g.shared("score_bias") : "",
                    score_bias_ ? g.shared("key_bias") : "");
    return proj_.emit(g, o);
  }

 private:
  AttnShape shape(int64_t B) const { return AttnShape{d_.N, B, heads_, d_.D / heads_}; }
  BranchDims d_;
  int64_t heads_;
  InitStyle style_;
  const SharedScoreBias<T>* score_bias_;
  LinearParams qkv_, proj_;
  T *qkv_buf_ = nullptr, *probs_ = nullptr, *o_ = nullptr;
  T *do_ = nullptr, *dqkv_ = nullptr, *scratch_ = nullptr;
  bool stored_ = false;  // qkv_buf_ and o_ hold bfloat16 (bf16_activations()), as the last forward wrote them
};

// ---------------------------------------------------------------------------------------------
// External attention (Guo et al. 2021, MEAttention with coef 1): per head, on q = query(x):
//   a = q·M_kᵀ + b_k;  a ← softmax over tokens;  a ← a / (1e-9 + Σ_memory a);  o = a·M_vᵀ + b_v
// then proj. M_k, M_v (linear_0, linear_1) are shared by the heads and by every image.
template <class T>
class ExternalAttention final : public Branch<T> {
 public:
  ExternalAttention(ParamTable& t, const std::string& prefix, BranchDims d, int64_t heads, int64_t memory,
                    InitStyle style)
      : d_(d),
        heads_(heads),
        dh_(d.D / heads),
        memory_(memory),
        style_(style),
        query_(t, prefix + ".query", d.D, d.D),
        mk_(t, prefix + ".linear_0", dh_, memory),
        mv_(t, prefix + ".linear_1", memory, dh_),
        proj_(t, prefix + ".proj", d.D, d.D) {}
  void init(T* w, Rng& rng) const override {
    for (const LinearParams* l : {&query_, &mk_, &mv_, &proj_}) l->init(w, style_, rng);
  }
  void lay_out(Arena<T>& a, int64_t B) override {
    const int64_t M = d_.N * B, R = M * heads_;  // R rows of (token, image, head)
    a.keep(&q_, M * d_.D);
    a.keep(&p_, R * memory_);
    a.keep(&psum_, R);
    a.keep(&r_, R * memory_);
    a.keep(&o_, M * d_.D);
    if (!a.training()) return;
    a.temp(&do_, M * d_.D);
    a.temp(&dr_, R * memory_);
    a.temp(&dq_, M * d_.D);
  }
  bool multiplies_xn_only() const override { return true; }
  bool adds_residual() const override { return true; }
  void forward(T* y, OperandOf<T> xn, const T* w, int64_t B, const T* add) override {
    GMLP_PROFILE("fwd.external_attention");
    const int64_t M = d_.N * B, R = M * heads_, cols = B * heads_ * memory_;
    query_.forward(q_, xn, w, M);
    mk_.forward(p_, q_, w, R);  // (R, dh) → (R, memory): q rows of every head are dh-wide
    // Softmax over tokens: p viewed as (N, B·heads·memory), one softmax per column; then each row
    // divided by its sum over the memory units.
    column_softmax_forward(p_, p_, d_.N, cols);
    sum_normalize_forward(r_, psum_, p_, R, memory_);
    mv_.forward(o_, r_, w, R);  // (R, memory) → (R, dh) = (M, D)
    proj_.forward_adding(y, o_, w, M, add);
  }
  void backward(T* dxn, const T* dy, OperandOf<T> xn, const T* w, T* g, int64_t B) override {
    GMLP_PROFILE("bwd.external_attention");
    const int64_t M = d_.N * B, R = M * heads_, cols = B * heads_ * memory_;
    proj_.backward(do_, dy, o_, w, g, M);
    mv_.backward(dr_, do_, r_, w, g, R);
    sum_normalize_backward(dr_, dr_, r_, psum_, R, memory_);  // ∂L/∂p, written over dr
    column_softmax_backward(dr_, dr_, p_, d_.N, cols);        // ∂L/∂(the scores), likewise
    mk_.backward(dq_, dr_, q_, w, g, R);
    query_.backward(dxn, dq_, xn, w, g, M);
  }
  double flops_per_image() const override {
    const double N = double(d_.N), D = double(d_.D), mem = double(memory_);
    return 2 * N * D * D * 2 + 2 * 2 * N * D * mem;
  }
  std::string emit(OnnxBuilder& g, const std::string& xn) const override {
    const std::string q = g.reshape(query_.emit(g, xn), {0, d_.N, heads_, dh_});   // (B, N, heads, dh)
    const std::string a = mk_.emit(g, q);                                          // (B, N, heads, memory)
    const std::string p = g.op("Softmax", {a}, {onnx::attr("axis", int64_t(1))});  // over tokens
    const std::string r = g.op("Div", {p, g.add(g.reduce_sum(p, 3, true), g.scalar(1e-9f))});
    return proj_.emit(g, g.reshape(mv_.emit(g, r), {0, d_.N, d_.D}));
  }

 private:
  BranchDims d_;
  int64_t heads_, dh_, memory_;
  InitStyle style_;
  LinearParams query_, mk_, mv_, proj_;
  T *q_ = nullptr, *p_ = nullptr, *psum_ = nullptr, *r_ = nullptr, *o_ = nullptr;
  T *do_ = nullptr, *dr_ = nullptr, *dq_ = nullptr;
};

}  // namespace

template <class T>
std::unique_ptr<Branch<T>> make_channel_mlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t hidden,
                                            InitStyle style) {
  return std::make_unique<ChannelMlp<T>>(t, prefix, d, hidden, style);
}
template <class T>
std::unique_ptr<Branch<T>> make_token_mlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t hidden,
                                          InitStyle style, const std::string& token_norm_name, float eps) {
  return std::make_unique<TokenMlp<T>>(t, prefix, d, hidden, style, token_norm_name, eps);
}
template <class T>
std::unique_ptr<Branch<T>> make_token_linear(ParamTable& t, const std::string& prefix, BranchDims d) {
  return std::make_unique<TokenLinear<T>>(t, prefix, d);
}
template <class T>
std::unique_ptr<Branch<T>> make_gating_mlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t ffn,
                                           const std::string& gate, float gate_eps, int64_t attn_dim,
                                           const SharedScoreBias<T>* score_bias) {
  return std::make_unique<GatingMlp<T>>(t, prefix, d, ffn, gate, gate_eps, attn_dim, score_bias);
}
template <class T>
std::unique_ptr<Branch<T>> make_self_attention(ParamTable& t, const std::string& prefix, BranchDims d, int64_t heads,
                                               InitStyle style, const SharedScoreBias<T>* score_bias) {
  return std::make_unique<SelfAttention<T>>(t, prefix, d, heads, style, score_bias);
}
template <class T>
std::unique_ptr<Branch<T>> make_external_attention(ParamTable& t, const std::string& prefix, BranchDims d,
                                                   int64_t heads, int64_t memory, InitStyle style) {
  return std::make_unique<ExternalAttention<T>>(t, prefix, d, heads, memory, style);
}

#define GMLP_INSTANTIATE(T)                                                                                            \
  template std::unique_ptr<Branch<T>> make_channel_mlp<T>(ParamTable&, const std::string&, BranchDims, int64_t,        \
                                                          InitStyle);                                                  \
  template std::unique_ptr<Branch<T>> make_token_mlp<T>(ParamTable&, const std::string&, BranchDims, int64_t,          \
                                                        InitStyle, const std::string&, float);                         \
  template std::unique_ptr<Branch<T>> make_token_linear<T>(ParamTable&, const std::string&, BranchDims);               \
  template std::unique_ptr<Branch<T>> make_gating_mlp<T>(ParamTable&, const std::string&, BranchDims, int64_t,         \
                                                         const std::string&, float, int64_t,                           \
                                                         const SharedScoreBias<T>*);                                   \
  template std::unique_ptr<Branch<T>> make_self_attention<T>(ParamTable&, const std::string&, BranchDims, int64_t,     \
                                                             InitStyle, const SharedScoreBias<T>*);                    \
  template std::unique_ptr<Branch<T>> make_external_attention<T>(ParamTable&, const std::string&, BranchDims, int64_t, \
                                                                 int64_t, InitStyle);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
