// The one seam for matrix products. Row-major, BLAS-style:
//   C (M×N, ldc) = alpha · op(A) · op(B) + beta · C,   op(A): M×K, op(B): K×N
// beta = 1 accumulates (backward passes add into gradients). float goes to oneDNN's sgemm;
// double (used only by the finite-difference tests) goes to a plain loop.
#pragma once

#include <cstdint>

namespace gmlp {

template <class T>
void matmul(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
            int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

}  // namespace gmlp
