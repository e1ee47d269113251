// AdamW with decoupled weight decay (Loshchilov & Hutter 2019), exactly as torch.optim.AdamW:
//   w -= lr·wd·w (decay only where ParamInfo::decay);  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
//   w -= lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
// plus global-norm gradient clipping (torch.nn.utils.clip_grad_norm_) and the learning-rate
// schedule (linear warmup, then cosine decay to a floor), the weights' moving average, and
// layer-wise learning-rate decay for finetuning.
#pragma once

#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "nn/model.h"

namespace gmlp {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.05;
};

template <class T>
class AdamW {
 public:
  // lr_scale, if given, holds one factor per parameter (as params): that parameter steps at
  // lr·scale, its weight decay included, as a torch param group with lr = lr·scale would.
  AdamW(const std::vector<ParamInfo>& params, AdamWConfig config, const std::vector<double>& lr_scale = {});
  // One update of w (flat, laid out as params) from g, at learning rate lr. With grad_scale (a
  // clipping coefficient), each g[i] is taken as T(g[i]·grad_scale), what torch's clipping writes
  // into g, without a pass to write it.
  void step(T* w, const T* g, double lr, double grad_scale = 1);

  int64_t steps() const { return t_; }
  void set_steps(int64_t t) { t_ = t; }
  Buffer<T>& m() { return m_; }
  Buffer<T>& v() { return v_; }
  const AdamWConfig& config() const { return cfg_; }

 private:
  AdamWConfig cfg_;
  std::vector<uint8_t> decay_;  // per parameter element: 1 where weight decay applies
  std::vector<T> scale_;        // per parameter element: its learning-rate factor (empty: all 1)
  int64_t t_ = 0;
  Buffer<T> m_, v_;
};

// g's global L2 norm, summed in double.
template <class T>
double grad_norm(const T* g, int64_t n);

// One step of an exponential moving average of the weights, as timm's ModelEmaV2 (DeiT's
// --model-ema): ema += (1-decay)·(w - ema) over all n entries, buffers included (timm averages
// the whole state_dict, BatchNorm's running statistics too).
template <class T>
void ema_update(T* ema, const T* w, int64_t n, double decay);

// Layer-wise learning-rate decay (ELECTRA, BEiT; timm's param_groups_layer_decay): with L blocks
// named blocks.<i>.*, block i is layer i+1, what is registered before the first block (the
// embeddings) layer 0, and what comes after the last (final norm, heads) layer L+1; layer l
// learns at decay^(L+1-l) times the rate. One factor per parameter, for AdamW's lr_scale.
// decay must be in (0, 1]; 1 gives all ones.
std::vector<double> layer_decay_scales(const std::vector<ParamInfo>& params, double decay);

// One optimizer step as every trainer, `gmlp bench` and the parity tests take it: g clipped to
// a global norm of clip_norm (0: no clipping; torch.nn.utils.clip_grad_norm_'s coefficient
// clip_norm / (norm + 1e-6), applied only when below 1), then AdamW at lr. AdamW reads g clipped:
// g itself is left as it was. Returns g's norm.
template <class T>
double optimizer_step(AdamW<T>& adamw, T* w, const T* g, int64_t n, double clip_norm, double lr);

// Linear warmup from lr/warmup to lr over `warmup` steps, then cosine decay to min_lr at `total`.
double lr_schedule(int64_t step, int64_t total, int64_t warmup, double lr, double min_lr);

}  // namespace gmlp
