#include "train/optimizer.h"

#include <omp.h>
#include <algorithm>

#include <cmath>
#include <string>

#include "core/error.h"

namespace gmlp {

template <class T>
AdamW<T>::AdamW(const std::vector<ParamInfo>& params, AdamWConfig config, const std::vector<double>& lr_scale)
    : cfg_(config) {
  const int64_t n = params.empty() ? 0 : params.back().offset + params.back().numel;
  m_.resize(n);
  v_.resize(n);
  decay_.assign(n, 0);
  for (const ParamInfo& p : params)
    std::fill(decay_.begin() + p.offset, decay_.begin() + p.offset + p.numel, uint8_t(p.decay));
  if (lr_scale.empty()) return;
  if (lr_scale.size() != params.size())
    fail("AdamW: expected one learning-rate factor per parameter (", params.size(), "), found ", lr_scale.size());
  scale_.assign(n, T(1));
  for (size_t i = 0; i < params.size(); ++i)
    std::fill(scale_.begin() + params[i].offset, scale_.begin() + params[i].offset + params[i].numel, T(lr_scale[i]));
}

namespace {
// The update of one contiguous span; restrict-qualified so that it vectorises. scale (the
// per-element learning-rate factors) is read only when kScaled, and g is taken times clip (in
// double, rounded to T: torch's clipping) only when kClipped.
template <bool kScaled, bool kClipped, class T>
void adamw_span(T* __restrict w, T* __restrict m, T* __restrict v, const T* __restrict g,
                const uint8_t* __restrict decay, const T* __restrict scale, int64_t n, T lr_wd, T b1, T b2, T eps,
                T step_size, T inv_sqrt_bc2, double clip) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T s = kScaled ? scale[i] : T(1);
    const T gi = kClipped ? T(double(g[i]) * clip) : g[i];
    w[i] -= (decay[i] ? s * lr_wd : T(0)) * w[i];
    m[i] = b1 * m[i] + (T(1) - b1) * gi;
    v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
    w[i] -= s * step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}
}  // namespace

template <class T>
void AdamW<T>::step(T* w, const T* g, double lr, double grad_scale) {
  ++t_;
  const double bc1 = 1.0 - std::pow(cfg_.beta1, double(t_));
  const double bc2 = 1.0 - std::pow(cfg_.beta2, double(t_));
  const T lr_wd = T(lr * cfg_.weight_decay), b1 = T(cfg_.beta1), b2 = T(cfg_.beta2), eps = T(cfg_.eps);
  const T step_size = T(lr / bc1), inv_sqrt_bc2 = T(1.0 / std::sqrt(bc2));
  const int64_t n = int64_t(m_.size());
  T* m = m_.data();
  T* v = v_.data();
  const uint8_t* decay = decay_.data();
  const T* scale = scale_.empty() ? nullptr : scale_.data();
  const bool clipped = grad_scale != 1;
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    const auto span = [&](auto kernel) {
      kernel(w + begin, m + begin, v + begin, g + begin, decay + begin, scale ? scale + begin : nullptr, end - begin,
             lr_wd, b1, b2, eps, step_size, inv_sqrt_bc2, grad_scale);
    };
    if (scale && clipped)
      span(adamw_span<true, true, T>);
    else if (scale)
      span(adamw_span<true, false, T>);
    else if (clipped)
      span(adamw_span<false, true, T>);
    else
      span(adamw_span<false, false, T>);
  }
}

template <class T>
double grad_norm(const T* g, int64_t n) {
  double ss = 0;
#pragma omp parallel for simd reduction(+ : ss) schedule(static)
  for (int64_t i = 0; i < n; ++i) ss += double(g[i]) * double(g[i]);
  return std::sqrt(ss);
}

template <class T>
double optimizer_step(AdamW<T>& adamw, T* w, const T* g, int64_t n, double clip_norm, double lr) {
  const double norm = grad_norm(g, n);
  const double coef = clip_norm / (norm + 1e-6);
  adamw.step(w, g, lr, clip_norm > 0 && coef < 1.0 ? coef : 1.0);
  return norm;
}

template <class T>
void ema_update(T* ema, const T* w, int64_t n, double decay) {
  const T rate = T(1.0 - decay);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) ema[i] += rate * (w[i] - ema[i]);
}

std::vector<double> layer_decay_scales(const std::vector<ParamInfo>& params, double decay) {
  if (!(decay > 0 && decay <= 1)) fail("invalid layer decay ", decay, ": expected a factor in (0, 1]");
  // The block index of a name blocks.<i>.*, or -1.
  auto block_of = [](const std::string& name) {
    static const std::string prefix = "blocks.";
    if (name.compare(0, prefix.size(), prefix) != 0) return -1;
    const size_t end = name.find('.', prefix.size());
    try {
      return std::stoi(name.substr(prefix.size(), end - prefix.size()));
    } catch (const std::exception&) {
      return -1;
    }
  };
  int blocks = 0;
  for (const ParamInfo& p : params) blocks = std::max(blocks, block_of(p.name) + 1);
  std::vector<double> scales;
  bool seen_block = false;
  for (const ParamInfo& p : params) {
    const int b = block_of(p.name);
    seen_block = seen_block || b >= 0;
    const int layer = b >= 0 ? b + 1 : seen_block ? blocks + 1 : 0;
    scales.push_back(std::pow(decay, double(blocks + 1 - layer)));
  }
  return scales;
}

double lr_schedule(int64_t step, int64_t total, int64_t warmup, double lr, double min_lr) {
  if (warmup > 0 && step < warmup) return lr * double(step + 1) / double(warmup);
  if (total <= warmup) return lr;
  const double progress = std::min(1.0, double(step - warmup) / double(total - warmup));
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(3.14159265358979323846 * progress));
}

template class AdamW<float>;
template class AdamW<double>;
template double grad_norm<float>(const float*, int64_t);
template double grad_norm<double>(const double*, int64_t);
template double optimizer_step<float>(AdamW<float>&, float*, const float*, int64_t, double, double);
template double optimizer_step<double>(AdamW<double>&, double*, const double*, int64_t, double, double);
template void ema_update<float>(float*, const float*, int64_t, double);
template void ema_update<double>(double*, const double*, int64_t, double);

}  // namespace gmlp
