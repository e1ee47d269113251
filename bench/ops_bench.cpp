// Per-op benchmark (make bench-ops): every op's forward and backward, the fast version on 1 and
// 2 threads and its plain _ref twin, at the shapes the presets train (Google Benchmark).
// Names are OP/SHAPE/PASS/VARIANT/threads:T, e.g. sgu/fmnist-s/bwd/fast/threads:2, so
// --benchmark_filter picks ops, shapes or variants. The _ref twins are serial loops, so they run on
// one thread only. Counters, per second of wall-clock time: FLOP (the op's arithmetic, as listed
// beside each case) and bytes (what the op's contract reads and writes, each tensor once: inputs
// and saved values read, outputs written; scratch not counted). Buffers are filled once per run,
// and each run of a fast version calls it once before timing it.
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/matmul.h"
#include "core/rng.h"
#include "core/threads.h"
#include "nn/config.h"
#include "nn/text_model.h"
#include "ops/add_relu.h"
#include "ops/affine.h"
#include "ops/attention.h"
#include "ops/column_layernorm.h"
#include "ops/column_softmax.h"
#include "ops/conv2d.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layer_scale.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/rel_bias.h"
#include "ops/row_bias.h"
#include "ops/sgu.h"
#include "ops/softmax.h"
#include "ops/sum_normalize.h"
#include "peak.h"

namespace gmlp {
namespace {

// One benchmark shape: a preset's dimensions and the batch it is benchmarked at.
struct Shape {
  std::string name;
  int64_t N, B, D, F;  // tokens, batch, width, expanded width (d_ffn)
  int64_t K;           // classes; the vocabulary for a text shape
  bool text = false;
  int64_t heads = 4;             // attention (ViT/BERT's 4 heads); external attention's heads
  int64_t memory = 0;            // external attention's memory units per head
  int64_t cnn_C = 0, cnn_S = 0;  // > 0: conv2d and add_relu at the CNN's first stage, C channels, S×S
  int64_t M() const { return N * B; }
};

// fmnist-s and cifar-s at their presets' batch, gMLP-Ti/16 at batch 8 (make bench's shape; the
// preset's 1024 is the paper's), the KJV text models at theirs. The CNN's convolution and the
// other kinds' ops (ResMLP, feed-forward-only, external attention) run at the same N, B and D.
std::vector<Shape> shapes() {
  std::vector<Shape> out;
  const ModelConfig& cnn = find_preset("fmnist-cnn").config;
  auto image = [&](const char* name, int64_t batch, bool conv) {
    const Preset& p = find_preset(name);
    const ModelConfig& c = p.config;
    Shape s{name, c.tokens(), batch ? batch : p.train.batch_size, c.dim, c.ffn, c.num_classes};
    s.heads = c.heads, s.memory = c.memory;
    if (conv) s.cnn_C = cnn.dim, s.cnn_S = c.img_size;
    out.push_back(s);
  };
  image("fmnist-s", 0, true);
  image("cifar-s", 0, true);
  image("gmlp-ti16", 8, false);
  const TextPreset& t = find_text_preset("kjv-gmlp");
  Shape k{"kjv", t.config.seq_len, t.batch_size, t.config.dim, t.config.ffn, t.config.vocab_size, true};
  k.heads = find_text_preset("kjv-bert").config.heads;
  out.push_back(k);
  return out;
}

// Buffers of one benchmark run, uniform in [lo, hi) (cheap to fill; the ops' speed does not
// depend on the values). They are core/buffer.h's, as the model's arenas are: large ones on 2 MB
// pages. On 4 KB pages a product writing a large C missed the TLB on every row of it, and
// measured 11-34 % slower than on the memory a training step gives it.
class Buffers {
 public:
  float* uniform(int64_t n, float lo = -1.f, float hi = 1.f) {
    float* v = owned_.emplace_back(size_t(n)).data();
    for (int64_t i = 0; i < n; ++i) v[i] = float(rng_.uniform(lo, hi));
    return v;
  }
  float* fill(int64_t n, float value) {
    float* v = owned_.emplace_back(size_t(n)).data();
    std::fill(v, v + n, value);
    return v;
  }
  int32_t* ints(int64_t n, int64_t below) {  // in [0, below)
    int32_t* v = ints_.emplace_back(size_t(n)).data();
    for (int64_t i = 0; i < n; ++i) v[i] = int32_t(rng_.below(uint64_t(below)));
    return v;
  }

 private:
  Rng rng_{20260101};
  std::vector<Buffer<float>> owned_;
  std::vector<Buffer<int32_t>> ints_;
};

using Call = std::function<void()>;
using Setup = std::function<Call(Buffers&)>;

constexpr double kF = sizeof(float);

// variant: "fast", its serial twin "ref", or a variant of the fast version (the gate as a training
// step runs it, "train_f32" and "train_bf16").
void add(const std::string& op, const Shape& s, const char* pass, const std::string& variant, double flops,
         double bytes, const Setup& setup) {
  const bool ref = variant == "ref";
  for (const int threads : {1, 2}) {
    if (ref && threads > 1) continue;  // the _ref loops are serial
    const std::string name = op + "/" + s.name + "/" + pass + "/" + variant + "/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(
        name.c_str(),
        [=](benchmark::State& st) {
          set_threads(threads);
          Buffers buf;
          const Call call = setup(buf);
          if (!ref) call();  // warm-up: per-thread scratch, oneDNN's primitives (a _ref has neither)
          for (auto _ : st) call();
          st.counters["FLOP"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
          st.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
        })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

// add() for an op with a fast version and a _ref twin: setup(buf, ref).
void add_both(const std::string& op, const Shape& s, const char* pass, double flops, double bytes,
              const std::function<Call(Buffers&, bool)>& setup) {
  for (const bool ref : {false, true})
    add(op, s, pass, ref ? "ref" : "fast", flops, bytes, [setup, ref](Buffers& b) { return setup(b, ref); });
}

// ---------------------------------------------------------------------------------------------
// The ops of every model: linear (fc1), the spatial gating unit, layernorm, GELU, attention,
// softmax and cross-entropy, and conv2d where the shape has a CNN.
void register_heavy(const Shape& s) {
  const int64_t N = s.N, B = s.B, D = s.D, F = s.F, M = s.M(), H = F / 2;

  // linear: gMLP's fc1, (M, D) → (M, F). fwd 2·M·D·F; bwd 4·M·D·F (dx, dW) + M·F (db).
  add_both("linear", s, "fwd", 2.0 * M * D * F, kF * (M * D + F * D + F + M * F), [=](Buffers& b, bool ref) -> Call {
    float *y = b.fill(M * F, 0), *x = b.uniform(M * D), *W = b.uniform(F * D, -0.1f, 0.1f), *bias = b.uniform(F);
    if (ref) return [=] { linear_forward_ref(y, x, W, bias, M, D, F); };
    return [=] { linear_forward(y, x, W, bias, M, D, F); };
  });
  add_both("linear", s, "bwd", 4.0 * M * D * F + 1.0 * M * F, kF * (M * F + M * D + F * D + M * D + F * D + F),
           [=](Buffers& b, bool ref) -> Call {
             float *dx = b.fill(M * D, 0), *dW = b.fill(F * D, 0), *db = b.fill(F, 0);
             float *dy = b.uniform(M * F), *x = b.uniform(M * D), *W = b.uniform(F * D, -0.1f, 0.1f);
             if (ref) return [=] { linear_backward_ref(dx, dW, db, dy, x, W, M, D, F); };
             return [=] { linear_backward(dx, dW, db, dy, x, W, M, D, F, Write::overwrite); };
           });

  // sgu (split gate): the N×N token projection per image, 2·B·N²·H, plus LayerNorm and gate
  // (10 per element of (M, H)); backward 4·B·N²·H + 20·M·H. Saved: g (M, H), mean, rstd (M)
  // (backward makes v̂ again from z).
  const SguShape sg{N, B, F, SguGate::split};
  const double sgu_param_bytes = kF * (2 * H + N * N + N);
  add_both("sgu", s, "fwd", 2.0 * B * N * N * H + 10.0 * M * H, kF * (M * F + 2 * M * H + 2 * M) + sgu_param_bytes,
           [=](Buffers& b, bool ref) -> Call {
             float *out = b.fill(M * H, 0), *mean = b.fill(M, 0), *rstd = b.fill(M, 0), *g = b.fill(M * H, 0);
             float *z = b.uniform(M * F), *gamma = b.uniform(H), *beta = b.uniform(H),
                   *W = b.uniform(N * N, -0.1f, 0.1f), *bias = b.uniform(N);
             if (ref) return [=] { sgu_forward_ref(out, z, gamma, beta, W, bias, sg, 1e-5f); };
             return [=] { sgu_forward(out, mean, rstd, g, z, gamma, beta, W, bias, sg, 1e-5f); };
           });
  add_both("sgu", s, "bwd", 4.0 * B * N * N * H + 20.0 * M * H,
           kF * (M * H + M * F + M * H + 2 * M + M * F) + sgu_param_bytes, [=](Buffers& b, bool ref) -> Call {
             float *dz = b.fill(M * F, 0), *dgamma = b.fill(H, 0), *dbeta = b.fill(H, 0), *dW = b.fill(N * N, 0),
                   *db = b.fill(N, 0);
             float *mean = b.fill(M, 0), *rstd = b.fill(M, 0), *g = b.fill(M * H, 0), *out = b.fill(M * H, 0);
             float *dout = b.uniform(M * H), *z = b.uniform(M * F), *gamma = b.uniform(H), *beta = b.uniform(H);
             float *W = b.uniform(N * N, -0.1f, 0.1f), *bias = b.uniform(N);
             if (ref)
               return [=] { sgu_backward_ref(dz, dgamma, dbeta, dW, db, dout, z, gamma, beta, W, bias, sg, 1e-5f); };
             sgu_forward(out, mean, rstd, g, z, gamma, beta, W, bias, sg, 1e-5f);
             return [=] { sgu_backward(dz, dgamma, dbeta, dW, db, dout, z, mean, rstd, g, gamma, beta, W, sg); };
           });
  // The gate as gMLP's training step runs it (GatingMlp in nn/branches.cpp): z is fc1's output
  // before GELU, which the gate applies as it reads each row and its backward again with GELU's
  // slope, summing fc1's bias gradient on the way. In bf16 (train_bf16, where the CPU has a bf16
  // product) z, g and out are stored as bfloat16, the token products are bf16, and backward stores
  // dz as bfloat16 for fc1's products. GELU adds 5 per element of (M, F) forward and 12 backward.
  for (const bool bf16 : {false, true}) {
    if (bf16 && !(gemm::bf16_available() && cpu_has_bf16())) continue;
    const char* variant = bf16 ? "train_bf16" : "train_f32";
    SguShape st = sg;
    st.gelu = true;
    const SguBf16 stored{bf16, bf16, bf16};
    const double e = bf16 ? 2 : kF;  // bytes of a stored element
    // z (as the forward makes it, or rounded into a bfloat16 buffer) and the saved mean, rstd, g.
    struct Saved {
      float *z, *mean, *rstd, *g, *out;
    };
    auto saved = [=](Buffers& b) {
      float* zf = b.uniform(M * F, -3.f, 3.f);
      float* z = zf;
      if (bf16) z = b.fill((M * F + 1) / 2, 0), gemm::round_to_bf16(reinterpret_cast<uint16_t*>(z), zf, M * F);
      return Saved{z, b.fill(M, 0), b.fill(M, 0), b.fill(M * H, 0), b.fill(M * H, 0)};
    };
    // The products' precision, the step's while the call runs.
    auto in_precision = [bf16](auto&& f) {
      set_matmul_precision(bf16 ? Precision::bf16 : Precision::f32);
      f();
      set_matmul_precision(Precision::f32);
    };
    add("sgu", s, "fwd", variant, 2.0 * B * N * N * H + 10.0 * M * H + 5.0 * M * F,
        e * (M * F + 2 * M * H) + kF * 2 * M + sgu_param_bytes, [=](Buffers& b) -> Call {
          const Saved v = saved(b);
          float *gamma = b.uniform(H), *beta = b.uniform(H), *W = b.uniform(N * N, -0.1f, 0.1f), *bias = b.uniform(N);
          return [=] {
            in_precision([&] {
              sgu_forward(v.out, v.mean, v.rstd, v.g, v.z, gamma, beta, W, bias, st, 1e-5f,
                          static_cast<const float*>(nullptr), stored);
            });
          };
        });
    add("sgu", s, "bwd", variant, 4.0 * B * N * N * H + 20.0 * M * H + 12.0 * M * F,
        kF * (M * H + 2 * M + F) + e * (M * F + M * H + M * F) + sgu_param_bytes, [=](Buffers& b) -> Call {
          const Saved v = saved(b);
          float *gamma = b.uniform(H), *beta = b.uniform(H), *W = b.uniform(N * N, -0.1f, 0.1f), *bias = b.uniform(N);
          float *dz = b.fill(M * F, 0), *dgamma = b.fill(H, 0), *dbeta = b.fill(H, 0), *dW = b.fill(N * N, 0),
                *db = b.fill(N, 0), *dbias = b.fill(F, 0), *dout = b.uniform(M * H);
          uint16_t* d16 = bf16 ? reinterpret_cast<uint16_t*>(b.fill((M * F + 1) / 2, 0)) : nullptr;
          in_precision([&] {
            sgu_forward(v.out, v.mean, v.rstd, v.g, v.z, gamma, beta, W, bias, st, 1e-5f,
                        static_cast<const float*>(nullptr), stored);
          });
          return [=] {
            const SguGelu<float> gelu{nullptr, false, dbias, d16};
            in_precision([&] {
              sgu_backward(dz, dgamma, dbeta, dW, db, dout, v.z, v.mean, v.rstd, v.g, gamma, beta, W, st,
                           static_cast<float*>(nullptr), stored, &gelu);
            });
          };
        });
  }

  // layernorm over D per row: 8 per element forward, 19 backward (dx, dγ, dβ).
  add_both("layernorm", s, "fwd", 8.0 * M * D, kF * (2 * M * D + 2 * D + 2 * M), [=](Buffers& b, bool ref) -> Call {
    float *y = b.fill(M * D, 0), *mean = b.fill(M, 0), *rstd = b.fill(M, 0);
    float *x = b.uniform(M * D), *gamma = b.uniform(D), *beta = b.uniform(D);
    if (ref) return [=] { layernorm_forward_ref(y, D, mean, rstd, x, D, gamma, beta, M, D, 1e-6f); };
    return [=] { layernorm_forward(y, D, mean, rstd, x, D, gamma, beta, M, D, 1e-6f); };
  });
  add_both("layernorm", s, "bwd", 19.0 * M * D, kF * (3 * M * D + 2 * M + 3 * D), [=](Buffers& b, bool ref) -> Call {
    float *dx = b.fill(M * D, 0), *dgamma = b.fill(D, 0), *dbeta = b.fill(D, 0), *mean = b.fill(M, 0),
          *rstd = b.fill(M, 0);
    float *dy = b.uniform(M * D), *x = b.uniform(M * D), *gamma = b.uniform(D), *beta = b.uniform(D);
    layernorm_forward(b.fill(M * D, 0), D, mean, rstd, x, D, gamma, beta, M, D, 1e-6f);
    if (ref) return [=] { layernorm_backward_ref(dx, D, dgamma, dbeta, dy, D, x, D, mean, rstd, gamma, M, D); };
    return [=] { layernorm_backward(dx, D, dgamma, dbeta, dy, D, x, D, mean, rstd, gamma, M, D, Write::overwrite); };
  });

  // gelu on fc1's output (M, F): 5 per element forward (erf counted as one), 12 backward.
  const int64_t n = M * F;
  add_both("gelu", s, "fwd", 5.0 * n, kF * 2 * n, [=](Buffers& b, bool ref) -> Call {
    float *y = b.fill(n, 0), *x = b.uniform(n, -4.f, 4.f);
    if (ref) return [=] { gelu_forward_ref(y, x, n); };
    return [=] { gelu_forward(y, x, n); };
  });
  add_both("gelu", s, "bwd", 12.0 * n, kF * 3 * n, [=](Buffers& b, bool ref) -> Call {
    float *dx = b.fill(n, 0), *dy = b.uniform(n), *x = b.uniform(n, -4.f, 4.f);
    if (ref) return [=] { gelu_backward_ref(dx, dy, x, n); };
    return [=] { gelu_backward(dx, dy, x, n); };
  });

  // attention, ViT's (images) or BERT's (text) heads: QKᵀ and PV 4·B·heads·N²·dh, softmax
  // 4·B·heads·N²; backward 8·B·heads·N²·dh + 6·B·heads·N². Saved: P (B, heads, N, N).
  const AttnShape as{N, B, s.heads, D / s.heads};
  const int64_t W3 = 3 * as.width(), P = B * s.heads * N * N;
  add_both("attention", s, "fwd", 4.0 * P * as.dh + 4.0 * P, kF * (M * W3 + M * as.width() + P),
           [=](Buffers& b, bool ref) -> Call {
             float *o = b.fill(M * as.width(), 0), *Pb = b.fill(P, 0), *qkv = b.uniform(M * W3);
             if (ref) return [=] { attention_forward_ref(o, qkv, as); };
             return [=] { attention_forward(o, Pb, qkv, as); };
           });
  add_both("attention", s, "bwd", 8.0 * P * as.dh + 6.0 * P, kF * (M * as.width() + 2 * M * W3 + P),
           [=](Buffers& b, bool ref) -> Call {
             float *dqkv = b.fill(M * W3, 0), *Pb = b.fill(P, 0), *scratch = b.fill(P, 0);
             float *dout = b.uniform(M * as.width()), *qkv = b.uniform(M * W3);
             if (ref) return [=] { attention_backward_ref(dqkv, dout, qkv, as); };
             attention_forward(b.fill(M * as.width(), 0), Pb, qkv, as);
             return [=] { attention_backward(dqkv, dout, qkv, Pb, as, scratch); };
           });

  // softmax and cross-entropy over the head's logits: (B, K) for images, the masked-token chunk
  // (kMlmChunk, V) for text. softmax 4 per element; cross-entropy 5 forward, 2 backward.
  const int64_t rows = s.text ? TextModel<float>::kMlmChunk : B, K = s.K;
  add("softmax", s, "fwd", "fast", 4.0 * rows * K, kF * 2 * rows * K, [=](Buffers& b) -> Call {
    float *p = b.fill(rows * K, 0), *l = b.uniform(rows * K, -5.f, 5.f);
    return [=] {
      for (int64_t r = 0; r < rows; ++r) softmax_row(p + r * K, l + r * K, K);
    };
  });
  add("cross_entropy", s, "fwd", "fast", 5.0 * rows * K, kF * (2 * rows * K + rows), [=](Buffers& b) -> Call {
    float *probs = b.fill(rows * K, 0), *logits = b.uniform(rows * K, -5.f, 5.f);
    const int32_t* labels = b.ints(rows, K);
    return [=] { benchmark::DoNotOptimize(cross_entropy_forward(probs, logits, labels, rows, K, 0.1f)); };
  });
  add("cross_entropy", s, "bwd", "fast", 2.0 * rows * K, kF * (2 * rows * K + rows), [=](Buffers& b) -> Call {
    float *dlogits = b.fill(rows * K, 0), *probs = b.fill(rows * K, 0), *logits = b.uniform(rows * K, -5.f, 5.f);
    const int32_t* labels = b.ints(rows, K);
    cross_entropy_forward(probs, logits, labels, rows, K, 0.1f);
    return [=] { cross_entropy_backward(dlogits, probs, labels, rows, K, 0.1f); };
  });

  if (s.cnn_C <= 0) return;
  // conv2d: the CNN's first-stage 3×3 convolution, C → C channels on S×S images, over the chunk
  // of images that one call takes (ConvBn in nn/cnn.h: batch·Cout/(k²·Cin) images, at least 128
  // output pixels' worth). 2·chunk·C·S²·C·9 forward, twice that backward (dw, dx).
  const int64_t C = s.cnn_C, Sc = s.cnn_S;
  const int64_t chunk = std::clamp<int64_t>(std::max(B * C / (9 * C), (128 + Sc * Sc - 1) / (Sc * Sc)), 1, B);
  const ConvShape cs{chunk, C, Sc, Sc, C, 3, 1, 1};
  const int64_t nx = cs.B * cs.Cin * cs.Hi * cs.Wi, nw = cs.Cout * cs.col_rows(),
                ny = cs.B * cs.Cout * cs.Ho() * cs.Wo();
  const double conv_flops = 2.0 * ny * cs.col_rows();
  add_both("conv2d", s, "fwd", conv_flops, kF * (nx + nw + ny), [=](Buffers& b, bool ref) -> Call {
    float *y = b.fill(ny, 0), *x = b.uniform(nx), *w = b.uniform(nw, -0.1f, 0.1f), *col = b.fill(cs.col_size(), 0);
    if (ref) return [=] { conv2d_forward_ref(y, x, w, cs); };
    return [=] { conv2d_forward(y, x, w, cs, col); };
  });
  add_both("conv2d", s, "bwd", 2 * conv_flops, kF * (ny + 2 * nx + 2 * nw), [=](Buffers& b, bool ref) -> Call {
    float *dx = b.fill(nx, 0), *dw = b.fill(nw, 0), *col = b.fill(cs.col_size(), 0);
    float *dy = b.uniform(ny), *x = b.uniform(nx), *w = b.uniform(nw, -0.1f, 0.1f);
    if (ref) return [=] { conv2d_backward_ref(dx, dw, dy, x, w, cs); };
    return [=] { conv2d_backward(dx, dw, dy, x, w, cs, col); };
  });
  // add_relu: the CNN block's output over the whole batch, (B, C, S, S). 2 per element forward,
  // 1 backward.
  const int64_t na = B * C * Sc * Sc;
  add_both("add_relu", s, "fwd", 2.0 * na, kF * 3 * na, [=](Buffers& b, bool ref) -> Call {
    float *out = b.fill(na, 0), *x = b.uniform(na), *y = b.uniform(na);
    if (ref) return [=] { add_relu_forward_ref(out, x, y, na); };
    return [=] { add_relu_forward(out, x, y, na); };
  });
  add_both("add_relu", s, "bwd", 1.0 * na, kF * 3 * na, [=](Buffers& b, bool ref) -> Call {
    float *dsum = b.fill(na, 0), *dout = b.uniform(na), *out = b.uniform(na);
    if (ref) return [=] { add_relu_backward_ref(dsum, dout, out, na); };
    return [=] { add_relu_backward(dsum, dout, out, na); };
  });
}

// ---------------------------------------------------------------------------------------------
// The other image kinds' ops at the shape's N, B, D: ResMLP's affine and layer scale, the token
// MLPs' row bias and the feed-forward-only model's column LayerNorm on (N, B·D), external
// attention's column softmax on (N, B·heads·memory) and sum normalisation on (N·B·heads, memory).
void register_image_kinds(const Shape& s) {
  const int64_t N = s.N, B = s.B, D = s.D, M = s.M(), cols = B * D;

  // affine: 2 per element forward; 5 backward (dx, dα, dβ).
  add_both("affine", s, "fwd", 2.0 * M * D, kF * (2 * M * D + 2 * D), [=](Buffers& b, bool ref) -> Call {
    float *y = b.fill(M * D, 0), *x = b.uniform(M * D), *alpha = b.uniform(D), *beta = b.uniform(D);
    if (ref) return [=] { affine_forward_ref(y, x, alpha, beta, M, D); };
    return [=] { affine_forward(y, x, alpha, beta, M, D); };
  });
  add_both("affine", s, "bwd", 5.0 * M * D, kF * (3 * M * D + 3 * D), [=](Buffers& b, bool ref) -> Call {
    float *dx = b.fill(M * D, 0), *dalpha = b.fill(D, 0), *dbeta = b.fill(D, 0);
    float *dy = b.uniform(M * D), *x = b.uniform(M * D), *alpha = b.uniform(D);
    if (ref) return [=] { affine_backward_ref(dx, dalpha, dbeta, dy, x, alpha, M, D); };
    return [=] { affine_backward(dx, dalpha, dbeta, dy, x, alpha, M, D); };
  });

  // layer_scale with drop path: 3 per element forward; 4 backward (dy, dγ).
  add_both("layer_scale", s, "fwd", 3.0 * M * D, kF * (3 * M * D + D + B), [=](Buffers& b, bool ref) -> Call {
    float *out = b.fill(M * D, 0), *x = b.uniform(M * D), *y = b.uniform(M * D), *gamma = b.uniform(D);
    const float* keep = b.fill(B, 1.25f);
    if (ref) return [=] { layer_scale_forward_ref(out, x, y, keep, gamma, N, B, D); };
    return [=] { layer_scale_forward(out, x, y, keep, gamma, N, B, D); };
  });
  add_both("layer_scale", s, "bwd", 4.0 * M * D, kF * (3 * M * D + 2 * D + B), [=](Buffers& b, bool ref) -> Call {
    float *dy = b.fill(M * D, 0), *dgamma = b.fill(D, 0), *dout = b.uniform(M * D), *y = b.uniform(M * D);
    float* gamma = b.uniform(D);
    const float* keep = b.fill(B, 1.25f);
    if (ref) return [=] { layer_scale_backward_ref(dy, dgamma, dout, y, keep, gamma, N, B, D); };
    return [=] { layer_scale_backward(dy, dgamma, dout, y, keep, gamma, N, B, D); };
  });

  // row_bias's gradient on a token-mixing product (N, B·D), 1 per element (the forward rides on the
  // product: token_linear_forward).
  add_both("row_bias", s, "bwd", 1.0 * N * cols, kF * (N * cols + N), [=](Buffers& b, bool ref) -> Call {
    float *db = b.fill(N, 0), *dy = b.uniform(N * cols);
    if (ref) return [=] { row_bias_backward_ref(db, dy, N, cols); };
    return [=] { row_bias_backward(db, dy, N, cols); };
  });

  // column_layernorm over the N tokens of each of the B·D columns: 8 forward, 19 backward.
  add_both("column_layernorm", s, "fwd", 8.0 * N * cols, kF * (2 * N * cols + 2 * cols + 2 * N),
           [=](Buffers& b, bool ref) -> Call {
             float *y = b.fill(N * cols, 0), *mean = b.fill(cols, 0), *rstd = b.fill(cols, 0);
             float *x = b.uniform(N * cols), *gamma = b.uniform(N), *beta = b.uniform(N);
             if (ref) return [=] { column_layernorm_forward_ref(y, mean, rstd, x, gamma, beta, N, cols, 1e-6f); };
             return [=] { column_layernorm_forward(y, mean, rstd, x, gamma, beta, N, cols, 1e-6f); };
           });
  add_both("column_layernorm", s, "bwd", 19.0 * N * cols, kF * (3 * N * cols + 2 * cols + 3 * N),
           [=](Buffers& b, bool ref) -> Call {
             float *dx = b.fill(N * cols, 0), *dgamma = b.fill(N, 0), *dbeta = b.fill(N, 0), *mean = b.fill(cols, 0),
                   *rstd = b.fill(cols, 0);
             float *dy = b.uniform(N * cols), *x = b.uniform(N * cols), *gamma = b.uniform(N), *beta = b.uniform(N);
             column_layernorm_forward(b.fill(N * cols, 0), mean, rstd, x, gamma, beta, N, cols, 1e-6f);
             if (ref)
               return [=] { column_layernorm_backward_ref(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, N, cols); };
             return [=] { column_layernorm_backward(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, N, cols); };
           });

  // External attention's scores (N, B·heads·S), S memory units: the column softmax 5 per
  // element forward, 4 backward; the sum normalisation 2 forward, 4 backward.
  const int64_t S = s.memory, acols = B * s.heads * S, R = M * s.heads, E = N * acols;
  add_both("column_softmax", s, "fwd", 5.0 * E, kF * 2 * E, [=](Buffers& b, bool ref) -> Call {
    float *p = b.fill(E, 0), *a = b.uniform(E, -3.f, 3.f);
    if (ref) return [=] { column_softmax_forward_ref(p, a, N, acols); };
    return [=] { column_softmax_forward(p, a, N, acols); };
  });
  add_both("column_softmax", s, "bwd", 4.0 * E, kF * 3 * E, [=](Buffers& b, bool ref) -> Call {
    float *da = b.fill(E, 0), *p = b.fill(E, 0), *dp = b.uniform(E);
    column_softmax_forward(p, b.uniform(E, -3.f, 3.f), N, acols);
    if (ref) return [=] { column_softmax_backward_ref(da, dp, p, N, acols); };
    return [=] { column_softmax_backward(da, dp, p, N, acols); };
  });
  add_both("sum_normalize", s, "fwd", 2.0 * E, kF * (2 * E + R), [=](Buffers& b, bool ref) -> Call {
    float *r = b.fill(E, 0), *psum = b.fill(R, 0), *p = b.uniform(E, 0.f, 1.f);
    if (ref) return [=] { sum_normalize_forward_ref(r, psum, p, R, S); };
    return [=] { sum_normalize_forward(r, psum, p, R, S); };
  });
  add_both("sum_normalize", s, "bwd", 4.0 * E, kF * (3 * E + R), [=](Buffers& b, bool ref) -> Call {
    float *dp = b.fill(E, 0), *r = b.fill(E, 0), *psum = b.fill(R, 0), *dr = b.uniform(E), *p = b.uniform(E, 0.f, 1.f);
    sum_normalize_forward(r, psum, p, R, S);
    if (ref) return [=] { sum_normalize_backward_ref(dp, dr, p, R, S); };
    return [=] { sum_normalize_backward(dp, dr, r, psum, R, S); };
  });
}

// ---------------------------------------------------------------------------------------------
// The text models' own ops: the embedding with BERT's positions (no segments: those are
// finetuning's), and T5's relative bias (32 buckets up to distance 128, BERT's heads).
void register_text(const Shape& s) {
  const int64_t N = s.N, B = s.B, D = s.D, V = s.K, M = s.M(), H = s.heads;
  // fwd: one add per element, the rows gathered; bwd: two adds per element, the rows scattered.
  add_both("embedding", s, "fwd", 1.0 * M * D, kF * (2 * M * D + N * D + M), [=](Buffers& b, bool ref) -> Call {
    float *x = b.fill(M * D, 0), *table = b.uniform(V * D), *pos = b.uniform(N * D);
    const int32_t* ids = b.ints(M, V);
    if (ref) return [=] { embedding_forward_ref<float>(x, ids, nullptr, table, pos, nullptr, N, B, D); };
    return [=] { embedding_forward<float>(x, ids, nullptr, table, pos, nullptr, N, B, D); };
  });
  add_both("embedding", s, "bwd", 2.0 * M * D, kF * (2 * M * D + N * D + M), [=](Buffers& b, bool ref) -> Call {
    float *dtable = b.fill(V * D, 0), *dpos = b.fill(N * D, 0), *dx = b.uniform(M * D);
    const int32_t* ids = b.ints(M, V);
    if (ref) return [=] { embedding_backward_ref<float>(dtable, dpos, nullptr, dx, ids, nullptr, N, B, D); };
    return [=] { embedding_backward<float>(dtable, dpos, nullptr, dx, ids, nullptr, N, B, D); };
  });
  const int nb = 32;
  std::vector<int32_t> buckets(N * N);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j) buckets[i * N + j] = t5_bucket(int(j - i), nb, 128);
  add_both("rel_bias", s, "fwd", 0.0, kF * (H * N * N + N * N + nb * H), [=](Buffers& b, bool ref) -> Call {
    float *bias = b.fill(H * N * N, 0), *table = b.uniform(nb * H);
    if (ref) return [=] { rel_bias_forward_ref(bias, buckets.data(), table, H, N); };
    return [=] { rel_bias_forward(bias, buckets.data(), table, H, N); };
  });
  add_both("rel_bias", s, "bwd", 1.0 * H * N * N, kF * (H * N * N + N * N + nb * H), [=](Buffers& b, bool ref) -> Call {
    float *dtable = b.fill(nb * H, 0), *dbias = b.uniform(H * N * N);
    if (ref) return [=] { rel_bias_backward_ref(dtable, dbias, buckets.data(), H, N); };
    return [=] { rel_bias_backward(dtable, dbias, buckets.data(), H, N); };
  });
}

// The measured peaks (peak.h) on 1 and 2 threads, GFLOP/s, by instruction: fp32 FMA, AVX512-BF16's
// vdpbf16ps, AMX's tdpbf16ps; 0 where the CPU has none.
enum PeakKind { kFp32, kBf16Dot, kBf16Tiles };
double g_peak[3][3] = {};

// The matrix products under the ops, at the products of the gMLP block's linear layers (fc1 and
// fc2: forward y = x·Wᵀ, input gradient dx = dy·W, weight gradient dW = dyᵀ·x) and of the gating
// unit's per-image token projection (forward g = W·v̂, N×N by N×H; its weight gradient dW = dg·v̂ᵀ,
// summed over H; its input gradient dv̂ = Wᵀ·dg), by each engine: oneDNN's sgemm and gmlp's own
// in f32 (core/gemm.h, as the layers call it through core/matmul.h: a weight gradient's long sum
// split across the threads); in bf16 gmlp's own product (core/gemm.h: AMX's tiles where the CPU
// has them, AVX512-BF16 elsewhere) and oneDNN's matmul primitive (likewise; the operands rounded
// into copies first),
// side by side on the same CPU (set_bf16_engine); bf16_stored is gmlp's own bf16 on operands
// stored as bfloat16, as a layer stores the activations only products read (core/operand.h), and
// bf16_out the same writing C as bfloat16 too, as fc1's forward writes an MLP's hidden layer.
// The gate's products, whose packing is a large share of such small products, also run with
// one operand packed beforehand (gemm::Packed; gemm_packed_a|b, bf16_packed_a|b): what the call
// costs less is that operand's packing, and with both figures the rest is the tile work.
// Names: matmul/SHAPE/PRODUCT/ENGINE/threads:T; FLOP 2·M·N·K, and peak: the share of the measured
// peak of the instructions the product runs on (fp32 FMA, vdpbf16ps, or AMX's tiles where the CPU
// has AMX).
void register_matmul(const Shape& s) {
  struct Product {
    const char* name;
    bool ta, tb;
    int64_t M, N, K;
  };
  const int64_t M = s.M(), D = s.D, F = s.F, N = s.N, H = s.F / 2;
  const Product products[] = {{"fc1_fwd", false, true, M, F, D},     {"fc1_dx", false, false, M, D, F},
                              {"fc1_dw", true, false, F, D, M},      {"fc2_fwd", false, true, M, D, H},
                              {"fc2_dx", false, false, M, H, D},     {"fc2_dw", true, false, D, H, M},
                              {"sgu_image", false, false, N, H, N},  {"sgu_image_dw", false, true, N, N, H},
                              {"sgu_image_dx", true, false, N, H, N}};
  enum Engine {
    onednn,
    gemm,
    gemm_packed_a,
    gemm_packed_b,
    bf16,
    bf16_packed_a,
    bf16_packed_b,
    bf16_stored,
    bf16_out,
    onednn_bf16
  };
  const char* engine_names[] = {"onednn",        "gemm",          "gemm_packed_a", "gemm_packed_b", "bf16",
                                "bf16_packed_a", "bf16_packed_b", "bf16_stored",   "bf16_out",      "onednn_bf16"};
  for (const Product& p : products)
    for (const Engine engine : {onednn, gemm, gemm_packed_a, gemm_packed_b, bf16, bf16_packed_a, bf16_packed_b,
                                bf16_stored, bf16_out, onednn_bf16}) {
      const bool packs_a = engine == gemm_packed_a || engine == bf16_packed_a;
      const bool packs_b = engine == gemm_packed_b || engine == bf16_packed_b;
      const bool gmlp_f32 = engine == gemm || engine == gemm_packed_a || engine == gemm_packed_b;
      const bool gmlp_bf16 = engine == bf16 || engine == bf16_packed_a || engine == bf16_packed_b ||
                             engine == bf16_stored || engine == bf16_out;
      if ((packs_a || packs_b) && std::string_view(p.name).rfind("sgu_image", 0) != 0) continue;
      if (gmlp_f32 && !gemm::available()) continue;
      if (gmlp_bf16 && !gemm::bf16_available()) continue;
      if (engine == onednn_bf16 && !cpu_has_bf16()) continue;
      const char* engine_name = engine_names[engine];
      for (const int threads : {1, 2}) {
        const std::string name = cat("matmul/", s.name, "/", p.name, "/", engine_name, "/threads:", threads);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [=](benchmark::State& st) {
              set_threads(threads);
              Buffers b;
              const float* A = b.uniform(p.M * p.K);
              const float* B = b.uniform(p.K * p.N);
              float* C = b.fill(p.M * p.N, 0);
              const int64_t lda = p.ta ? p.M : p.K, ldb = p.tb ? p.K : p.N;
              // bf16_stored, bf16_out: the operands rounded once, as a layer stores them; operands
              // stored as bfloat16 make the product bf16 in either precision.
              const bool stored = engine == bf16_stored || engine == bf16_out;
              Buffer<uint16_t> A16, B16, C16(engine == bf16_out ? size_t(p.M * p.N) : 0);
              if (stored) {
                A16.resize(size_t(p.M * p.K)), B16.resize(size_t(p.K * p.N));
                gemm::round_to_bf16(A16.data(), A, p.M * p.K);
                gemm::round_to_bf16(B16.data(), B, p.K * p.N);
              }
              const bool bf16_product = gmlp_bf16 || engine == onednn_bf16;
              set_matmul_precision(bf16_product && !stored ? Precision::bf16 : Precision::f32);
              if (bf16_product) set_bf16_engine(engine == onednn_bf16 ? Bf16Engine::onednn : Bf16Engine::gmlp);
              // The one operand packed beforehand, in the format of the product in use.
              std::unique_ptr<gemm::Packed> packed;
              if (packs_a) packed = std::make_unique<gemm::Packed>(gemm::Side::a, bf16_product, p.ta, p.M, p.K, A, lda);
              if (packs_b) packed = std::make_unique<gemm::Packed>(gemm::Side::b, bf16_product, p.tb, p.K, p.N, B, ldb);
              auto call = [&] {
                if (packs_a)
                  gemm::multiply(*packed, p.tb, p.N, B, ldb, false, C, p.N);
                else if (packs_b)
                  gemm::multiply(p.ta, p.M, A, lda, *packed, false, C, p.N);
                else if (stored)
                  matmul<float>(p.ta, p.tb, p.M, p.N, p.K, Operand<float>::bf16(A16.data()), lda,
                                Operand<float>::bf16(B16.data()), ldb, 0.f,
                                engine == bf16_out ? Output<float>::bf16(C16.data()) : Output<float>(C), p.N);
                else if (engine == onednn)
                  dnnl_sgemm(p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', p.M, p.N, p.K, 1.f, A, lda, B, ldb, 0.f, C, p.N);
                else
                  matmul<float>(p.ta, p.tb, p.M, p.N, p.K, A, lda, B, ldb, 0.f, C, p.N);
              };
              call();
              for (auto _ : st) call();
              set_matmul_precision(Precision::f32);
              set_bf16_engine(Bf16Engine::automatic);
              // bf16 runs on AMX's tiles where the CPU has them: oneDNN's always, gmlp's by its kernel.
              const bool tiles =
                  engine == onednn_bf16 ? g_peak[kBf16Tiles][1] > 0 : gemm::bf16_kernel() == gemm::Bf16Kernel::amx;
              const PeakKind kind = !bf16_product ? kFp32 : tiles ? kBf16Tiles : kBf16Dot;
              const double flops = 2.0 * p.M * p.N * p.K, peak = g_peak[kind][threads];
              st.counters["FLOP"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
              if (peak > 0)
                st.counters["peak"] =
                    benchmark::Counter(flops / (peak * 1e9), benchmark::Counter::kIsIterationInvariantRate);
            })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
}

}  // namespace
}  // namespace gmlp

int main(int argc, char** argv) {
  using namespace gmlp;
  // The peaks first, on quiet cores: each instruction's chains for about 0.2 s a run.
  for (const bench::Peak& peak : bench::available_peaks())
    for (const int threads : {1, 2}) {
      const double gflops = peak.measure(threads, 0.2);
      const PeakKind kind = peak.name.find("AMX") != std::string::npos ? kBf16Tiles
                            : peak.name.rfind("bf16", 0) == 0          ? kBf16Dot
                                                                       : kFp32;
      g_peak[kind][threads] = std::max(g_peak[kind][threads], gflops);
      benchmark::AddCustomContext(cat("peak ", peak.name, ", ", threads, " thread", threads > 1 ? "s" : ""),
                                  cat(std::llround(gflops), " GFLOP/s"));
    }
  for (const Shape& s : shapes()) {
    register_heavy(s);
    if (!s.text) register_matmul(s);
    if (s.text)
      register_text(s);
    else
      register_image_kinds(s);
  }
  benchmark::AddCustomContext("gmlp_commit", build_commit());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
