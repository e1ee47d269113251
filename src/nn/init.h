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

// N(0, std²) truncated to [lo, hi]: redrawn until it falls inside.
template <class T>
void truncated(T* w, int64_t n, double std, double lo, double hi, Rng& rng) {
  for (int64_t i = 0; i < n; ++i) {
    double x = rng.normal() * std;
    while (x < lo || x > hi) x = rng.normal() * std;
    w[i] = T(x);
  }
}

// timm's trunc_normal_(std=std), as ViT and BERT-style models use it: the bounds are a = -2 and
// b = 2 in absolute units, so for std 0.02 this is a plain normal (the bounds are 100 std away).
template <class T>
void trunc_normal(T* w, int64_t n, double std, Rng& rng) {
  truncated(w, n, std, -2.0, 2.0, rng);
}

// timm's trunc_normal_tf_(std=std): bounds of ±2 applied to the standard normal, then scaled,
// i.e. truncated at ±2 std (TensorFlow's truncated_normal).
template <class T>
void trunc_normal_tf(T* w, int64_t n, double std, Rng& rng) {
  truncated(w, n, std, -2.0 * std, 2.0 * std, rng);
}

// torch.nn.init.xavier_uniform_ on an (out, in) weight.
template <class T>
void xavier_uniform(T* w, int64_t out, int64_t in, Rng& rng) {
  const double bound = std::sqrt(6.0 / double(in + out));
  for (int64_t i = 0; i < out * in; ++i) w[i] = T(rng.uniform(-bound, bound));
}

// timm lecun_normal_: a normal truncated at ±2 std (trunc_normal_tf_), scaled to variance 1/fan_in
// (0.8796... is the std of a standard normal truncated to [-2, 2]).
template <class T>
void lecun_normal(T* w, int64_t n, int64_t fan_in, Rng& rng) {
  trunc_normal_tf(w, n, std::sqrt(1.0 / double(fan_in)) / 0.87962566103423978, rng);
}

// torch's default for Linear/Conv weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
template <class T>
void torch_default(T* w, int64_t n, int64_t fan_in, Rng& rng) {
  const double bound = 1.0 / std::sqrt(double(fan_in));
  for (int64_t i = 0; i < n; ++i) w[i] = T(rng.uniform(-bound, bound));
}

}  // namespace gmlp::init
