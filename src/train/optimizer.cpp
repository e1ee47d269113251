#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

namespace gmlp {

template <class T>
AdamW<T>::AdamW(const std::vector<ParamInfo>& params, AdamWConfig config)
    : params_(params), cfg_(config) {
  const int64_t n = params.empty() ? 0 : params.back().offset + params.back().numel;
  m_.resize(n);
  v_.resize(n);
}

template <class T>
void AdamW<T>::step(T* w, const T* g, double lr) {
  ++t_;
  const double bc1 = 1.0 - std::pow(cfg_.beta1, double(t_));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, double(t_));
  const T b1 = T(cfg_.beta1), b2 = T(cfg_.beta2), eps = T(cfg_.eps);
  const T step_size = T(lr / bc1), inv_sqrt_bc2 = T(1.0 / std::sqrt(bc2));
  T* m = m_.data();
  T* v = v_.data();
  for (const ParamInfo& p : params_) {
    const T decay = p.decay ? T(1.0 - lr * cfg_.weight_decay) : T(1);
    const int64_t end = p.offset + p.numel;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = p.offset; i < end; ++i) {
      w[i] *= decay;
      m[i] = b1 * m[i] + (T(1) - b1) * g[i];
      v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
      w[i] -= step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
    }
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

}  // namespace gmlp
