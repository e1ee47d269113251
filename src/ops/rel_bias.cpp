#include "ops/rel_bias.h"

#include <algorithm>

namespace gmlp {

template <class T>
void rel_bias_forward(T* bias, const int32_t* buckets, const T* table, int64_t heads, int64_t N) {
  const int64_t NN = N * N;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t e = 0; e < NN; ++e) bias[h * NN + e] = table[int64_t(buckets[e]) * heads + h];
}

template <class T>
void rel_bias_backward(T* dtable, const T* dbias, const int32_t* buckets, int64_t heads, int64_t N) {
  // fwd: bias[h, e] = table[buckets[e], h]  =>  dtable[buckets[e], h] += dbias[h, e]
  // Head h writes column h of the table only, so heads run in parallel; each entry adds its
  // pairs in order for any thread count.
  const int64_t NN = N * N;
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t e = 0; e < NN; ++e) dtable[int64_t(buckets[e]) * heads + h] += dbias[h * NN + e];
}

template <class T>
void rel_bias_forward_ref(T* bias, const int32_t* buckets, const T* table, int64_t heads, int64_t N) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < N; ++j) bias[(h * N + i) * N + j] = table[int64_t(buckets[i * N + j]) * heads + h];
}

template <class T>
void rel_bias_backward_ref(T* dtable, const T* dbias, const int32_t* buckets, int64_t heads, int64_t N) {
  const int64_t NN = N * N, rows = NN ? 1 + *std::max_element(buckets, buckets + NN) : 0;
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t h = 0; h < heads; ++h) {
      double acc = 0;
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < N; ++j)
          if (buckets[i * N + j] == k) acc += double(dbias[(h * N + i) * N + j]);
      dtable[k * heads + h] += T(acc);
    }
}

#define GMLP_INSTANTIATE(T)                                                              \
  template void rel_bias_forward<T>(T*, const int32_t*, const T*, int64_t, int64_t);     \
  template void rel_bias_backward<T>(T*, const T*, const int32_t*, int64_t, int64_t);    \
  template void rel_bias_forward_ref<T>(T*, const int32_t*, const T*, int64_t, int64_t); \
  template void rel_bias_backward_ref<T>(T*, const T*, const int32_t*, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
