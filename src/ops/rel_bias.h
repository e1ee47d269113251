// T5's relative position bias (Raffel et al. 2020, §2.1; transformers' T5Attention
// compute_bias): a learned scalar per (bucket, head) added to the attention scores, the bucket
// of each (query, key) pair fixed by their offset (t5_bucket, nn/text_model.h):
//   bias[h, i, j] = table[buckets[i, j], h]
// Backward scatters: each table entry accumulates the score-bias gradient of every pair in its
// bucket.
#pragma once

#include <cstdint>

namespace gmlp {

// bias: (heads, N, N) overwritten; buckets: (N, N), each in [0, number of table rows) (not
// checked here); table: (buckets, heads), torch's nn.Embedding(num_buckets, heads) weight.
template <class T>
void rel_bias_forward(T* bias, const int32_t* buckets, const T* table, int64_t heads, int64_t N);

// dtable (buckets, heads) += Σ over the pairs (i, j) of each bucket of dbias[h, i, j];
// dbias: (heads, N, N).
template <class T>
void rel_bias_backward(T* dtable, const T* dbias, const int32_t* buckets, int64_t heads, int64_t N);

// Plain loops; the backward gathers in double (each table entry sums its bucket's pairs), the
// fast one scatters. Same contracts.
template <class T>
void rel_bias_forward_ref(T* bias, const int32_t* buckets, const T* table, int64_t heads, int64_t N);
template <class T>
void rel_bias_backward_ref(T* dtable, const T* dbias, const int32_t* buckets, int64_t heads, int64_t N);

}  // namespace gmlp
