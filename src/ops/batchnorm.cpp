#include "ops/batchnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace gmlp {

namespace {

// The working memory of forward and backward: per thread, grown to the largest batch seen and
// then reused, so that after the first batch of a shape neither allocates.
template <class U>
U* scratch(std::vector<U>& v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
  return v.data();
}

// out[c] = Σ_b part[b·C + c], in double.
void sum_over_batch(double* out, const double* part, int64_t B, int64_t C) {
  std::fill(out, out + C, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) out[c] += part[b * C + c];
}

}  // namespace

template <class T>
void batchnorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, T* running_mean,
                       T* running_var, int64_t B, int64_t C, int64_t HW, bool training, T eps, T momentum) {
  thread_local std::vector<T> mu_buffer, r_buffer;
  thread_local std::vector<double> part_buffer, sum_buffer;
  T* mu = scratch(mu_buffer, C);
  T* r = scratch(r_buffer, C);
  if (training) {
    const int64_t n = B * HW;
    if (n <= 1) fail("batch norm in training needs more than one value per channel, got ", n);
    // Each (b, c) plane sums in T (at most H·W terms), the planes of a channel in double.
    double* part = scratch(part_buffer, B * C);
    double* sum = scratch(sum_buffer, C);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (b * C + c) * HW;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < HW; ++i) acc += xp[i];
        part[b * C + c] = acc;
      }
    sum_over_batch(sum, part, B, C);
    for (int64_t c = 0; c < C; ++c) mu[c] = T(sum[c] / double(n));
      // Two passes: the variance of the centred values does not cancel.
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (b * C + c) * HW;
        const T m = mu[c];
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < HW; ++i) acc += (xp[i] - m) * (xp[i] - m);
        part[b * C + c] = acc;
      }
    double* ss = sum;  // the mean is in mu
    sum_over_batch(ss, part, B, C);
    for (int64_t c = 0; c < C; ++c) {
      const double var = ss[c] / double(n);
      r[c] = T(1.0 / std::sqrt(var + double(eps)));
      if (running_mean) running_mean[c] = (T(1) - momentum) * running_mean[c] + momentum * mu[c];
      if (running_var)
        running_var[c] = (T(1) - momentum) * running_var[c] + momentum * T(ss[c] / double(n - 1));  // unbiased
    }
  } else {
    for (int64_t c = 0; c < C; ++c) {
      mu[c] = running_mean[c];
      r[c] = T(1.0 / std::sqrt(double(running_var[c]) + double(eps)));
    }
  }
  if (mean) std::copy(mu, mu + C, mean);
  if (rstd) std::copy(r, r + C, rstd);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const T* xp = x + (b * C + c) * HW;
      T* yp = y + (b * C + c) * HW;
      const T m = mu[c], a = r[c] * gamma[c], sh = beta[c];
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) yp[i] = (xp[i] - m) * a + sh;
    }
}

template <class T>
void batchnorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                        const T* gamma, int64_t B, int64_t C, int64_t HW) {
  // fwd: x̂ = (x - μ)·r;  y = x̂·γ + β, with μ, r the statistics over n = B·HW values
  //  =>  dβ = Σ dy,  dγ = Σ dy·x̂,  dx = γ·r·(dy - dβ/n - x̂·dγ/n)
  const int64_t n = B * HW;
  thread_local std::vector<double> p_buffer, s_buffer;
  thread_local std::vector<T> k_buffer;
  double* p1 = scratch(p_buffer, 2 * B * C);
  double* p2 = p1 + B * C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const T* xp = x + (b * C + c) * HW;
      const T* gp = dy + (b * C + c) * HW;
      const T m = mean[c];
      T s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t i = 0; i < HW; ++i) {
        s1 += gp[i];
        s2 += gp[i] * (xp[i] - m);
      }
      p1[b * C + c] = s1;
      p2[b * C + c] = s2;
    }
  double* sb = scratch(s_buffer, 2 * C);
  double* sg = sb + C;
  sum_over_batch(sb, p1, B, C);
  sum_over_batch(sg, p2, B, C);
  T* k1 = scratch(k_buffer, 2 * C);
  T* k2 = k1 + C;
  for (int64_t c = 0; c < C; ++c) {
    const double db = sb[c], dg = sg[c] * double(rstd[c]);
    dbeta[c] += T(db);
    dgamma[c] += T(dg);
    k1[c] = T(db / double(n));
    k2[c] = T(dg / double(n));
  }
  if (!dx) return;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const T* xp = x + (b * C + c) * HW;
      const T* gp = dy + (b * C + c) * HW;
      T* dp = dx + (b * C + c) * HW;
      const T m = mean[c], r = rstd[c], g = gamma[c] * r, a = k1[c], q = k2[c];
#pragma omp simd
      for (int64_t i = 0; i < HW; ++i) dp[i] = g * (gp[i] - a - (xp[i] - m) * r * q);
    }
}

template <class T>
void batchnorm_forward_ref(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, T* running_mean,
                           T* running_var, int64_t B, int64_t C, int64_t HW, bool training, T eps, T momentum) {
  const int64_t n = B * HW;
  for (int64_t c = 0; c < C; ++c) {
    double mu, var;
    if (training) {
      if (n <= 1) fail("batch norm in training needs more than one value per channel, got ", n);
      mu = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < HW; ++i) mu += x[(b * C + c) * HW + i];
      mu /= double(n);
      var = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < HW; ++i) {
          const double d = x[(b * C + c) * HW + i] - mu;
          var += d * d;
        }
      const double unbiased = var / double(n - 1);
      var /= double(n);
      if (running_mean) running_mean[c] = T((1.0 - momentum) * double(running_mean[c]) + double(momentum) * mu);
      if (running_var) running_var[c] = T((1.0 - momentum) * double(running_var[c]) + double(momentum) * unbiased);
    } else {
      mu = running_mean[c];
      var = running_var[c];
    }
    const double r = 1.0 / std::sqrt(var + double(eps));
    if (mean) mean[c] = T(mu);
    if (rstd) rstd[c] = T(r);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < HW; ++i) {
        const int64_t j = (b * C + c) * HW + i;
        y[j] = T((double(x[j]) - mu) * r * double(gamma[c]) + double(beta[c]));
      }
  }
}

template <class T>
void batchnorm_backward_ref(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                            const T* gamma, int64_t B, int64_t C, int64_t HW) {
  // Full Jacobian per channel over its n = B·HW values: ∂x̂_j/∂x_i = r·(δ_ij - 1/n - x̂_i·x̂_j/n).
  const int64_t n = B * HW;
  auto at = [&](int64_t c, int64_t j) { return (j / HW * C + c) * HW + j % HW; };
  for (int64_t c = 0; c < C; ++c) {
    const double r = rstd[c], mu = mean[c];
    if (dx)
      for (int64_t i = 0; i < n; ++i) {
        const double xi = (double(x[at(c, i)]) - mu) * r;
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double xj = (double(x[at(c, j)]) - mu) * r;
          acc += double(dy[at(c, j)]) * double(gamma[c]) * r * ((i == j) - 1.0 / double(n) - xi * xj / double(n));
        }
        dx[at(c, i)] = T(acc);
      }
    double dg = 0, db = 0;
    for (int64_t j = 0; j < n; ++j) {
      dg += double(dy[at(c, j)]) * (double(x[at(c, j)]) - mu) * r;
      db += double(dy[at(c, j)]);
    }
    dgamma[c] += T(dg);
    dbeta[c] += T(db);
  }
}

#define GMLP_INSTANTIATE(T)                                                                                           \
  template void batchnorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, T*, T*, int64_t, int64_t, int64_t,     \
                                     bool, T, T);                                                                     \
  template void batchnorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int64_t, int64_t, \
                                      int64_t);                                                                       \
  template void batchnorm_forward_ref<T>(T*, T*, T*, const T*, const T*, const T*, T*, T*, int64_t, int64_t, int64_t, \
                                         bool, T, T);                                                                 \
  template void batchnorm_backward_ref<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, int64_t,      \
                                          int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
