// Cross-entropy against soft (dense) targets, as timm.loss.SoftTargetCrossEntropy, which DeiT-style
// training uses after Mixup/CutMix:
//   loss = mean_b  -Σ_k t_bk · log softmax(logits_b)_k
// and the smoothed one-hot targets timm's mixup_target builds (off = s/K, on = 1 - s + s/K).
// With targets = smooth_one_hot(labels, s) this equals cross_entropy_forward(..., labels, s).
#pragma once

#include <cstdint>

namespace gmlp {

// probs: (B, K) overwritten with softmax(logits); logits, targets: (B, K), row-major. Returns
// the mean over the batch of -Σ_k t_k log p_k. Targets need not sum to 1 for the forward value
// (the formula is used as written), but the backward below assumes they do.
template <class T>
T soft_cross_entropy_forward(T* probs, const T* logits, const T* targets, int64_t B, int64_t K);

// dlogits: (B, K) overwritten with (probs - targets) / B, the gradient of the forward's mean
// loss when every target row sums to 1 (as smooth_one_hot and Mixup/CutMix targets do).
template <class T>
void soft_cross_entropy_backward(T* dlogits, const T* probs, const T* targets, int64_t B, int64_t K);

// targets: (B, K) overwritten with the label-smoothed one-hot rows of timm's mixup_target:
// s/K everywhere, 1 - s + s/K at labels[b]. Requires 0 <= labels[b] < K.
template <class T>
void smooth_one_hot(T* targets, const int32_t* labels, int64_t B, int64_t K, T smoothing);

}  // namespace gmlp
