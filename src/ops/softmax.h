// One row's softmax, shared by the cross-entropies (hard labels, soft targets) so that they give
// the same probabilities bit for bit. Vectorised exp for float (core/fast_math.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/fast_math.h"

namespace gmlp {

struct SoftmaxRow {
  double lse;        // log Σ exp(l - max)
  double sum_shift;  // Σ (l - max), for label smoothing
  double max;
};

// p (K) = softmax(l (K)).
template <class T>
SoftmaxRow softmax_row(T* p, const T* l, int64_t K) {
  const T mx = *std::max_element(l, l + K);
  double sum = 0, sum_shift = 0;
#pragma omp simd reduction(+ : sum, sum_shift)
  for (int64_t k = 0; k < K; ++k) {
    p[k] = exp_nonpositive(l[k] - mx);
    sum += p[k];
    sum_shift += l[k] - mx;
  }
  const T inv = T(1.0 / sum);
#pragma omp simd
  for (int64_t k = 0; k < K; ++k) p[k] *= inv;
  return {std::log(sum), sum_shift, double(mx)};
}

}  // namespace gmlp
