#include "ops/sgu.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "core/matmul.h"
#include "core/row_sum.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"

namespace gmlp {

SguGate parse_sgu_gate(const char* name) {
  for (auto [n, g] : {std::pair{"split", SguGate::split},
                      {"multiplicative", SguGate::multiplicative},
                      {"additive", SguGate::additive},
                      {"linear", SguGate::linear}})
    if (std::strcmp(name, n) == 0) return g;
  fail("unknown gate '", name, "': expected split, multiplicative, additive or linear");
}

namespace {
// Where v (the normalised, token-mixed part) starts in each row of z, and the gate's use of u.
int64_t v_offset(const SguShape& s) { return s.gate == SguGate::split ? s.F / 2 : 0; }

// Whether the images of a batch go to the threads, one image per tile; with fewer images than
// threads they run one after the other instead, and the work inside a tile is what is shared.
bool by_image(int64_t B) {
  const int threads = omp_get_max_threads();
  return B >= threads && threads > 1 && !omp_in_parallel();
}

// Runs tile(b, t) for every image b, t being the thread that runs it: spread over the threads
// (by_image) or all on this one.
template <class Tile>
void for_each_image(bool spread, int64_t B, const Tile& tile) {
  if (spread) {
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < B; ++b) tile(b, omp_get_thread_num());
  } else {
    for (int64_t b = 0; b < B; ++b) tile(b, 0);
  }
}

// Per-thread working memory in one block owned by the calling thread, which grows it once, on
// first use: the same list of arrays for each thread, each array rounded up to a cache line so
// that no two threads write one line. at(t, i) is thread t's i-th array.
template <class T>
class ThreadScratch {
 public:
  ThreadScratch(std::initializer_list<int64_t> sizes, int threads) {
    GMLP_CHECK(sizes.size() <= offset_.size());
    size_t i = 0;
    for (int64_t n : sizes) offset_[i++] = per_thread_, per_thread_ += (n + 15) / 16 * 16;
    thread_local std::vector<T> block;
    if (block.size() < size_t(threads * per_thread_)) block.resize(size_t(threads * per_thread_));
    base_ = block.data();
  }
  T* at(int t, int i) const { return base_ + t * per_thread_ + offset_[size_t(i)]; }
  // Zeroes thread t's arrays from the i-th on.
  void zero_from(int t, int i) const { std::fill(at(t, i), base_ + (t + 1) * per_thread_, T(0)); }

 private:
  std::array<int64_t, 12> offset_{};
  int64_t per_thread_ = 0;
  T* base_;
};

// Asks for the cache lines of p[0, n) ahead of use. An image's rows of the token-major (N, B, ·)
// activations lie B rows apart: with a power-of-two batch and width they map onto the same few
// cache sets, the hardware's prefetchers (which follow a stream within a page) do not reach from
// one row to the next, and each row's lines arrived at full memory latency.
template <class T>
inline void prefetch(const T* p, int64_t n, bool write = false) {
  const char* c = reinterpret_cast<const char*>(p);
  const int64_t bytes = n * int64_t(sizeof(T));
  // An if, not ?: between the two void builtins, which crashes clang 14's instruction selection at -O0.
  for (int64_t i = 0; i < bytes; i += 64) {
    if (write)
      __builtin_prefetch(c + i, 1, 3);
    else
      __builtin_prefetch(c + i, 0, 3);
  }
}
constexpr int64_t kAhead = 2;  // rows ahead

// GELU of z's elements [i, i + n) (fc1's output before GELU, SguShape::gelu) into a, and GELU's
// slope there into slope when given. With z16 (SguBf16::z) z's elements are bfloat16, widened
// into a first.
template <class T>
void gelu_of_z(T* a, T* slope, const T* z, bool z16, int64_t i, int64_t n) {
  const T* x = z + i;
  if constexpr (std::is_same_v<T, float>) {
    if (z16) {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(z) + i;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) a[c] = bf16_to_float(h[c]);
      x = a;
    }
  } else {
    GMLP_CHECK(!z16);
  }
  gelu_forward_serial(a, x, n, slope);
}

// Holds the gate's W constant for a call of sgu_forward or sgu_backward, whose products multiply
// every image by it: packed once a call, not once an image (core/matmul.h's ConstantForCall).
// double's products pack nothing.
template <class T>
struct WeightForCall {
  WeightForCall(const T*, const T*) {}
};
template <>
struct WeightForCall<float> : ConstantForCall {
  using ConstantForCall::ConstantForCall;
};

// The gate on a row: g's final value, v = g + bias (g: the token product's sum, with aMLP's res
// added), is kept at gs (g's own row, or its bfloat16 copy), and out made from it.
template <class T, class G>
void gate_row_forward(SguGate gate, T* __restrict out, const T* __restrict u, const T* g, G* gs, T bias, int64_t H) {
  // combine(u, v): the output of one channel.
  const auto row = [&](auto combine) {
#pragma omp simd
    for (int64_t h = 0; h < H; ++h) {
      const T v = g[h] + bias;
      if constexpr (std::is_same_v<G, uint16_t>)
        gs[h] = float_to_bf16(v);
      else
        gs[h] = v;
      out[h] = combine(u[h], v);
    }
  };
  switch (gate) {
    case SguGate::split:
    case SguGate::multiplicative: return row([](T uh, T v) { return uh * v; });
    case SguGate::additive: return row([](T uh, T v) { return uh + v; });
    case SguGate::linear: return row([](T, T v) { return v; });
  }
}

// The multiplicative gate's backward on a row: du = dout·g, dg = dout·u, with g's row as T or as
// bfloat16 (saved so in bf16 precision).
template <class T, class G>
void gate_row_backward(T* __restrict du, T* __restrict dg, const T* __restrict dout, const G* __restrict g,
                       const T* __restrict u, int64_t H) {
  const auto at = [&](int64_t h) {
    if constexpr (std::is_same_v<G, uint16_t>)
      return bf16_to_float(g[h]);
    else
      return g[h];
  };
#pragma omp simd
  for (int64_t h = 0; h < H; ++h) {
    du[h] = dout[h] * at(h);
    dg[h] = dout[h] * u[h];
  }
}
}  // namespace

// Both passes run image by image: an image's N × H tiles of v̂, g and their gradients stay in
// the core's cache from the LayerNorm through the token product to the gate, where the whole
// batch at once streamed every (N, B, H) array through memory between each of those steps.
template <class T>
void sgu_forward(T* out, T* mean, T* rstd, T* g, const T* z, const T* gamma, const T* beta, const T* W, const T* b,
                 SguShape s, T eps, const T* res, SguBf16 bf16) {
  const int64_t N = s.N, B = s.B, H = s.H(), F = s.F, off = v_offset(s);
  const SguGate gate = s.gate;
  const bool save = mean != nullptr;
  GMLP_CHECK((std::is_same_v<T, float> || !(bf16.stored || bf16.g || bf16.z)));
  GMLP_CHECK(!bf16.z || s.gelu);
  const WeightForCall<T> held(W, W + N * N);
  // v̂, and what is not saved (all of it in inference, g saved as bf16), live in per-thread tiles
  // that stay in cache. With bf16, each output row is made in a row of floats, then rounded.
  enum { kVn, kG, kMean, kRstd, kRow, kAct };
  const int threads = omp_get_max_threads();
  const ThreadScratch<T> sc({N * H, N * H, N, N, H, s.gelu ? F : 0}, threads);
  // Columns [c, c + n) of z's row r as the gate reads them: as they lie, or with s.gelu their GELU,
  // made in thread t's row.
  const auto zrow = [&](int64_t r, int64_t c, int64_t n, int t) -> const T* {
    if (!s.gelu) return z + r * F + c;
    T* a = sc.at(t, kAct) + c;
    gelu_of_z(a, static_cast<T*>(nullptr), z, bf16.z, r * F + c, n);
    return a;
  };
  // z's elements from i on, stored alike, and how many T the bytes of n of them fill: to prefetch.
  const auto z_at = [&](int64_t i) { return element(z, i, bf16.z); };
  const auto z_span = [&](int64_t n) { return bf16.z ? (n + 1) / 2 : n; };
  // Image img's row statistics: the saved ones, or thread t's scratch.
  const auto stats = [&](int64_t img, int t) {
    return save ? std::pair{mean + img * N, rstd + img * N} : std::pair{sc.at(t, kMean), sc.at(t, kRstd)};
  };
  // Image img's gate on its channels [h0, h1), on thread t: all of them, or the thread's share
  // where the threads split one image (below). With `shared`, the statistics are made beforehand,
  // in thread 0's scratch where they are not saved, and the thread normalises only its channels;
  // else it makes them as it normalises whole rows.
  const auto image = [&](int64_t img, int t, int64_t h0, int64_t h1, bool shared) {
    const int64_t w = h1 - h0;
    T* vi = sc.at(t, kVn);
    T* gi = save && !bf16.g ? g + img * N * H : sc.at(t, kG);
    const auto [mi, ri] = stats(img, shared ? 0 : t);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = n * B + img;  // its row in the token-major activations
      if (n + kAhead < N) prefetch(z_at((r + kAhead * B) * F + off + h0), z_span(w));
      T* vn = vi + n * H + h0;
      if (shared)
        layernorm_row_apply(vn, zrow(r, off + h0, w, t), mi[n], ri[n], gamma + h0, beta + h0, w);
      else
        layernorm_row(vn, mi + n, ri + n, zrow(r, off, H, t), gamma, beta, H, eps);
      if (s.pad && s.pad[img * N + n]) std::fill(vn, vn + w, T(0));  // read by no token
    }
    matmul<T>(false, false, N, w, N, W, N, vi + h0, H, T(0), gi + h0, H);  // g = W·v̂
    T* orow = sc.at(t, kRow);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = n * B + img;
      if (n + kAhead < N) {
        const int64_t ahead = (r + kAhead * B) * H + h0;
        prefetch(z_at((r + kAhead * B) * F + h0), z_span(w));
        prefetch(element(out, ahead, bf16.stored), w / (bf16.stored ? 2 : 1), true);
        if (res) prefetch(res + ahead, w);
      }
      const T bias = b[n];
      T* gr = gi + n * H + h0;
      const T* ur = zrow(r, h0, w, t);
      T* o = bf16.stored ? orow : out + r * H + h0;
      if (res) {
        const T* rr = res + r * H + h0;
#pragma omp simd
        for (int64_t h = 0; h < w; ++h) gr[h] += rr[h];
      }
      if (save && bf16.g)
        gate_row_forward(gate, o, ur, gr, reinterpret_cast<uint16_t*>(element(g, (img * N + n) * H + h0, true)), bias,
                         w);
      else
        gate_row_forward(gate, o, ur, gr, gr, bias, w);
      if (bf16.stored) store_bf16(element(out, r * H + h0, true), o, w);
    }
  };
  if (by_image(B)) return for_each_image(true, B, [&](int64_t img, int t) { image(img, t, 0, H, false); });
  if (threads == 1 || omp_in_parallel())
    return for_each_image(false, B, [&](int64_t img, int) { image(img, 0, 0, H, false); });
  // Fewer images than threads (inference's latency at batch 1): the threads split each image's
  // channels, in multiples of 32 so that no two write one cache line. Splitting its rows instead
  // handed each row of v̂ and g from one core to the other between the LayerNorm, the product and
  // the gate, and ran slower than one thread. What they share is each row's two statistics,
  // which the threads make for their shares of the rows first (thread 0's scratch, or the saved
  // mean and rstd), so that no thread makes all of them.
  for (int64_t img = 0; img < B; ++img) {
    T *mi, *ri;  // plain pointers: the parallel region below cannot name a structured binding
    std::tie(mi, ri) = stats(img, 0);
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      for (int64_t n = N * t / nt; n < N * (t + 1) / nt; ++n)
        layernorm_row_stats(mi + n, ri + n, zrow(n * B + img, off, H, t), H, eps);
      const int64_t units = (H + 31) / 32;
      const int64_t h0 = std::min(H, units * t / nt * 32), h1 = std::min(H, units * (t + 1) / nt * 32);
#pragma omp barrier
      if (h0 < h1) image(img, t, h0, h1, true);
    }
  }
}

template <class T>
void sgu_backward(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z, const T* mean, const T* rstd,
                  const T* g, const T* gamma, const T* beta, const T* W, SguShape s, T* dres, SguBf16 bf16,
                  const SguGelu<T>* gelu) {
  const int64_t N = s.N, B = s.B, H = s.H(), F = s.F, off = v_offset(s);
  const SguGate gate = s.gate;
  const int threads = omp_get_max_threads();
  const SguGelu<T> act = gelu ? *gelu : SguGelu<T>{};
  GMLP_CHECK((!act.d16 || ((act.slope || s.gelu) && std::is_same_v<T, float>)));
  GMLP_CHECK(!(s.gelu && act.slope));  // the slope is made again here, not read
  GMLP_CHECK((!bf16.z || (s.gelu && std::is_same_v<T, float>)));
  const WeightForCall<T> held(W, W + N * N);
  // With dz's rows stored as bf16 (act.d16), the float rows are made in a per-thread tile first.
  const bool dz_tile = act.d16 != nullptr;
  // Per thread: the dg and dv̂ tiles, the image's dz rows (dz_tile), its v̂ made again, with s.gelu
  // the image's GELU(v) and GELU's slope (made once, in the first pass, for both) and a row of
  // GELU(u), then partial sums of dW, db, dgamma, dbeta and GELU's bias gradient.
  enum { kDg, kDvn, kDz, kVn, kV, kSlope, kU, kDW, kDb, kDgamma, kDbeta, kDbias };
  const ThreadScratch<T> sc({N * H, N * H, dz_tile ? N * F : 0, N * H, s.gelu ? N * H : 0, s.gelu ? N * F : 0,
                             s.gelu ? off : 0, N * N, N, H, H, act.dbias ? F : 0},
                            threads);
  for (int t = 0; t < threads; ++t) sc.zero_from(t, kDW);
  for_each_image(by_image(B), B, [&](int64_t img, int t) {
    T* vi = sc.at(t, kVn);
    const T* gi = element(g, img * N * H, bf16.g);
    // ∂L/∂g of this image: aMLP's attention reads it too, so then it is written there directly.
    T* dg = dres ? dres + img * H : sc.at(t, kDg);
    const int64_t ldg = dres ? B * H : H;
    T* dWt = sc.at(t, kDW);
    T* dbt = sc.at(t, kDb);
    // Token n's row of dz as it is made: in dz, or in the thread's tile.
    auto dz_row = [&](int64_t n) { return dz_tile ? sc.at(t, kDz) + n * F : dz + (n * B + img) * F; };
    // fwd: out = u ⊙ g  =>  du = dout·g, dg = dout·u;   out = u + g  =>  du = dg = dout;
    //      out = g  =>  du = 0, dg = dout.  (u is z's first H channels.) The row of v̂ is made
    //      again on the way, from the row of z this loop reads anyway.
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = n * B + img;
      if (n + kAhead < N) {
        prefetch(dout + (r + kAhead * B) * H, H);
        prefetch(element(z, (r + kAhead * B) * F, bf16.z), bf16.z ? F / 2 : F);
        if (!dz_tile) prefetch(dz + (r + kAhead * B) * F, H, true);
      }
      // u and v as the forward's gate read them: z's row, or with s.gelu their GELU (and its slope
      // kept for the second pass).
      const T* ur = z + r * F;
      const T* vr = ur + off;
      if (s.gelu) {
        T* v = sc.at(t, kV) + n * H;
        T* slope = sc.at(t, kSlope) + n * F;
        gelu_of_z(v, slope + off, z, bf16.z, r * F + off, H);
        if (off > 0) gelu_of_z(sc.at(t, kU), slope, z, bf16.z, r * F, off);
        vr = v, ur = off > 0 ? sc.at(t, kU) : v;
      }
      layernorm_row_apply(vi + n * H, vr, mean[img * N + n], rstd[img * N + n], gamma, beta, H);
      if (s.pad && s.pad[img * N + n]) std::fill(vi + n * H, vi + (n + 1) * H, T(0));  // as the forward's
      T* dzr = dz_row(n);
      T* dgr = dg + n * ldg;
      const T* dor = dout + r * H;
      const T* gr = element(gi, n * H, bf16.g);
      switch (gate) {
        case SguGate::split:
        case SguGate::multiplicative:
          if (bf16.g)
            gate_row_backward(dzr, dgr, dor, reinterpret_cast<const uint16_t*>(gr), ur, H);
          else
            gate_row_backward(dzr, dgr, dor, gr, ur, H);
          break;
        case SguGate::additive:
#pragma omp simd
          for (int64_t h = 0; h < H; ++h) dzr[h] = dgr[h] = dor[h];
          break;
        case SguGate::linear:
#pragma omp simd
          for (int64_t h = 0; h < H; ++h) {
            dzr[h] = 0;
            dgr[h] = dor[h];
          }
          break;
      }
      // fwd: g = W·v̂ + b  =>  db[n] += Σ_h dg[n];  dW += dg·v̂ᵀ;  dv̂ = Wᵀ·dg
      dbt[n] += row_sum(dgr, H);
    }
    matmul<T>(false, true, N, N, H, dg, ldg, vi, H, T(1), dWt, N);
    T* dvn = sc.at(t, kDvn);
    matmul<T>(true, false, N, H, N, W, N, dg, ldg, T(0), dvn, H);
    // fwd: v̂ = LayerNorm(v). With the split, v is z's second half (a fresh gradient); otherwise
    // v is all of z and its gradient adds to u's.
    // Then each row of dz is final: GELU's backward on it, when asked for.
    for (int64_t n = 0; n < N; ++n) {
      const int64_t r = n * B + img;
      if (n + kAhead < N) {
        const int64_t ahead = (r + kAhead * B) * F;
        if (!s.gelu) prefetch(z + ahead + off, H);  // with s.gelu, v is in the thread's tile
        if (!dz_tile) prefetch(dz + ahead, F, true);
        if (act.slope) prefetch(element(act.slope, ahead, act.slope_bf16), act.slope_bf16 ? F / 2 : F);
        if (act.d16) prefetch(act.d16 + ahead, F, true);
      }
      if (s.pad && s.pad[img * N + n]) std::fill(dvn + n * H, dvn + (n + 1) * H, T(0));  // v̂ was zeroed
      T* dzr = dz_row(n);
      // v as the gate read it, and GELU's slope: fc1's forward saved it, or with s.gelu the first
      // pass made both (the same bits as the forward's).
      const T* vr = s.gelu ? sc.at(t, kV) + n * H : z + r * F + off;
      const T* slope = s.gelu      ? sc.at(t, kSlope) + n * F
                       : act.slope ? element(act.slope, r * F, act.slope_bf16)
                                   : nullptr;
      layernorm_row_backward(dzr + off, sc.at(t, kDgamma), sc.at(t, kDbeta), dvn + n * H, vr, mean[img * N + n],
                             rstd[img * N + n], gamma, H,
                             gate == SguGate::split ? Write::overwrite : Write::accumulate);
      if (slope)
        gelu_backward_by_slope_row(dzr, slope, F, act.dbias ? sc.at(t, kDbias) : nullptr,
                                   act.d16 ? act.d16 + r * F : nullptr, act.slope_bf16 && !s.gelu);
    }
  });
  // The threads' partial sums, added in thread order: the same bits for the same thread count.
  for (int t = 0; t < threads; ++t) {
    for (int64_t i = 0; i < N * N; ++i) dW[i] += sc.at(t, kDW)[i];
    for (int64_t n = 0; n < N; ++n) db[n] += sc.at(t, kDb)[n];
    for (int64_t h = 0; h < H; ++h) dgamma[h] += sc.at(t, kDgamma)[h], dbeta[h] += sc.at(t, kDbeta)[h];
    for (int64_t f = 0; act.dbias && f < F; ++f) act.dbias[f] += sc.at(t, kDbias)[f];
  }
}

namespace {
// The reference's gate value and how it combines with u, one element at a time.
template <class T>
double ref_gate(const T* W, const T* b, const std::vector<T>& vn, const T* res, SguShape s, int64_t n, int64_t bb,
                int64_t h) {
  const int64_t H = s.H();
  double gate = b[n];
  for (int64_t m = 0; m < s.N; ++m) gate += double(W[n * s.N + m]) * vn[(m * s.B + bb) * H + h];
  if (res) gate += res[(n * s.B + bb) * H + h];
  return gate;
}

// Zeroes the (N, B, H) rows of padding tokens.
template <class T>
void zero_pads(std::vector<T>& x, SguShape s) {
  const int64_t H = s.H();
  for (int64_t n = 0; n < s.N && s.pad; ++n)
    for (int64_t bb = 0; bb < s.B; ++bb)
      if (s.pad[bb * s.N + n]) std::fill(x.begin() + (n * s.B + bb) * H, x.begin() + (n * s.B + bb + 1) * H, T(0));
}
}  // namespace

template <class T>
void sgu_forward_ref(T* out, const T* z, const T* gamma, const T* beta, const T* W, const T* b, SguShape s, T eps,
                     const T* res) {
  if (s.gelu) {  // the gate on GELU's output
    std::vector<T> a(size_t(s.rows() * s.F));
    gelu_forward_ref(a.data(), z, s.rows() * s.F);
    s.gelu = false;
    return sgu_forward_ref(out, a.data(), gamma, beta, W, b, s, eps, res);
  }
  const int64_t H = s.H(), M = s.rows();
  std::vector<T> vn(M * H), mean(M), rstd(M);
  layernorm_forward_ref(vn.data(), H, mean.data(), rstd.data(), z + v_offset(s), s.F, gamma, beta, M, H, eps);
  zero_pads(vn, s);
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t bb = 0; bb < s.B; ++bb)
      for (int64_t h = 0; h < H; ++h) {
        const double gate = ref_gate(W, b, vn, res, s, n, bb, h);
        const double u = z[(n * s.B + bb) * s.F + h];
        double o = gate;
        if (s.gate == SguGate::split || s.gate == SguGate::multiplicative) o = u * gate;
        if (s.gate == SguGate::additive) o = u + gate;
        out[(n * s.B + bb) * H + h] = T(o);
      }
}

template <class T>
void sgu_backward_ref(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z, const T* gamma,
                      const T* beta, const T* W, const T* b, SguShape s, T eps, const T* res, T* dres) {
  if (s.gelu) {  // the gate's backward on GELU's output, then GELU's
    const int64_t n = s.rows() * s.F;
    std::vector<T> a(static_cast<size_t>(n)), da(static_cast<size_t>(n));
    gelu_forward_ref(a.data(), z, n);
    s.gelu = false;
    sgu_backward_ref(da.data(), dgamma, dbeta, dW, db, dout, a.data(), gamma, beta, W, b, s, eps, res, dres);
    std::fill(dz, dz + n, T(0));
    return gelu_backward_ref(dz, da.data(), z, n);
  }
  const int64_t H = s.H(), M = s.rows(), N = s.N, B = s.B, F = s.F;
  std::vector<T> vn(M * H), mean(M), rstd(M), dvn(M * H, T(0));
  layernorm_forward_ref(vn.data(), H, mean.data(), rstd.data(), z + v_offset(s), F, gamma, beta, M, H, eps);
  zero_pads(vn, s);
  for (int64_t i = 0; i < M * F; ++i) dz[i] = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t r = n * B + bb;
        const double gate = ref_gate(W, b, vn, res, s, n, bb, h);
        const double d = dout[r * H + h], u = z[r * F + h];
        double du = 0, dgate = d;
        if (s.gate == SguGate::split || s.gate == SguGate::multiplicative) du = d * gate, dgate = d * u;
        if (s.gate == SguGate::additive) du = d;
        dz[r * F + h] += T(du);
        if (dres) dres[r * H + h] = T(dgate);
        db[n] += T(dgate);
        for (int64_t m = 0; m < N; ++m) {
          dW[n * N + m] += T(dgate * vn[(m * B + bb) * H + h]);
          dvn[(m * B + bb) * H + h] += T(dgate * W[n * N + m]);
        }
      }
  zero_pads(dvn, s);
  layernorm_backward_ref(dz + v_offset(s), F, dgamma, dbeta, dvn.data(), H, z + v_offset(s), F, mean.data(),
                         rstd.data(), gamma, M, H);
}

#define GMLP_INSTANTIATE(T)                                                                                         \
  template void sgu_forward<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*, SguShape, T,       \
                               const T*, SguBf16);                                                                  \
  template void sgu_backward<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*,     \
                                const T*, const T*, SguShape, T*, SguBf16, const SguGelu<T>*);                      \
  template void sgu_forward_ref<T>(T*, const T*, const T*, const T*, const T*, const T*, SguShape, T, const T*);    \
  template void sgu_backward_ref<T>(T*, T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*, \
                                    SguShape, T, const T*, T*);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
