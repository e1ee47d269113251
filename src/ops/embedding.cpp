#include "ops/embedding.h"

#include <algorithm>
#include <vector>

namespace gmlp {

template <class T>
void embedding_forward(T* x, const int32_t* ids, const uint8_t* segs, const T* table, const T* pos, const T* seg_table,
                       int64_t N, int64_t B, int64_t D) {
  const int64_t M = N * B;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {  // token-major row r = n·B + b holds ids[b·N + n]
    const int64_t n = r / B, b = r % B;
    const T* e = table + int64_t(ids[b * N + n]) * D;
    const T* p = pos ? pos + n * D : nullptr;
    const T* s = seg_table ? seg_table + int64_t(segs[b * N + n]) * D : nullptr;
    for (int64_t d = 0; d < D; ++d) x[r * D + d] = e[d] + (p ? p[d] : T(0)) + (s ? s[d] : T(0));
  }
}

template <class T>
void embedding_backward(T* dtable, T* dpos, T* dseg_table, const T* dx, const int32_t* ids, const uint8_t* segs,
                        int64_t N, int64_t B, int64_t D) {
  // fwd: x[n, b] = E[ids[b, n]] + pos[n] + seg[segs[b, n]]
  //  =>  dE[ids[b, n]] += dx[n, b];  dpos[n] += dx[n, b];  dseg[segs[b, n]] += dx[n, b]
  // Rows with the same id add into the same table row, so threads split the D channels, not the
  // rows (blocks of a cache line); each element adds its rows in row order for any thread count.
  const int64_t M = N * B;
  constexpr int64_t kBlock = 64 / sizeof(T);
#pragma omp parallel for schedule(static)
  for (int64_t d0 = 0; d0 < D; d0 += kBlock) {
    const int64_t d1 = std::min(D, d0 + kBlock);
    for (int64_t r = 0; r < M; ++r) {
      const int64_t n = r / B, b = r % B;
      T* ge = dtable + int64_t(ids[b * N + n]) * D;
      T* gp = dpos ? dpos + n * D : nullptr;
      T* gs = dseg_table ? dseg_table + int64_t(segs[b * N + n]) * D : nullptr;
      for (int64_t d = d0; d < d1; ++d) {
        ge[d] += dx[r * D + d];
        if (gp) gp[d] += dx[r * D + d];
        if (gs) gs[d] += dx[r * D + d];
      }
    }
  }
}

template <class T>
void embedding_forward_ref(T* x, const int32_t* ids, const uint8_t* segs, const T* table, const T* pos,
                           const T* seg_table, int64_t N, int64_t B, int64_t D) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t d = 0; d < D; ++d) {
        double v = table[int64_t(ids[b * N + n]) * D + d];
        if (pos) v += double(pos[n * D + d]);
        if (seg_table) v += double(seg_table[int64_t(segs[b * N + n]) * D + d]);
        x[(n * B + b) * D + d] = T(v);
      }
}

namespace {

// dst[key[i]] += Σ over the positions i (of n, position i's gradient row at dx + row(i)·D)
// holding that key, in double, each key's sum added once.
template <class T, class Key, class Row>
void gather_add(T* dst, const Key* key, int64_t n, Row row, const T* dx, int64_t D) {
  std::vector<double> acc(static_cast<size_t>(D));
  for (int64_t i = 0; i < n; ++i) {
    if (std::find(key, key + i, key[i]) != key + i) continue;  // its key was summed already
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t j = i; j < n; ++j)
      if (key[j] == key[i])
        for (int64_t d = 0; d < D; ++d) acc[size_t(d)] += double(dx[row(j) * D + d]);
    for (int64_t d = 0; d < D; ++d) dst[int64_t(key[i]) * D + d] += T(acc[size_t(d)]);
  }
}

}  // namespace

template <class T>
void embedding_backward_ref(T* dtable, T* dpos, T* dseg_table, const T* dx, const int32_t* ids, const uint8_t* segs,
                            int64_t N, int64_t B, int64_t D) {
  // ids and segs are (B, N): position i = b·N + n reads x's row n·B + b.
  auto row = [&](int64_t i) { return (i % N) * B + i / N; };
  gather_add(dtable, ids, N * B, row, dx, D);
  if (dseg_table) gather_add(dseg_table, segs, N * B, row, dx, D);
  if (dpos)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t b = 0; b < B; ++b) acc += double(dx[(n * B + b) * D + d]);
        dpos[n * D + d] += T(acc);
      }
}

#define GMLP_INSTANTIATE(T)                                                                                         \
  template void embedding_forward<T>(T*, const int32_t*, const uint8_t*, const T*, const T*, const T*, int64_t,     \
                                     int64_t, int64_t);                                                             \
  template void embedding_backward<T>(T*, T*, T*, const T*, const int32_t*, const uint8_t*, int64_t, int64_t,       \
                                      int64_t);                                                                     \
  template void embedding_forward_ref<T>(T*, const int32_t*, const uint8_t*, const T*, const T*, const T*, int64_t, \
                                         int64_t, int64_t);                                                         \
  template void embedding_backward_ref<T>(T*, T*, T*, const T*, const int32_t*, const uint8_t*, int64_t, int64_t,   \
                                          int64_t);
GMLP_INSTANTIATE(float)
GMLP_INSTANTIATE(double)

}  // namespace gmlp
