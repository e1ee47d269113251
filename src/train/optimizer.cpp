#include "train/optimizer.h"

#include <algorithm>
#include <omp.h>

#include <cmath>

namespace gmlp {

template <class T>
AdamW<T>::AdamW(const std::vector<ParamInfo>& params, AdamWConfig config) : cfg_(config) {
  const int64_t n = params.empty() ? 0 : params.back().offset + params.back().numel;
  m_.resize(n);
  v_.resize(n);
  decay_.assign(n, 0);
  for (const ParamInfo& p : params)
    std::fill(decay_.begin() + p.offset, decay_.begin() + p.offset + p.numel, uint8_t(p.decay));
}

namespace {
// The update of one contiguous span; restrict-qualified so that it vectorises.
template <class T>
void adamw_span(T* __restrict w, T* __restrict m, T* __restrict v, const T* __restrict g,
                const uint8_t* __restrict decay, int64_t n, T lr_wd, T b1, T b2, T eps,
                T step_size, T inv_sqrt_bc2) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    w[i] -= (decay[i] ? lr_wd : T(0)) * w[i];
    m[i] = b1 * m[i] + (T(1) - b1) * g[i];
    v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
    w[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}
}  // namespace

template <class T>
void AdamW<T>::step(T* w, const T* g, double lr) {
  ++t_;
  const double bc1 = 1.0 - std::pow(cfg_.beta1, double(t_));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, double(t_));
  const T lr_wd = T(lr * cfg_.weight_decay), b1 = T(cfg_.beta1), b2 = T(cfg_.beta2), eps = T(cfg_.eps);
  const T step_size = T(lr / bc1), inv_sqrt_bc2 = T(1.0 / std::sqrt(bc2));
  const int64_t n = int64_t(m_.size());
  T* m = m_.data();
  T* v = v_.data();
  const uint8_t* decay = decay_.data();
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    adamw_span(w + begin, m + begin, v + begin, g + begin, decay + begin, end - begin, lr_wd, b1,
               b2, eps, step_size, inv_sqrt_bc2);
  }
}

template <class T>
double clip_grad_norm(T* g, int64_t n, double max_norm) {
  double ss = 0;
#pragma omp parallel for simd reduction(+ : ss) schedule(static)
  for (int64_t i = 0; i < n; ++i) ss += double(g[i]) * double(g[i]);
  const double norm = std::sqrt(ss);
  const double coef = max_norm / (norm + 1e-6);
  if (max_norm > 0 && coef < 1.0) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) g[i] = T(g[i] * coef);
  }
  return norm;
}

template <class T>
void ema_update(T* ema, const T* w, int64_t n, double decay) {
  const T rate = T(1.0 - decay);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) ema[i] += rate * (w[i] - ema[i]);
}

double lr_schedule(int64_t step, int64_t total, int64_t warmup, double lr, double min_lr) {
  if (warmup > 0 && step < warmup) return lr * double(step + 1) / double(warmup);
  if (total <= warmup) return lr;
  const double progress = std::min(1.0, double(step - warmup) / double(total - warmup));
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(3.14159265358979323846 * progress));
}

template class AdamW<float>;
template class AdamW<double>;
template double clip_grad_norm<float>(float*, int64_t, double);
template double clip_grad_norm<double>(double*, int64_t, double);
template void ema_update<float>(float*, const float*, int64_t, double);
template void ema_update<double>(double*, const double*, int64_t, double);

}  // namespace gmlp
