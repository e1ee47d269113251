// The weight initialisers of timm/torch, on the project's RNG (same distributions, not the same
// draws as torch).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/rng.h"

namespace gmlp::init {

template <class T>
void fill(T* w, int64_t n, T v) {
  std::fill(w, w + n, v);
}

template <class T>
void normal(T* w, int64_t n, double std, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) w[i] = T(rng.normal() * std);
}

// torch.nn.init.trunc_normal_(std=std, a=-2·std, b=2·std) as timm uses it (ViT: std 0.02).
template <class T>
void trunc_normal(T* w, int64_t n, double std, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) {
    double x = rng.normal();
    while (std::abs(x) > 2.0) x = rng.normal();
    w[i] = T(x * std);
  }
}

// torch.nn.init.xavier_uniform_ on an (out, in) weight.
template <class T>
void xavier_uniform(T* w, int64_t out, int64_t in, Rng& rng) {
  const double bound = std::sqrt(6.0 / double(in + out));
  for (int64_t i = 0; i < out * in; ++i) w[i] = T(rng.uniform(-bound, bound));
}

// timm lecun_normal_: truncated normal on [-2, 2] scaled to variance 1/fan_in.
template <class T>
void lecun_normal(T* w, int64_t n, int64_t fan_in, Rng& rng) {
  trunc_normal(w, n, std::sqrt(1.0 / double(fan_in)) / 0.87962566103423978, rng);
}

// torch's default for Linear/Conv weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
template <class T>
void torch_default(T* w, int64_t n, int64_t fan_in, Rng& rng) {
  const double bound = 1.0 / std::sqrt(double(fan_in));
  for (int64_t i = 0; i < n; ++i) w[i] = T(rng.uniform(-bound, bound));
}

}  // namespace gmlp::init
