#include "ops/soft_cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/softmax.h"

namespace gmlp {

template <class T>
T soft_cross_entropy_forward(T* probs, const T* logits, const T* targets, int64_t B, int64_t K) {
  GMLP_CHECK(B > 0 && K > 0);
  double total = 0;
  for (int64_t b = 0; b < B; ++b) {
    const T* lb = logits + b * K;
    const T* tb = targets + b * K;
    const SoftmaxRow r = softmax_row(probs + b * K, lb, K);
    // -Σ t_k log p_k with log p_k = (l_k - mx) - lse
    double row = 0;
    for (int64_t k = 0; k < K; ++k) row += double(tb[k]) * (r.lse - (double(lb[k]) - r.max));
    total += row;
  }
  return T(total / double(B));
}

template <class T>
void soft_cross_entropy_backward(T* dlogits, const T* probs, const T* targets, int64_t B, int64_t K) {
  // fwd: loss = mean_b -Σ t log softmax(l)  =>  dl = (p·Σt - t) / B = (p - t) / B for Σt = 1
  const T inv = T(1) / T(B);
  for (int64_t i = 0; i < B * K; ++i) dlogits[i] = (probs[i] - targets[i]) * inv;
}

template <class T>
void smooth_one_hot(T* targets, const int32_t* labels, int64_t B, int64_t K, T smoothing) {
  const T off = smoothing / T(K), on = T(1) - smoothing + off;
  for (int64_t b = 0; b < B; ++b) {
    GMLP_CHECK(labels[b] >= 0 && labels[b] < K);
    std::fill(targets + b * K, targets + (b + 1) * K, off);
    targets[b * K + labels[b]] = on;
  }
}

template float soft_cross_entropy_forward<float>(float*, const float*, const float*, int64_t, int64_t);
template double soft_cross_entropy_forward<double>(double*, const double*, const double*, int64_t, int64_t);
template void soft_cross_entropy_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void soft_cross_entropy_backward<double>(double*, const double*, const double*, int64_t, int64_t);
template void smooth_one_hot<float>(float*, const int32_t*, int64_t, int64_t, float);
template void smooth_one_hot<double>(double*, const int32_t*, int64_t, int64_t, double);

}  // namespace gmlp
