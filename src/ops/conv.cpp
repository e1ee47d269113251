#include "ops/conv.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/matmul.h"

namespace gmlp {

namespace {

// The output columns ox of kernel column kx whose input column ix = ox·stride - pad + kx lies in
// [0, W): [lo, hi), possibly empty. Rows (ky, oy, iy) alike with H.
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t kx, int64_t W, int64_t Wo, int64_t stride, int64_t pad) {
  const int64_t first = pad - kx;          // ox·stride >= first
  const int64_t last = W - 1 + pad - kx;   // ox·stride <= last
  if (last < 0) return {0, 0};
  const int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int64_t hi = std::min(Wo, last / stride + 1);
  return {std::min(lo, hi), hi};
}

// col (Cin·k·k, B·Ho·Wo) overwritten with the windows of x (zeros for the padding).
template <class T>
void im2col(T* col, const T* x, const ConvShape& s) {
  const int64_t k = s.k, Ho = s.Ho(), Wo = s.Wo(), P = Ho * Wo, N = s.B * P;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t r = 0; r < s.col_rows(); ++r)
    for (int64_t b = 0; b < s.B; ++b) {
      const int64_t ci = r / (k * k), ky = (r / k) % k, kx = r % k;
      const T* xp = x + (b * s.Cin + ci) * s.H * s.W;
      T* dst = col + r * N + b * P;
      const Range rx = valid_outputs(kx, s.W, Wo, s.stride, s.pad);
      const int64_t off = kx - s.pad;  // ix = ox·stride + off
      for (int64_t oy = 0; oy < Ho; ++oy) {
        T* d = dst + oy * Wo;
        const int64_t iy = oy * s.stride - s.pad + ky;
        if (iy < 0 || iy >= s.H) {
          std::fill(d, d + Wo, T(0));
          continue;
        }
        const T* xr = xp + iy * s.W;
        std::fill(d, d + rx.lo, T(0));
        if (s.stride == 1) {
          std::copy(xr + rx.lo + off, xr + rx.hi + off, d + rx.lo);
        } else {
          for (int64_t ox = rx.lo; ox < rx.hi; ++ox) d[ox] = xr[ox * s.stride + off];
        }
        std::fill(d + rx.hi, d + Wo, T(0));
      }
    }
}

// dx (B, Cin, H, W) overwritten with the sum of every window's gradient in col (Cin·k·k, B·Ho·Wo)
// that covers each pixel. Each (b, ci) plane is written by one thread only.
template <class T>
void col2im(T* dx, const T* col, const ConvShape& s) {
  const int64_t k = s.k, Ho = s.Ho(), Wo = s.Wo(), P = Ho * Wo, N = s.B * P;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t ci = 0; ci < s.Cin; ++ci) {
      T* dp = dx + (b * s.Cin + ci) * s.H * s.W;
      std::fill(dp, dp + s.H * s.W, T(0));
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          const T* src = col + ((ci * k + ky) * k + kx) * N + b * P;
          const Range rx = valid_outputs(kx, s.W, Wo, s.stride, s.pad);
          const Range ry = valid_outputs(ky, s.H, Ho, s.stride, s.pad);
          const int64_t off = kx - s.pad;
          for (int64_t oy = ry.lo; oy < ry.hi; ++oy) {
            T* dr = dp + (oy * s.stride - s.pad + ky) * s.W;
            const T* sr = src + oy * Wo;
            if (s.stride == 1) {
#pragma omp simd
              for (int64_t ox = rx.lo; ox < rx.hi; ++ox) dr[ox + off] += sr[ox];
            } else {
              for (int64_t ox = rx.lo; ox < rx.hi; ++ox) dr[ox * s.stride + off] += sr[ox];
            }
          }
        }
    }
}

// Per-thread scratch for Y' / dY' (Cout, B·Ho·Wo): grows, never shrinks.
template <class T>
T* transpose_scratch(int64_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < size_t(n)) buf.resize(size_t(n));
  return buf.data();
}

}  // namespace

template <class T>
void conv2d_forward(T* y, const T* x, const T* w, ConvShape s, T* col) {
  const int64_t P = s.Ho() * s.Wo(), N = s.B * P, K = s.col_rows();
  im2col(col, x, s);
  T* yt = transpose_scratch<T>(s.Cout * N);
  matmul<T>(false, false, s.Cout, N, K, w, K, col, N, T(0), yt, N);
  // Y' (Cout, B, P) → y (B, Cout, P)
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t co = 0; co < s.Cout; ++co) {
      const T* src = yt + co * N + b * P;
      std::copy(src, src + P, y + (b * s.Cout + co) * P);
    }
}

template <class T>
void conv2d_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, ConvShape s, T* col) {
  const int64_t P = s.Ho() * s.Wo(), N = s.B * P, K = s.col_rows();
  T* dyt = transpose_scratch<T>(s.Cout * N);
  // dy (B, Cout, P) → dY' (Cout, B, P)
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t co = 0; co < s.Cout; ++co)
    for (int64_t b = 0; b < s.B; ++b) {
      const T* src = dy + (b * s.Cout + co) * P;
      std::copy(src, src + P, dyt + co * N + b * P);
    }
  im2col(col, x, s);
  // fwd: Y' = W·col  =>  dW += dY'·colᵀ;  dcol = Wᵀ·dY'
  matmul<T>(false, true, s.Cout, K, N, dyt, N, col, N, T(1), dw, K);
  if (!dx) return;
  matmul<T>(true, false, K, N, s.Cout, w, K, dyt, N, T(0), col, N);
  col2im(dx, col, s);
}

template <class T>
void conv2d_forward_ref(T* y, const T* x, const T* w, ConvShape s) {
  const int64_t Ho = s.Ho(), Wo = s.Wo(), k = s.k;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t co = 0; co < s.Cout; ++co)
      for (int64_t oy = 0; oy < Ho; ++oy)
        for (int64_t ox = 0; ox < Wo; ++ox) {
          double acc = 0;
          for (int64_t ci = 0; ci < s.Cin; ++ci)
            for (int64_t ky = 0; ky < k; ++ky)
              for (int64_t kx = 0; kx < k; ++kx) {
                const int64_t iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
                if (iy < 0 || iy >= s.H || ix < 0 || ix >= s.W) continue;
                acc += double(x[((b * s.Cin + ci) * s.H + iy) * s.W + ix]) *
                       double(w[((co * s.Cin + ci) * k + ky) * k + kx]);
              }
          y[((b * s.Cout + co) * Ho + oy) * Wo + ox] = T(acc);
        }
}

template <class T>
void conv2d_backward_ref(T* dx, T* dw, const T* dy, const T* x, const T* w, ConvShape s) {
  const int64_t Ho = s.Ho(), Wo = s.Wo(), k = s.k;
  // Gathered, one output value at a time: each x (resp. w) element sums over the outputs it feeds.
  if (dx)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t ci = 0; ci < s.Cin; ++ci)
        for (int64_t iy = 0; iy < s.H; ++iy)
          for (int64_t ix = 0; ix < s.W; ++ix) {
            double acc = 0;
            for (int64_t co = 0; co < s.Cout; ++co)
              for (int64_t ky = 0; ky < k; ++ky)
                for (int64_t kx = 0; kx < k; ++kx) {
                  const int64_t ny = iy + s.pad - ky, nx = ix + s.pad - kx;  // = o·stride
                  if (ny < 0 || nx < 0 || ny % s.stride || nx % s.stride) continue;
                  const int64_t oy = ny / s.stride, ox = nx / s.stride;
                  if (oy >= Ho || ox >= Wo) continue;
                  acc += double(dy[((b * s.Cout + co) * Ho + oy) * Wo + ox]) *
                         double(w[((co * s.Cin + ci) * k + ky) * k + kx]);
                }
            dx[((b * s.Cin + ci) * s.H + iy) * s.W + ix] = T(acc);
          }
  for (int64_t co = 0; co < s.Cout; ++co)
    for (int64_t ci = 0; ci < s.Cin; ++ci)
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          double acc = 0;
          for (int64_t b = 0; b < s.B; ++b)
            for (int64_t oy = 0; oy < Ho; ++oy)
              for (int64_t ox = 0; ox < Wo; ++ox) {
                const int64_t iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
                if (iy < 0 || iy >= s.H || ix < 0 || ix >= s.W) continue;
                acc += double(dy[((b * s.Cout + co) * Ho + oy) * Wo + ox]) *
                       double(x[((b * s.Cin + ci) * s.H + iy) * s.W + ix]);
              }
          dw[((co * s.Cin + ci) * k + ky) * k + kx] += T(acc);
        }
}

namespace {

// part[c] = Σ_b part_bc[b·C + c], in double.
std::vector<double> sum_over_batch(const std::vector<double>& part, int64_t B, int64_t C) {
  std::vector<double> out(C, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) out[c] += part[b * C + c];
  return out;
}

}  // namespace

template <class T>
void batchnorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                       T* running_mean, T* running_var, int64_t B, int64_t C, int64_t HW,
                       bool training, T eps, T momentum) {
  std::vector<T> mu(C), r(C);
  if (training) {
    const int64_t n = B * HW;
    if (n <= 1) fail("batch norm in training needs more than one value per channel, got ", n);
    // Each (b, c) plane sums in T (at most H·W terms), the planes of a channel in double.
    std::vector<double> part(B * C);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (b * C + c) * HW;
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < HW; ++i) acc += xp[i];
        part[b * C + c] = acc;
      }
    const std::vector<double> sum = sum_over_batch(part, B, C);
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
    const std::vector<double> ss = sum_over_batch(part, B, C);
    for (int64_t c = 0; c < C; ++c) {
      const double var = ss[c] / double(n);
      r[c] = T(1.0 / std::sqrt(var + double(eps)));
      if (running_mean) running_mean[c] = (T(1) - momentum) * running_mean[c] + momentum * mu[c];
      if (running_var)
        running_var[c] = (T(1) - momentum) * running_var[c] +
                         momentum * T(ss[c] / double(n - 1));  // unbiased
    }
  } else {
    for (int64_t c = 0; c < C; ++c) {
      mu[c] = running_mean[c];
      r[c] = T(1.0 / std::sqrt(double(running_var[c]) + double(eps)));
    }
  }
  if (mean) std::copy(mu.begin(), mu.end(), mean);
  if (rstd) std::copy(r.begin(), r.end(), rstd);
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
void batchnorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean,
                        const T* rstd, const T* gamma, int64_t B, int64_t C, int64_t HW) {
  // fwd: x̂ = (x - μ)·r;  y = x̂·γ + β, with μ, r the statistics over n = B·HW values
  //  =>  dβ = Σ dy,  dγ = Σ dy·x̂,  dx = γ·r·(dy - dβ/n - x̂·dγ/n)
  const int64_t n = B * HW;
  std::vector<double> p1(B * C), p2(B * C);
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
  const std::vector<double> sb = sum_over_batch(p1, B, C), sg = sum_over_batch(p2, B, C);
  std::vector<T> k1(C), k2(C);
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
void batchnorm_forward_ref(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                           T* running_mean, T* running_var, int64_t B, int64_t C, int64_t HW,
                           bool training, T eps, T momentum) {
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
      if (running_mean)
        running_mean[c] = T((1.0 - momentum) * double(running_mean[c]) + double(momentum) * mu);
      if (running_var)
        running_var[c] = T((1.0 - momentum) * double(running_var[c]) + double(momentum) * unbiased);
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
void batchnorm_backward_ref(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean,
                            const T* rstd, const T* gamma, int64_t B, int64_t C, int64_t HW) {
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
          acc += double(dy[at(c, j)]) * double(gamma[c]) * r *
                 ((i == j) - 1.0 / double(n) - xi * xj / double(n));
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

template <class T>
void relu_forward(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
}

template <class T>
void relu_backward_inplace(T* dy, const T* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dy[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <class T>
void global_avg_pool_forward(T* y, const T* x, int64_t B, int64_t C, int64_t HW) {
  const T inv = T(1) / T(HW);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < B * C; ++j) {
    const T* xp = x + j * HW;
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < HW; ++i) acc += xp[i];
    y[j] = acc * inv;
  }
}

template <class T>
void global_avg_pool_backward(T* dx, const T* dy, int64_t B, int64_t C, int64_t HW) {
  const T inv = T(1) / T(HW);
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < B * C; ++j) std::fill(dx + j * HW, dx + (j + 1) * HW, dy[j] * inv);
}

#define GMLP_INSTANTIATE(T)                                                                    \
  template void conv2d_forward<T>(T*, const T*, const T*, ConvShape, T*);                      \
  template void conv2d_backward<T>(T*, T*, const T*, const T*, const T*, ConvShape, T*);       \
  template void conv2d_forward_ref<T>(T*, const T*, const T*, ConvShape);                      \
  template void conv2d_backward_ref<T>(T*, T*, const T*, const T*, const T*, ConvShape);       \
  template void batchnorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, T*, T*, int64_t, \
                                     int64_t, int64_t, bool, T, T);                            \
  template void batchnorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,      \
                                      const T*, int64_t, int64_t, int64_t);                    \
  template void batchnorm_forward_ref<T>(T*, T*, T*, const T*, const T*, const T*, T*, T*,     \
                                         int64_t, int64_t, int64_t, bool, T, T);               \
  template void batchnorm_backward_ref<T>(T*, T*, T*, const T*, const T*, const T*, const T*,  \
                                          const T*, int64_t, int64_t, int64_t);                \
  template void relu_forward<T>(T*, const T*, int64_t);                                        \
  template void relu_backward_inplace<T>(T*, const T*, int64_t);                               \
  template void global_avg_pool_forward<T>(T*, const T*, int64_t, int64_t, int64_t);          \
  template void global_avg_pool_backward<T>(T*, const T*, int64_t, int64_t, int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
