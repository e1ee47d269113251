#include "ops/conv2d.h"

#include <algorithm>
#include <vector>

#include "core/matmul.h"

namespace gmlp {

namespace {

// The output columns ox of kernel column kx whose input column ix = ox·stride - pad + kx lies in
// [0, Wi): [lo, hi), possibly empty. Rows (ky, oy, iy) alike with Hi.
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t kx, int64_t Wi, int64_t Wo, int64_t stride, int64_t pad) {
  const int64_t first = pad - kx;          // ox·stride >= first
  const int64_t last = Wi - 1 + pad - kx;  // ox·stride <= last
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
      const T* xp = x + (b * s.Cin + ci) * s.Hi * s.Wi;
      T* dst = col + r * N + b * P;
      const Range rx = valid_outputs(kx, s.Wi, Wo, s.stride, s.pad);
      const int64_t off = kx - s.pad;  // ix = ox·stride + off
      for (int64_t oy = 0; oy < Ho; ++oy) {
        T* d = dst + oy * Wo;
        const int64_t iy = oy * s.stride - s.pad + ky;
        if (iy < 0 || iy >= s.Hi) {
          std::fill(d, d + Wo, T(0));
          continue;
        }
        const T* xr = xp + iy * s.Wi;
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

// dx (B, Cin, Hi, Wi) overwritten with the sum of every window's gradient in col (Cin·k·k, B·Ho·Wo)
// that covers each pixel. Each (b, ci) plane is written by one thread only.
template <class T>
void col2im(T* dx, const T* col, const ConvShape& s) {
  const int64_t k = s.k, Ho = s.Ho(), Wo = s.Wo(), P = Ho * Wo, N = s.B * P;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t ci = 0; ci < s.Cin; ++ci) {
      T* dp = dx + (b * s.Cin + ci) * s.Hi * s.Wi;
      std::fill(dp, dp + s.Hi * s.Wi, T(0));
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          const T* src = col + ((ci * k + ky) * k + kx) * N + b * P;
          const Range rx = valid_outputs(kx, s.Wi, Wo, s.stride, s.pad);
          const Range ry = valid_outputs(ky, s.Hi, Ho, s.stride, s.pad);
          const int64_t off = kx - s.pad;
          for (int64_t oy = ry.lo; oy < ry.hi; ++oy) {
            T* dr = dp + (oy * s.stride - s.pad + ky) * s.Wi;
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
                if (iy < 0 || iy >= s.Hi || ix < 0 || ix >= s.Wi) continue;
                acc += double(x[((b * s.Cin + ci) * s.Hi + iy) * s.Wi + ix]) *
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
        for (int64_t iy = 0; iy < s.Hi; ++iy)
          for (int64_t ix = 0; ix < s.Wi; ++ix) {
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
            dx[((b * s.Cin + ci) * s.Hi + iy) * s.Wi + ix] = T(acc);
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
                if (iy < 0 || iy >= s.Hi || ix < 0 || ix >= s.Wi) continue;
                acc += double(dy[((b * s.Cout + co) * Ho + oy) * Wo + ox]) *
                       double(x[((b * s.Cin + ci) * s.Hi + iy) * s.Wi + ix]);
              }
          dw[((co * s.Cin + ci) * k + ky) * k + kx] += T(acc);
        }
}

#define GMLP_INSTANTIATE(T)                                                              \
  template void conv2d_forward<T>(T*, const T*, const T*, ConvShape, T*);                \
  template void conv2d_backward<T>(T*, T*, const T*, const T*, const T*, ConvShape, T*); \
  template void conv2d_forward_ref<T>(T*, const T*, const T*, ConvShape);                \
  template void conv2d_backward_ref<T>(T*, T*, const T*, const T*, const T*, ConvShape);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
