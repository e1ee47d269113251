#include "ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "ops/softmax.h"

namespace gmlp {

template <class T>
T cross_entropy_forward(T* probs, const T* logits, const int32_t* labels, int64_t B, int64_t K, T smoothing) {
  for (int64_t b = 0; b < B; ++b) GMLP_CHECK(labels[b] >= 0 && labels[b] < K);
  // Rows in parallel (a vocabulary's worth of exps each), summed in row order: the same loss
  // whatever the thread count.
  // Grows to the largest batch seen, by at least 1,024 rows at a time: batches whose size varies
  // from step to step (the masked-token head's chunks) do not allocate again and again.
  thread_local std::vector<double> row_loss;
  if (row_loss.size() < size_t(B)) row_loss.resize(std::max(size_t(B), row_loss.size() + 1024));
  double* rows = row_loss.data();  // this thread's buffer, shared with the team below
  parallel_for_if(B * K > 65536, B, [&](int64_t b) {
    const T* lb = logits + b * K;
    const SoftmaxRow r = softmax_row(probs + b * K, lb, K);
    // -Σ q_k log p_k with log p_k = (l_k - mx) - lse
    const double nll = r.lse - (double(lb[labels[b]]) - r.max);
    const double smooth = r.lse - r.sum_shift / double(K);
    rows[b] = (1.0 - smoothing) * nll + smoothing * smooth;
  });
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
