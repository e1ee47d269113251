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
// and 49 ns with these sums. With AVX-512 the four partial sums are four registers; elsewhere
// (and for doubles, which only the tests' finite differences use) scalar code adds in the same
// order.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace gmlp {

// out[k] = Σ_c term(c, k) over c < n, in the order above, in scalar code.
template <int K, class T, class Term>
inline void row_sums_scalar(int64_t n, T (&out)[K], const Term& term) {
  constexpr int64_t W = 64 / int64_t(sizeof(T));
  T part[K][4][W] = {};
  for (int64_t c = 0; c < n; ++c)
    for (int k = 0; k < K; ++k) part[k][(c / W) % 4][c % W] += term(c, k);
  for (int k = 0; k < K; ++k) {
    T v[W];
    for (int64_t l = 0; l < W; ++l) v[l] = (part[k][0][l] + part[k][2][l]) + (part[k][1][l] + part[k][3][l]);
    for (int64_t w = W / 2; w >= 1; w /= 2)
      for (int64_t l = 0; l < w; ++l) v[l] += v[l + w];
    out[k] = v[0];
  }
}

#if defined(__AVX512F__)
// The lanes of v added in the order above. (Shuffles of GCC's vector extension, not the extract
// intrinsics, whose undefined upper lanes GCC 12 reports as used uninitialised.)
[[gnu::always_inline]] inline float sum_lanes(__m512 v) {
  typedef float Eight __attribute__((vector_size(32)));
  typedef float Four __attribute__((vector_size(16)));
  const Eight s = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                  __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Four r = __builtin_shufflevector(s, s, 0, 1, 2, 3) + __builtin_shufflevector(s, s, 4, 5, 6, 7);
  return (r[0] + r[2]) + (r[1] + r[3]);
}

// Two vectors of terms, of two sums made in one pass.
struct TermPair {
  __m512 first, second;
};

// out[k] = Σ of the terms of elements c < n: terms(c, m) gives those of elements [c, c + 16) (a
// vector, or with K = 2 a TermPair), of which the lanes of m are the row's; the others must be
// zero (masked loads give zeros). The partial sums are named registers, not an array, which GCC
// kept on the stack.
template <int K, class Terms>
[[gnu::always_inline]] inline void row_sums_avx512(int64_t n, float (&out)[K], const Terms& terms) {
  static_assert(K == 1 || K == 2);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const auto add = [&](int64_t c, __mmask16 m, __m512& a, __m512& b) {
    if constexpr (K == 1) {
      a = _mm512_add_ps(a, terms(c, m));
    } else {
      const TermPair t = terms(c, m);
      a = _mm512_add_ps(a, t.first), b = _mm512_add_ps(b, t.second);
    }
  };
  const auto lanes = [](int64_t left) { return __mmask16(left >= 16 ? 0xffff : (1u << left) - 1); };
  int64_t c = 0;
  for (; c + 64 <= n; c += 64) {
    add(c, 0xffff, a0, b0);
    add(c + 16, 0xffff, a1, b1);
    add(c + 32, 0xffff, a2, b2);
    add(c + 48, 0xffff, a3, b3);
  }
  // The last blocks, fewer than four, the very last maybe short.
  if (c < n) add(c, lanes(n - c), a0, b0);
  if (c + 16 < n) add(c + 16, lanes(n - c - 16), a1, b1);
  if (c + 32 < n) add(c + 32, lanes(n - c - 32), a2, b2);
  if (c + 48 < n) add(c + 48, lanes(n - c - 48), a3, b3);
  out[0] = sum_lanes(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
  if constexpr (K == 2) out[1] = sum_lanes(_mm512_add_ps(_mm512_add_ps(b0, b2), _mm512_add_ps(b1, b3)));
}
#endif

// Σ x[c] over c < n.
template <class T>
inline T row_sum(const T* x, int64_t n) {
  T s[1];
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    row_sums_avx512<1>(n, s, [&](int64_t c, __mmask16 m) { return _mm512_maskz_loadu_ps(m, x + c); });
    return s[0];
  }
#endif
  row_sums_scalar<1>(n, s, [&](int64_t c, int) { return x[c]; });
  return s[0];
}

}  // namespace gmlp
