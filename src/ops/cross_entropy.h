// Softmax cross-entropy with label smoothing, averaged over the batch, as
// torch.nn.functional.cross_entropy(logits, labels, label_smoothing=s):
//   q = (1 - s)·onehot(label) + s/K;   loss = mean_b  -Σ_k q_k · log softmax(logits_b)_k
#pragma once

#include <cstdint>

namespace gmlp {

// probs: (B, K) overwritten with softmax(logits). Returns the mean loss.
template <class T>
T cross_entropy_forward(T* probs, const T* logits, const int32_t* labels, int64_t B, int64_t K, T smoothing);
// dlogits: (B, K) overwritten with (probs - q) / B.
template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const int32_t* labels, int64_t B, int64_t K, T smoothing);

}  // namespace gmlp
