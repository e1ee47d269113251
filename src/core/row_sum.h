// Sums along a row (a LayerNorm's statistics, a bias gradient's row) whose additions do not wait on
// one another. The row is cut into blocks of 64 bytes (16 floats, 8 doubles); block j is added,
// lane by lane, into partial sums g = j mod 4, the lanes past the row's end of a last short block
// counting as zeros; the four are added (0 + 2) + (1 + 3), and the lanes of the result pairwise,
// the upper half onto the lower until one is left. The order depends on the row's length alone, so
// a row's sums have the same bits wherever and on whichever thread it lies.
//
// `omp simd` reductions compiled to one vector of sums, each addition waiting for the one before,
// then a scalar pass over its lanes, one after another: where each row waits for the statistics
// of the one before, as the gate's rows do, a 256-channel row's took 89 ns on a Xeon with AMX,
// and 49 ns with these sums. Floats are summed in registers with AVX-512 (a block is a vector) or
// AVX2 (a block is two, each summed in a pass of its own, so that four partial sums of two terms
// fit AVX2's sixteen registers); doubles, which only the tests' finite differences use, and
// builds for CPUs without AVX2 take portable code that adds in the same order.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#define GMLP_ROW_SUM_SIMD 1
#endif

namespace gmlp {

// out[k] = Σ_c term(c, k) over c < n, in the order above, in code the compiler vectorises over a
// block's lanes. The partial sums live in memory, so this is slower than the vector code below.
template <int K, class T, class Term>
[[gnu::always_inline]] inline void row_sums_portable(int64_t n, T (&out)[K], const Term& term) {
  constexpr int64_t W = 64 / int64_t(sizeof(T));
  alignas(64) T part[4][K][W] = {};
  // The elements [c, c + lanes) of a block, into partial sums g.
  const auto add = [&](int g, int64_t c, int64_t lanes) {
#pragma omp simd
    for (int64_t l = 0; l < lanes; ++l)
#pragma GCC unroll 2
      for (int k = 0; k < K; ++k) part[g][k][l] += term(c + l, k);
  };
  int64_t c = 0;
  for (; c + 4 * W <= n; c += 4 * W) add(0, c, W), add(1, c + W, W), add(2, c + 2 * W, W), add(3, c + 3 * W, W);
  for (int g = 0; c < n; ++g, c += W) add(g, c, n - c < W ? n - c : W);
  for (int k = 0; k < K; ++k) {
    T v[W];
    for (int64_t l = 0; l < W; ++l) v[l] = (part[0][k][l] + part[2][k][l]) + (part[1][k][l] + part[3][k][l]);
    for (int64_t w = W / 2; w >= 1; w /= 2)
      for (int64_t l = 0; l < w; ++l) v[l] += v[l + w];
    out[k] = v[0];
  }
}

#if defined(GMLP_ROW_SUM_SIMD)
// What the vector code needs of an instruction set: a vector of float lanes, a mask of the lanes
// that lie in the row (loads give zeros in the others), and the lanes of a block's partial sums
// added in the order above.
#if defined(__AVX512F__)
struct SimdLanes {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16;
  static Mask first(int64_t n) { return Mask(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1); }
  static Vec load(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec keep(Mask m, Vec v) { return _mm512_maskz_mov_ps(m, v); }  // zero outside m
  // The 16 lanes of a block's sums added pairwise (block[0] holds them all). Shuffles of GCC's
  // vector extension, not the extract intrinsics, whose undefined upper lanes GCC 12 reports as
  // used uninitialised.
  static float sum(const Vec (&block)[1]) {
    typedef float Eight __attribute__((vector_size(32)));
    typedef float Four __attribute__((vector_size(16)));
    const Vec v = block[0];
    const Eight s = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                    __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    const Four r = __builtin_shufflevector(s, s, 0, 1, 2, 3) + __builtin_shufflevector(s, s, 4, 5, 6, 7);
    return (r[0] + r[2]) + (r[1] + r[3]);
  }
};
#else
struct SimdLanes {
  using Vec = __m256;
  using Mask = __m256i;
  static constexpr int64_t kLanes = 8;
  static Mask first(int64_t n) {
    const int lanes = n <= 0 ? 0 : n >= 8 ? 8 : int(n);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Vec load(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec keep(Mask m, Vec v) { return _mm256_and_ps(v, _mm256_castsi256_ps(m)); }
  // A block's 16 lanes as two vectors, its first 8 and its last: the upper half onto the lower is
  // adding the two, then as above.
  static float sum(const Vec (&block)[2]) {
    typedef float Four __attribute__((vector_size(16)));
    const Vec s = _mm256_add_ps(block[0], block[1]);
    const Four r = __builtin_shufflevector(s, s, 0, 1, 2, 3) + __builtin_shufflevector(s, s, 4, 5, 6, 7);
    return (r[0] + r[2]) + (r[1] + r[3]);
  }
};
#endif

// Two vectors of terms, of two sums made in one pass.
struct TermPair {
  SimdLanes::Vec first, second;
};

// out[k] = Σ of the terms of elements c < n: terms(c, m) gives those of the kLanes elements from c
// (a vector, or with K = 2 a TermPair), of which the lanes of m are the row's; the others must be
// zero (masked loads give zeros; SimdLanes::keep zeroes a term that is not). Each vector of a
// block is summed in a pass of its own, into four partial sums that are named registers, not an
// array, which GCC kept on the stack.
template <int K, class Terms>
[[gnu::always_inline]] inline void row_sums_simd(int64_t n, float (&out)[K], const Terms& terms) {
  static_assert(K == 1 || K == 2);
  using V = SimdLanes;
  constexpr int64_t L = V::kLanes, kParts = 16 / L;
  typename V::Vec total[K][kParts];
#pragma GCC unroll 2
  for (int64_t s = 0; s < kParts; ++s) {
    typename V::Vec a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    const auto add = [&](int64_t c, typename V::Mask m, typename V::Vec& a, typename V::Vec& b) {
      if constexpr (K == 1) {
        a = V::add(a, terms(c, m));
      } else {
        const TermPair t = terms(c, m);
        a = V::add(a, t.first), b = V::add(b, t.second);
      }
    };
    const typename V::Mask all = V::first(L);
    int64_t c = s * L;  // this part of block 0
    for (; c + 48 + L <= n; c += 64) {
      add(c, all, a0, b0);
      add(c + 16, all, a1, b1);
      add(c + 32, all, a2, b2);
      add(c + 48, all, a3, b3);
    }
    // The last blocks, fewer than four, the very last maybe short or missing this part.
    if (c < n) add(c, V::first(n - c), a0, b0);
    if (c + 16 < n) add(c + 16, V::first(n - c - 16), a1, b1);
    if (c + 32 < n) add(c + 32, V::first(n - c - 32), a2, b2);
    if (c + 48 < n) add(c + 48, V::first(n - c - 48), a3, b3);
    total[0][s] = V::add(V::add(a0, a2), V::add(a1, a3));
    if constexpr (K == 2) total[1][s] = V::add(V::add(b0, b2), V::add(b1, b3));
  }
  for (int k = 0; k < K; ++k) out[k] = V::sum(total[k]);
}
#endif

// Σ x[c] over c < n.
template <class T>
inline T row_sum(const T* x, int64_t n) {
  T s[1];
#if defined(GMLP_ROW_SUM_SIMD)
  if constexpr (std::is_same_v<T, float>) {
    row_sums_simd<1>(n, s, [&](int64_t c, SimdLanes::Mask m) { return SimdLanes::load(m, x + c); });
    return s[0];
  }
#endif
  row_sums_portable<1>(n, s, [&](int64_t c, int) { return x[c]; });
  return s[0];
}

}  // namespace gmlp
