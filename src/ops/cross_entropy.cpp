#include "ops/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace gmlp {

template <class T>
T cross_entropy_forward(T* probs, const T* logits, const int32_t* labels, int64_t B, int64_t K,
                        T smoothing) {
  double total = 0;
  for (int64_t b = 0; b < B; ++b) {
    GMLP_CHECK(labels[b] >= 0 && labels[b] < K);
    const T* lb = logits + b * K;
    T* pb = probs + b * K;
    const T mx = *std::max_element(lb, lb + K);
    double sum = 0, sum_logit = 0;
    for (int64_t k = 0; k < K; ++k) {
      pb[k] = std::exp(lb[k] - mx);
      sum += pb[k];
      sum_logit += lb[k] - mx;
    }
    for (int64_t k = 0; k < K; ++k) pb[k] = T(pb[k] / sum);
    const double lse = std::log(sum);  // log Σ exp(l - mx)
    // -Σ q_k log p_k with log p_k = (l_k - mx) - lse
    const double nll = lse - (lb[labels[b]] - mx);
    const double smooth = lse - sum_logit / double(K);
    total += (1.0 - smoothing) * nll + smoothing * smooth;
  }
  return T(total / double(B));
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const int32_t* labels, int64_t B,
                            int64_t K, T smoothing) {
  // fwd: loss = mean_b -Σ q log softmax(l)  =>  dl = (p - q) / B
  const T off = smoothing / T(K), on = T(1) - smoothing + off, inv = T(1) / T(B);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < K; ++k)
      dlogits[b * K + k] = (probs[b * K + k] - (k == labels[b] ? on : off)) * inv;
}

template float cross_entropy_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t, float);
template double cross_entropy_forward<double>(double*, const double*, const int32_t*, int64_t, int64_t, double);
template void cross_entropy_backward<float>(float*, const float*, const int32_t*, int64_t, int64_t, float);
template void cross_entropy_backward<double>(double*, const double*, const int32_t*, int64_t, int64_t, double);

}  // namespace gmlp
