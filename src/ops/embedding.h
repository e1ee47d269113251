// The text models' input embedding (BERT, Devlin et al. 2019, §3): each token's row of the
// embedding table E, plus a learned position row and a segment (token-type) row when the model
// has them, written token-major:
//   x[n, b] = E[ids[b, n]] + pos[n] + seg[segs[b, n]]
// Backward scatters: every table row accumulates the gradients of the positions that read it.
#pragma once

#include <cstdint>

namespace gmlp {

// x: (N, B, D) overwritten; ids: (B, N) row-major, each in [0, V) (not checked here); segs:
// (B, N) segment of each token, or nullptr with seg_table; table: (V, D); pos: (N, D) or
// nullptr; seg_table: (2, D) (any row count covering segs) or nullptr.
template <class T>
void embedding_forward(T* x, const int32_t* ids, const uint8_t* segs, const T* table, const T* pos, const T* seg_table,
                       int64_t N, int64_t B, int64_t D);

// Accumulates: dtable (V, D) += dx rows scattered by id; dpos (N, D) += Σ_b dx[n, b] and
// dseg_table (·, D) += dx rows scattered by segment, each skipped when nullptr. dx: (N, B, D).
template <class T>
void embedding_backward(T* dtable, T* dpos, T* dseg_table, const T* dx, const int32_t* ids, const uint8_t* segs,
                        int64_t N, int64_t B, int64_t D);

// Plain loops in double; the backward gathers (each table row sums the positions that read it),
// the fast one scatters. Same contracts.
template <class T>
void embedding_forward_ref(T* x, const int32_t* ids, const uint8_t* segs, const T* table, const T* pos,
                           const T* seg_table, int64_t N, int64_t B, int64_t D);
template <class T>
void embedding_backward_ref(T* dtable, T* dpos, T* dseg_table, const T* dx, const int32_t* ids, const uint8_t* segs,
                            int64_t N, int64_t B, int64_t D);

}  // namespace gmlp
