#include "core/matmul.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/threads.h"
#include "core/write.h"

namespace gmlp {

namespace {

Precision g_precision = Precision::f32;

struct Key {
  bool ta, tb;
  Write c_write;
  int64_t M, N, K, lda, ldb, ldc;
  auto tie() const { return std::tie(ta, tb, c_write, M, N, K, lda, ldb, ldc); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Cached {
  dnnl::matmul prim;
  dnnl::memory a, b, c;
};

struct Engine {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{eng};
  std::map<Key, Cached> cache;
  std::vector<uint16_t> scratch_a, scratch_b;  // bf16 copies of the operands; grow, never shrink
  std::vector<float> scratch_sums;             // split-K products: one M × N sum per thread
  std::vector<float> scratch_out;              // C's floats, for a C stored as bf16 by another product
};

// One per thread: ops that run many small products in parallel (attention's (image, head)
// pairs) call matmul from inside a parallel region, so the bf16 scratch copies, the primitive
// cache and the stream must not be shared.
Engine& engine() {
  thread_local Engine e;
  return e;
}

// A rows×cols matrix (row stride ld) as a oneDNN memory descriptor of the *logical* shape
// (M×K for A, K×N for B): transposition is only a change of strides.
dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, int64_t ld, bool trans, dnnl::memory::data_type dt) {
  // Stored matrix: (trans ? cols×rows : rows×cols) with row stride ld.
  const dnnl::memory::dims dims = {rows, cols};
  const dnnl::memory::dims strides = trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1};
  return dnnl::memory::desc(dims, dt, strides);
}

// Rounds a stored (r×c, stride ld) float matrix into a dense bf16 one (stride c), as an op storing
// a bf16 activation rounds (gemm::round_to_bf16), so that a product gives the same bits on either.
void to_bf16(uint16_t* dst, const float* src, int64_t r, int64_t c, int64_t ld) {
  gemm::round_rows_to_bf16(dst, c, src, ld, r, c);
}

}  // namespace

void set_matmul_precision(Precision p) { g_precision = p; }
const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "f32"; }

Precision use_precision(const std::string& name) {
  Precision p;
  if (name == "f32" || name == "fp32")
    p = Precision::f32;
  else if (name == "bf16")
    p = Precision::bf16;
  else if (name == "auto")
    p = auto_precision();
  else
    fail("unknown precision '", name, "': expected f32, bf16 or auto");
  if (p == Precision::bf16 && !cpu_has_bf16()) {
    if (gemm::bf16_available()) {  // the tests' emulation (gemm::set_bf16_emulated)
      std::fprintf(stderr,
                   "gmlp: notice: this CPU has no native bf16; bf16 runs emulated (for tests), slower than f32\n");
    } else {
      std::fprintf(stderr, "gmlp: notice: this CPU has no native bf16 (AVX512-BF16 or AMX); using f32\n");
      p = Precision::f32;
    }
  }
  set_matmul_precision(p);
  return p;
}
Precision matmul_precision() { return g_precision; }

Precision auto_precision() { return gemm::amx_available() ? Precision::bf16 : Precision::f32; }

namespace {
bool g_bf16_activations = true;
}  // namespace
void set_bf16_activations(bool on) { g_bf16_activations = on; }
bool bf16_activations() { return g_bf16_activations && g_precision == Precision::bf16 && gemm::bf16_available(); }

namespace {
Bf16Engine g_bf16_engine = Bf16Engine::automatic;
// Whether bf16 products run gmlp's own kernel (else oneDNN's primitive).
bool own_bf16() {
  if (g_bf16_engine != Bf16Engine::automatic) return g_bf16_engine == Bf16Engine::gmlp;
  return gemm::bf16_available();
}
}  // namespace
void set_bf16_engine(Bf16Engine e) {
  GMLP_CHECK(e != Bf16Engine::gmlp || gemm::bf16_available());
  g_bf16_engine = e;
}
Bf16Engine bf16_engine() { return g_bf16_engine; }
const char* bf16_engine_name() { return own_bf16() ? "gmlp" : "onednn"; }

Bf16Engine use_bf16_engine(const std::string& name) {
  Bf16Engine e;
  if (name == "auto")
    e = Bf16Engine::automatic;
  else if (name == "gmlp")
    e = Bf16Engine::gmlp;
  else if (name == "onednn")
    e = Bf16Engine::onednn;
  else
    fail("unknown bf16 engine '", name, "': expected auto, gmlp or onednn");
  if (e == Bf16Engine::gmlp && !gemm::bf16_available())
    fail("--bf16-engine gmlp: gmlp's own bf16 product needs AVX512-BF16, which this CPU does not have");
  set_bf16_engine(e);
  return e;
}

bool cpu_has_bf16() {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx512_bf16 || cpu.amx_bf16;
}

namespace {

// An epilogue on rows [r0, r1) of a C made whole by a product that cannot call it block by block
// (oneDNN's): in blocks of rows shared by the threads (outside a parallel region), not on one.
void apply_epilogue(const gemm::Epilogue& epilogue, float* C, int64_t ldc, int64_t r0, int64_t r1, int64_t N) {
  constexpr int64_t kRows = 16;
  const int64_t blocks = (r1 - r0 + kRows - 1) / kRows;
  parallel_for_if(!omp_in_parallel() && blocks > 1, blocks, [&](int64_t k) {
    const int64_t b0 = r0 + k * kRows;
    epilogue(gemm::Block{C + b0 * ldc, ldc, b0, std::min(r1, b0 + kRows), 0, N});
  });
}

// The f32 product: gmlp's own (core/gemm.h) where the CPU has AVX2 or AVX-512, which allocates
// nothing once a shape has been seen and starts no nested team; oneDNN's sgemm otherwise.
void f32_product(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Operand<float> a, int64_t lda,
                 Operand<float> b, int64_t ldb, bool accumulate, Output<float> out, int64_t ldc,
                 const gemm::Epilogue* epilogue) {
  const float *A = a.data(), *B = b.data();
  float* C = out.data();
  if (gemm::available()) return gemm::sgemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc, epilogue);
  // A product too small to pay for waking the other threads runs on this one, as gemm's.
  const int threads = omp_get_max_threads();
  const bool serial = M * N * K <= gemm::kSerialProduct && threads > 1;
  if (serial) omp_set_num_threads(1);
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, 1.f, A, lda, B, ldb,
                                      accumulate ? 1.f : 0.f, C, ldc);
  if (serial) omp_set_num_threads(threads);
  GMLP_CHECK(st == dnnl_success);
  if (epilogue) apply_epilogue(*epilogue, C, ldc, 0, M, N);
}

// C = op(A)·op(B) (+ C) in bf16 × bf16 → f32 by a oneDNN matmul primitive, created on first use
// of a shape and cached. A, B are bf16 (uint16) matrices; strides describe them as stored.
void run_primitive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const void* A, int64_t lda,
                   const void* B, int64_t ldb, Write c_write, float* C, int64_t ldc) {
  Engine& e = engine();
  const Key key{trans_a, trans_b, c_write, M, N, K, lda, ldb, ldc};
  auto it = e.cache.find(key);
  if (it == e.cache.end()) {
    using dt = dnnl::memory::data_type;
    const auto a = matrix_desc(M, K, lda, trans_a, dt::bf16);
    const auto b = matrix_desc(K, N, ldb, trans_b, dt::bf16);
    const auto c = dnnl::memory::desc({M, N}, dt::f32, dnnl::memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (c_write == Write::accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.f);
      attr.set_post_ops(ops);
    }
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc pd(e.eng, a, b, c, attr);
#else
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, e.eng);
#endif
    Cached entry{dnnl::matmul(pd), dnnl::memory(a, e.eng, DNNL_MEMORY_NONE), dnnl::memory(b, e.eng, DNNL_MEMORY_NONE),
                 dnnl::memory(c, e.eng, DNNL_MEMORY_NONE)};
    it = e.cache.emplace(key, std::move(entry)).first;
  }
  Cached& m = it->second;
  m.a.set_data_handle(const_cast<void*>(A));
  m.b.set_data_handle(const_cast<void*>(B));
  m.c.set_data_handle(C);
  // The C API takes the arguments as an array: no map is built per call.
  const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, m.a.get()}, {DNNL_ARG_WEIGHTS, m.b.get()}, {DNNL_ARG_DST, m.c.get()}};
  GMLP_CHECK(dnnl_primitive_execute(m.prim.get(), e.stream.get(), 3, args) == dnnl_success);
  GMLP_CHECK(dnnl_stream_wait(e.stream.get()) == dnnl_success);
}

// A small output and a long sum, in two shapes: C = A·Bᵀ (+ C), the spatial weight gradient
// dW = dg·v̂ᵀ of a gating unit run on the whole batch (N × N, K = batch × channels), and C = Aᵀ·B
// (+ C), a linear layer's weight gradient dW = dyᵀ·x (K = the batch's rows). A single product
// splits such a shape across threads badly: it gives each thread rows or columns of C, so every
// thread packs the whole of the other operand again, and C·Bᵀ's rows, K floats apart, map to the
// same cache sets (196 × 196 × 3072 measured at 78 GFLOP/s on two threads with oneDNN's sgemm, 85
// on one; about 100 with core/gemm.h). Here each thread takes whole chunks of the sum, multiplies
// them single-threaded into its own M × N sum, and the sums are added at the end (in thread
// order: deterministic for a given thread count). A·Bᵀ's chunks are kChunk columns, copied
// densely first (160 GFLOP/s on that shape, two threads); Aᵀ·B's are each thread's block of rows,
// read in place, so nothing is packed twice.
constexpr int64_t kChunk = 512;

bool split_k_pays(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int threads) {
  if (threads < 2 || omp_in_parallel() || M * N > 256 * 256) return false;
  if (!trans_a && trans_b) return K >= 8 * std::max(M, N) && K >= 2 * kChunk;
  return trans_a && !trans_b && K >= 4 * std::max(M, N);
}

// A product of the precision in use: f32_product, gemm::bf16gemm or onednn_bf16_product (each runs
// on the calling thread alone inside a parallel region).
using Product = void (*)(bool, bool, int64_t, int64_t, int64_t, Operand<float>, int64_t, Operand<float>, int64_t, bool,
                         Output<float>, int64_t, const gemm::Epilogue*);

// Columns [k0, k0 + w) of the rows of X (row stride ld) copied densely into dst (row stride w), as
// they are stored: floats, or bf16 in the first half of dst.
Operand<float> dense_columns(float* dst, Operand<float> X, int64_t rows, int64_t ld, int64_t k0, int64_t w) {
  const size_t size = X.is_bf16() ? sizeof(uint16_t) : sizeof(float);
  const char* src = static_cast<const char*>(X.address());
  char* d = reinterpret_cast<char*>(dst);
  for (int64_t i = 0; i < rows; ++i) std::memcpy(d + size_t(i * w) * size, src + size_t(i * ld + k0) * size, w * size);
  return stored(dst, X.is_bf16());
}

void matmul_split_k(Product product, bool trans_a, int64_t M, int64_t N, int64_t K, Operand<float> A, int64_t lda,
                    Operand<float> B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int threads = omp_get_max_threads();
  std::vector<float>& sums = engine().scratch_sums;
  if (sums.size() < size_t(threads * M * N)) sums.resize(size_t(threads * M * N));
  // The team the runtime gives, which may be smaller than asked for (OMP_DYNAMIC): the rows are
  // cut, and the sums added, by its size: set by the region's `single`.
  int team = 0;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#pragma omp single nowait
    team = nt;
    float* sum = sums.data() + int64_t(t) * M * N;
    bool summed = false;  // the first chunk a thread takes overwrites its sum
    if (trans_a) {        // C = Aᵀ·B: this thread's block of rows of both, in place
      const int64_t k0 = K * t / nt, k1 = K * (t + 1) / nt;
      if (k0 < k1) {
        product(true, false, M, N, k1 - k0, A.from(k0 * lda), lda, B.from(k0 * ldb), ldb, false, sum, N, nullptr);
        summed = true;
      }
    } else {  // C = A·Bᵀ: chunks of kChunk columns of both, copied densely as stored
      thread_local std::vector<float> a, b;
      a.resize(size_t(M * kChunk)), b.resize(size_t(N * kChunk));
      const int64_t chunks = (K + kChunk - 1) / kChunk;
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t k0 = c * kChunk, w = std::min(kChunk, K - k0);
        product(false, true, M, N, w, dense_columns(a.data(), A, M, lda, k0, w), w,
                dense_columns(b.data(), B, N, ldb, k0, w), w, summed, sum, N, nullptr);
        summed = true;
      }
    }
    if (!summed) std::fill(sum, sum + M * N, 0.f);  // more threads than chunks
  }
  // Row by row, one thread's sum at a time, so that the loop over the row's columns is the inner
  // one and vectorises (with the threads' loop inside it, it ran scalar: 1.5 % of a bf16 step).
  // The same additions in the same order as element by element.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    float* __restrict c = C + i * ldc;
    const float* s = sums.data() + i * N;
    if (beta == 0.f) {
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) c[j] = 0.f + s[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) c[j] += s[j];
    }
    for (int t = 1; t < team; ++t) {
      const float* __restrict st = s + int64_t(t) * M * N;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) c[j] += st[j];
    }
  }
}

// How an operand held constant is kept: packed for gmlp's own product (in its f32 or bf16 format)
// as the A or the B it is, or rounded once into the dense bf16 copy oneDNN's primitive reads
// (what the product would otherwise round into scratch on every call: the same copy, so the same
// bits).
enum class Form { f32_pack, bf16_pack, bf16_dense };
struct Kept {
  std::unique_ptr<gemm::Packed> pack;
  std::vector<uint16_t> dense;
  bool stale = false;  // its range's ConstantForCall has ended: made again, in place, on next use
  size_t bytes() const { return pack ? pack->bytes() : dense.size() * sizeof(uint16_t); }
};

// The ranges held constant, and the kept forms of the operands met in them, keyed by where the
// operand lies, how it is read and the form. Guarded by the mutex; `held` lets products skip the
// lock when none is held.
struct Constants {
  struct Key {
    const float* x;
    gemm::Side side;
    bool trans;
    Form form;
    int64_t r, c, ld;
    auto tie() const { return std::tie(x, side, trans, form, r, c, ld); }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
  };
  // A ConstantForCall's range stays in the map between its calls, inactive, so that a call
  // inserts no node (a training step allocates nothing).
  struct Range {
    const float* end;
    bool active;
  };
  std::mutex mutex;
  std::atomic<int> held{0};              // active ranges
  std::map<const float*, Range> ranges;  // by begin
  std::map<Key, Kept> kept;
};

Constants& constants() {
  static Constants c;
  return c;
}

// Frees the kept forms of operands lying in [begin, end); c's mutex held.
void erase_kept(Constants& c, const float* begin, const float* end) {
  for (auto it = c.kept.begin(); it != c.kept.end();)
    it = it->first.x >= begin && it->first.x < end ? c.kept.erase(it) : std::next(it);
}

// Forgets the inactive ranges that begin in [begin, end); c's mutex held.
void erase_inactive(Constants& c, const float* begin, const float* end) {
  for (auto it = c.ranges.lower_bound(begin); it != c.ranges.end() && it->first < end;)
    it = it->second.active ? std::next(it) : c.ranges.erase(it);
}

// The kept form of the operand op(X) on `side` (r × c, X stored c × r when trans, row stride ld),
// made on first use, where X lies in a constant range; else null. A dense copy is just the stored
// matrix rounded, the same for either side.
const Kept* constant_form(Form form, gemm::Side side, bool trans, int64_t r, int64_t c, const float* X, int64_t ld) {
  Constants& cs = constants();
  if (cs.held.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(cs.mutex);
  auto range = cs.ranges.upper_bound(X);
  if (range == cs.ranges.begin()) return nullptr;
  --range;  // the last range starting at or before X
  // One past op(X)'s last element.
  const float* last = trans ? X + (c - 1) * ld + r : X + (r - 1) * ld + c;
  if (!range->second.active || last > range->second.end) return nullptr;
  if (form == Form::bf16_dense) side = gemm::Side::a;  // one copy serves both
  Kept& k = cs.kept[Constants::Key{X, side, trans, form, r, c, ld}];
  if ((k.pack || !k.dense.empty()) && !k.stale) return &k;
  if (form == Form::bf16_dense) {
    const int64_t rows = trans ? c : r, cols = trans ? r : c;  // as stored
    k.dense.resize(size_t(rows * cols));
    to_bf16(k.dense.data(), X, rows, cols, ld);
  } else if (k.pack) {
    k.pack->repack(X, ld);
  } else {
    k.pack = std::make_unique<gemm::Packed>(side, form == Form::bf16_pack, trans, r, c, X, ld);
  }
  k.stale = false;
  return &k;
}

// The bf16 product by oneDNN's bf16 × bf16 → f32 primitive (on AMX its tile kernels): an operand
// stored as bf16 is read as it is, a float one as the dense bf16 copy the primitive reads, kept
// once for a constant (the gate's token-mixing weight, an inference process's weights) or else
// rounded into this thread's scratch on every call. A bf16 operand whose rows lie apart (a head's
// columns of attention's qkv) is copied densely too: on AMX, oneDNN 2.6.3's kernels gave other bits
// on such a strided operand than on the dense copy of the same values, which a float operand's
// rounding makes. The epilogue follows on the whole of C.
void onednn_bf16_product(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Operand<float> A, int64_t lda,
                         Operand<float> B, int64_t ldb, bool accumulate, Output<float> out, int64_t ldc,
                         const gemm::Epilogue* epilogue) {
  Engine& e = engine();
  float* C = out.data();
  // op(X) (r × c) as the primitive reads it; ld becomes the dense copy's width.
  auto operand = [](Operand<float> X, bool trans, int64_t r, int64_t c, int64_t& ld,
                    std::vector<uint16_t>& scratch) -> const void* {
    const int64_t rows = trans ? c : r, cols = trans ? r : c, from = ld;  // as stored
    if (X.is_bf16() && ld == cols) return X.address();
    ld = cols;
    if (!X.is_bf16())
      if (const Kept* k = constant_form(Form::bf16_dense, gemm::Side::a, trans, r, c, X.data(), from))
        return k->dense.data();
    if (scratch.size() < size_t(rows * cols)) scratch.resize(size_t(rows * cols));
    if (X.is_bf16()) return dense_columns(reinterpret_cast<float*>(scratch.data()), X, rows, from, 0, cols).address();
    to_bf16(scratch.data(), X.data(), rows, cols, from);
    return scratch.data();
  };
  int64_t a_ld = lda, b_ld = ldb;
  const void* a = operand(A, trans_a, M, K, a_ld, e.scratch_a);
  const void* b = operand(B, trans_b, K, N, b_ld, e.scratch_b);
  run_primitive(trans_a, trans_b, M, N, K, a, a_ld, b, b_ld, accumulate ? Write::accumulate : Write::overwrite, C, ldc);
  if (epilogue) apply_epilogue(*epilogue, C, ldc, 0, M, N);
}

}  // namespace

void hold_constant(const float* begin, const float* end) {
  Constants& c = constants();
  std::lock_guard<std::mutex> lock(c.mutex);
  erase_inactive(c, begin, end);  // a ConstantForCall's, which would hide this range from its products
  if (c.ranges.emplace(begin, Constants::Range{end, true}).second) c.held.fetch_add(1, std::memory_order_release);
}

void release_constant(const float* begin) {
  Constants& c = constants();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto range = c.ranges.find(begin);
  if (range == c.ranges.end() || !range->second.active) return;
  erase_kept(c, range->first, range->second.end);
  c.ranges.erase(range);
  c.held.fetch_sub(1, std::memory_order_release);
}

void drop_packs(const float* begin, const float* end) {
  Constants& c = constants();
  std::lock_guard<std::mutex> lock(c.mutex);
  erase_kept(c, begin, end);
  erase_inactive(c, begin, end);
}

ConstantForCall::ConstantForCall(const float* begin, const float* end) {
  Constants& c = constants();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto after = c.ranges.upper_bound(begin);
  if (after != c.ranges.begin()) {
    const Constants::Range& r = std::prev(after)->second;
    if (r.active && r.end >= end) return;  // held already (a frozen model's weights)
  }
  Constants::Range& r = c.ranges.try_emplace(begin, Constants::Range{end, false}).first->second;
  if (r.active) return;  // a shorter range held from the same start: left as it is
  r = {end, true};
  c.held.fetch_add(1, std::memory_order_release);
  begin_ = begin;
}

ConstantForCall::~ConstantForCall() {
  if (!begin_) return;
  Constants& c = constants();
  std::lock_guard<std::mutex> lock(c.mutex);
  Constants::Range& r = c.ranges.find(begin_)->second;
  for (auto& [key, k] : c.kept)
    if (key.x >= begin_ && key.x < r.end) k.stale = true;
  r.active = false;
  c.held.fetch_sub(1, std::memory_order_release);
}

size_t constant_pack_bytes() {
  Constants& c = constants();
  std::lock_guard<std::mutex> lock(c.mutex);
  size_t bytes = 0;
  for (const auto& [key, k] : c.kept) bytes += k.bytes();
  return bytes;
}

template <>
void matmul<float>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Operand<float> A, int64_t lda,
                   Operand<float> B, int64_t ldb, float beta, Output<float> out, int64_t ldc,
                   const gemm::Epilogue* epilogue) {
  if (M == 0 || N == 0) return;
  GMLP_CHECK(beta == 0.f || beta == 1.f);
  GMLP_CHECK(!(out.is_bf16() && beta != 0.f));
  // gmlp's own products: f32, and bf16 where the CPU has AVX512-BF16 but no AMX (on AMX, oneDNN's
  // tile kernels are faster than any vdpbf16ps kernel), or as set_bf16_engine says. An operand
  // stored as bf16 makes the product bf16 (it exists only in bf16 precision). Either engine's
  // weight gradients split their long sum across the threads (matmul_split_k), on operands stored
  // as bf16 or not alike, so that a stored operand keeps the bits of its floats.
  const bool bf16 = g_precision == Precision::bf16 || A.is_bf16() || B.is_bf16();
  const Product product = !bf16 ? f32_product : own_bf16() ? gemm::bf16gemm : onednn_bf16_product;
  auto split = [&] { return split_k_pays(trans_a, trans_b, M, N, K, omp_get_max_threads()); };
  if (out.is_bf16() && (product != gemm::bf16gemm || K == 0 || split())) {
    // C stored as bf16 where the product writes only floats: made in floats, then rounded, the
    // bits gmlp's own bf16 product gives block by block.
    std::vector<float>& c = engine().scratch_out;
    if (c.size() < size_t(M * N)) c.resize(size_t(M * N));
    matmul<float>(trans_a, trans_b, M, N, K, A, lda, B, ldb, 0.f, c.data(), N, epilogue);
    return gemm::round_rows_to_bf16(out.bf16_data(), ldc, c.data(), N, M, N);
  }
  if (K == 0) {  // an empty sum: C = beta·C
    float* C = out.data();
    if (beta == 0.f)
      for (int64_t i = 0; i < M; ++i) std::memset(C + i * ldc, 0, N * sizeof(float));
    if (epilogue) (*epilogue)(gemm::Block{C, ldc, 0, M, 0, N});
    return;
  }
  // An operand held constant, packed once for gmlp's own products (oneDNN's keeps its dense copy):
  // a layer's weights as B, the gate's token-mixing weight as A.
  const bool own = bf16 ? product == gemm::bf16gemm : gemm::available();  // f32 without gemm is oneDNN's sgemm
  const Form pack = bf16 ? Form::bf16_pack : Form::f32_pack;
  if (own && !B.is_bf16())
    if (const Kept* k = constant_form(pack, gemm::Side::b, trans_b, K, N, B.data(), ldb))
      return gemm::multiply(trans_a, M, A, lda, *k->pack, beta != 0.f, out, ldc, epilogue);
  if (own && !A.is_bf16())
    if (const Kept* k = constant_form(pack, gemm::Side::a, trans_a, M, K, A.data(), lda))
      return gemm::multiply(*k->pack, trans_b, N, B, ldb, beta != 0.f, out, ldc, epilogue);
  if (!split()) return product(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta != 0.f, out, ldc, epilogue);
  float* C = out.data();
  matmul_split_k(product, trans_a, M, N, K, A, lda, B, ldb, beta, C, ldc);
  if (epilogue) apply_epilogue(*epilogue, C, ldc, 0, M, N);
}

template <>
void matmul<double>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, Operand<double> a, int64_t lda,
                    Operand<double> b, int64_t ldb, double beta, Output<double> out, int64_t ldc,
                    const gemm::Epilogue* epilogue) {
  const double *A = a.data(), *B = b.data();
  double* C = out.data();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      C[i * ldc + j] = acc + (beta == 0 ? 0.0 : beta * C[i * ldc + j]);
    }
  if (epilogue) (*epilogue)(gemm::Block{C, ldc, 0, M, 0, N});
}

}  // namespace gmlp
