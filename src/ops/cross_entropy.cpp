#include "ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/softmax.h"

namespace gmlp {

template <class T>
T cross_entropy_forward(T* probs, const T* logits, const int32_t* labels, int64_t B, int64_t K, T smoothing) {
  for (int64_t b = 0; b < B; ++b) GMLP_CHECK(labels[b] >= 0 && labels[b] < K);
  // Rows in parallel (a vocabulary's worth of exps each), summed in row order: the same loss
  // whatever the thread count.
  thread_local std::vector<double> row_loss;  // grows once: no allocation per step
  row_loss.resize(size_t(B));
  double* rows = row_loss.data();  // this thread's buffer, shared with the team below
#pragma omp parallel for schedule(static) if (B * K > 65536)
  for (int64_t b = 0; b < B; ++b) {
    const T* lb = logits + b * K;
    const SoftmaxRow r = softmax_row(probs + b * K, lb, K);
    // -Σ q_k log p_k with log p_k = (l_k - mx) - lse
    const double nll = r.lse - (double(lb[labels[b]]) - r.max);
    const double smooth = r.lse - r.sum_shift / double(K);
    rows[b] = (1.0 - smoothing) * nll + smoothing * smooth;
  }
  double total = 0;
  for (int64_t b = 0; b < B; ++b) total += rows[b];
  return T(total / double(B));
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const int32_t* labels, int64_t B, int64_t K, T smoothing) {
  // fwd: loss = mean_b -Σ q log softmax(l)  =>  dl = (p - q) / B
  const T off = smoothing / T(K), on = T(1) - smoothing + off, inv = T(1) / T(B);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < K; ++k) dlogits[b * K + k] = (probs[b * K + k] - (k == labels[b] ? on : off)) * inv;
}

template float cross_entropy_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t, float);
template double cross_entropy_forward<double>(double*, const double*, const int32_t*, int64_t, int64_t, double);
template void cross_entropy_backward<float>(float*, const float*, const int32_t*, int64_t, int64_t, float);
template void cross_entropy_backward<double>(double*, const double*, const int32_t*, int64_t, int64_t, double);

}  // namespace gmlp
