#include "core/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/gemm_kernel.h"

namespace gmlp::gemm {

namespace {

// Blocking (Goto/BLIS): a KC-deep slice of op(B), KC × NC, is packed into NR-wide panels shared by
// the threads; each thread packs MC × KC of op(A) into MR-row panels of its own and runs the
// kernel over every (A panel, B panel) pair. KC × NR of B (16 KiB at NR 16) stays in L1 while a
// thread's A block (96 KiB) sits in L2.
constexpr int64_t kKC = 256, kMC = 96, kNC = 3072;
static_assert(kMC % kMR == 0);

struct Isa {
  Kernel kernel = nullptr;
  int64_t nr = 0;
  const char* name = "none";
};

const Isa& isa() {
  static const Isa chosen = [] {
    const CpuFeatures& f = cpu_features();
    if (f.avx512f) return Isa{tile_avx512, kNRAvx512, "avx512"};
    if (f.avx2) return Isa{tile_avx2, kNRAvx2, "avx2"};
    return Isa{};
  }();
  return chosen;
}

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Floats, 64-byte aligned, grown to the largest size asked for and then kept.
class Buffer {
 public:
  float* get(int64_t n) {
    if (n > size_) {
      data_.reset(static_cast<float*>(std::aligned_alloc(64, size_t(round_up(n * 4, 64)))));
      if (!data_) throw std::bad_alloc();
      size_ = n;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  int64_t size_ = 0;
};

// An operand as a strided view: element (r, c) at p[r·rs + c·cs].
struct View {
  const float* p;
  int64_t rs, cs;
  float at(int64_t r, int64_t c) const { return p[r * rs + c * cs]; }
};

// Rows [0, rows) × depth [0, kc) of op(A) into MR-row panels: panel t holds a[k·MR + i] for its
// rows t·MR + i, zero beyond `rows`.
void pack_a(float* dst, View a, int64_t rows, int64_t kc) {
  for (int64_t t = 0; t < rows; t += kMR, dst += kMR * kc) {
    const int64_t n = std::min<int64_t>(kMR, rows - t);
    for (int64_t k = 0; k < kc; ++k) {
      float* d = dst + k * kMR;
      for (int64_t i = 0; i < n; ++i) d[i] = a.at(t + i, k);
      for (int64_t i = n; i < kMR; ++i) d[i] = 0.f;
    }
  }
}

// Depth [0, kc) × columns [0, cols) of op(B), cols ≤ NR, as one panel b[k·NR + j], zero beyond.
void pack_b(float* dst, View b, int64_t kc, int64_t cols, int64_t nr) {
  for (int64_t k = 0; k < kc; ++k) {
    float* d = dst + k * nr;
    if (b.cs == 1 && cols == nr) {
      std::memcpy(d, b.p + k * b.rs, size_t(nr) * sizeof(float));
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) d[j] = b.at(k, j);
    for (int64_t j = cols; j < nr; ++j) d[j] = 0.f;
  }
}

// C[0, rows) × [j0, j1) of a block, from its packed A (rows × kc) and packed B (kc × nc).
void macro(const Isa& isa, int64_t rows, int64_t nc, int64_t kc, const float* ap, const float* bp, float* c,
           int64_t ldc, bool accumulate, int64_t j0, int64_t j1) {
  alignas(64) float edge[kMR * kNRAvx512];
  for (int64_t j = j0; j < j1; j += isa.nr) {
    const int64_t cols = std::min(isa.nr, nc - j);
    for (int64_t i = 0; i < rows; i += kMR) {
      const int64_t n = std::min<int64_t>(kMR, rows - i);
      const float* a = ap + i * kc;
      const float* b = bp + j * kc;
      float* cc = c + i * ldc + j;
      if (n == kMR && cols == isa.nr) {
        isa.kernel(kc, a, b, cc, ldc, accumulate);
        continue;
      }
      // An edge tile: the same sums into a scratch tile, then added or copied (one rounding of
      // C + sum, as the kernel's).
      isa.kernel(kc, a, b, edge, isa.nr, false);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t q = 0; q < cols; ++q)
          cc[r * ldc + q] = accumulate ? cc[r * ldc + q] + edge[r * isa.nr + q] : edge[r * isa.nr + q];
    }
  }
}

struct Problem {
  int64_t M, N, K;
  View a, b;
  bool accumulate;
  float* C;
  int64_t ldc;
  int64_t mc;    // rows of A a thread packs at a time
  bool by_rows;  // threads take blocks of rows; otherwise (few rows) ranges of column panels
  float* bp;     // the shared packed B
};

void body(const Problem& p, int tid, int threads) {
  const Isa& k = isa();
  thread_local Buffer a_buffer;
  const int64_t a_rows = p.by_rows ? p.mc : round_up(p.M, kMR);
  float* ap = a_buffer.get(a_rows * std::min(p.K, kKC));
  const int64_t m_blocks = (p.M + p.mc - 1) / p.mc;
  for (int64_t jc = 0; jc < p.N; jc += kNC) {
    const int64_t nc = std::min(kNC, p.N - jc), panels = (nc + k.nr - 1) / k.nr;
    for (int64_t pc = 0; pc < p.K; pc += kKC) {
      const int64_t kc = std::min(kKC, p.K - pc);
      const bool accumulate = p.accumulate || pc > 0;
      for (int64_t q = tid; q < panels; q += threads)
        pack_b(p.bp + q * k.nr * kc, View{p.b.p + pc * p.b.rs + (jc + q * k.nr) * p.b.cs, p.b.rs, p.b.cs}, kc,
               std::min(k.nr, nc - q * k.nr), k.nr);
      if (threads > 1) {
#pragma omp barrier
      }
      if (p.by_rows) {
        for (int64_t ib = m_blocks * tid / threads; ib < m_blocks * (tid + 1) / threads; ++ib) {
          const int64_t i0 = ib * p.mc, rows = std::min(p.mc, p.M - i0);
          pack_a(ap, View{p.a.p + i0 * p.a.rs + pc * p.a.cs, p.a.rs, p.a.cs}, rows, kc);
          macro(k, rows, nc, kc, ap, p.bp, p.C + i0 * p.ldc + jc, p.ldc, accumulate, 0, nc);
        }
      } else {
        pack_a(ap, View{p.a.p + pc * p.a.cs, p.a.rs, p.a.cs}, p.M, kc);
        const int64_t q0 = panels * tid / threads, q1 = panels * (tid + 1) / threads;
        macro(k, p.M, nc, kc, ap, p.bp, p.C + jc, p.ldc, accumulate, q0 * k.nr, std::min(nc, q1 * k.nr));
      }
      if (threads > 1) {
#pragma omp barrier
      }
    }
  }
}

}  // namespace

bool available() { return isa().kernel != nullptr; }
const char* kernel_name() { return isa().name; }

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
           int64_t ldb, bool accumulate, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::memset(C + i * ldc, 0, size_t(N) * sizeof(float));
    return;
  }
  const Isa& k = isa();
  GMLP_CHECK(k.kernel != nullptr);
  int threads = omp_in_parallel() || M * N * K <= kSerialProduct ? 1 : omp_get_max_threads();
  Problem p{M,
            N,
            K,
            View{A, trans_a ? 1 : lda, trans_a ? lda : 1},
            View{B, trans_b ? 1 : ldb, trans_b ? ldb : 1},
            accumulate,
            C,
            ldc,
            kMC,
            true,
            nullptr};
  if (threads > 1) {
    p.mc = std::min(kMC, round_up((M + threads - 1) / threads, kMR));
    p.by_rows = (M + p.mc - 1) / p.mc >= threads;
  }
  thread_local Buffer b_buffer;  // the caller's: shared by the team it starts
  p.bp = b_buffer.get(std::min(K, kKC) * round_up(std::min(N, kNC), k.nr));
  if (threads == 1) return body(p, 0, 1);
#pragma omp parallel num_threads(threads)
  body(p, omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace gmlp::gemm
