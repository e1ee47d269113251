// The one seam for matrix products. Row-major, BLAS-style:
//   C (M×N, ldc) = op(A) · op(B) + beta · C,   op(A): M×K, op(B): K×N,  beta ∈ {0, 1}
// beta = 1 accumulates (backward passes add into gradients). float in f32 precision goes to gmlp's own
// product (core/gemm.h), or to oneDNN's sgemm on a CPU without AVX2. In bf16 precision both operands
// are rounded to bfloat16 (to nearest even) and multiplied with fp32 sums into the fp32 C: by
// gemm::bf16gemm, which rounds while it packs, on AMX's tiles where the CPU has them and on
// AVX512-BF16 elsewhere; or by a oneDNN bf16 primitive on rounded copies (set_bf16_engine picks
// either on any CPU with bf16). An operand an op stored as bf16 (core/operand.h) is taken as it
// is, by either. double (finite-difference tests only) is a plain loop.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/gemm.h"
#include "core/operand.h"

namespace gmlp {

enum class Precision { f32, bf16 };

// Precision of the float matrix products that follow (process-wide; default f32).
void set_matmul_precision(Precision p);
Precision matmul_precision();
// Whether this CPU runs bf16 matrix products natively (AVX512-BF16 or AMX).
bool cpu_has_bf16();
// What --precision auto picks: bf16 where gmlp's product can run on AMX's tiles (the CPU has
// them and Linux grants this process their state), which leave fp32 far behind; f32 elsewhere
// (on AVX512-BF16 alone bf16 trains faster too, but by less than its rounding is worth to a
// default; and where AMX is refused, its CPUs' vdpbf16ps runs at half the fp32 FMA's rate).
Precision auto_precision();
// Parses "f32", "bf16" or "auto" (throws gmlp::Error otherwise) and makes it the matmul precision;
// bf16 on a CPU without native support falls back to f32 with a notice on stderr (unless the tests'
// emulation is on: gemm::set_bf16_emulated). Returns what is used.
Precision use_precision(const std::string& name);
const char* precision_name(Precision p);

// Which product computes bf16: gmlp's own (gemm::bf16gemm: AMX's tiles where the CPU has them,
// AVX512-BF16 elsewhere), or oneDNN's matmul primitive (likewise its AMX or AVX512-BF16 kernels).
// automatic (the default): gmlp's own, wherever the CPU has AVX512-BF16 (every AMX CPU has it).
// The others are for measuring one against the other on the same CPU (gmlp bench --bf16-engine,
// the per-op benchmark) and for testing each on any CPU with bf16; both give the exact products
// of the rounded operands.
enum class Bf16Engine { automatic, gmlp, onednn };
void set_bf16_engine(Bf16Engine e);
Bf16Engine bf16_engine();
// Parses "auto", "gmlp" or "onednn" (throws gmlp::Error otherwise) and makes it the bf16 engine.
// gmlp's own needs AVX512-BF16: asked for on a CPU without it, a one-line error.
Bf16Engine use_bf16_engine(const std::string& name);
// The engine that runs bf16 products now ("gmlp" or "onednn").
const char* bf16_engine_name();

// Whether ops store activations that only products read as bfloat16 (core/operand.h): in bf16
// precision, wherever gmlp's bf16 product runs (gemm::bf16_available), whose rounding they share.
// The products give the same bits either way; set_bf16_activations(false) (tests) keeps them as
// floats.
bool bf16_activations();
void set_bf16_activations(bool on);

// n elements of src rounded into the bfloat16 buffer at dst as the products round
// (gemm::round_to_bf16): how an op stores an activation as bf16. float only.
template <class T>
void store_bf16(T* dst, const T* src, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    gemm::round_to_bf16(reinterpret_cast<uint16_t*>(dst), src, n);
  else
    GMLP_CHECK(false);
}

// Weights that stay as they are from now on (ParamModel::freeze: an inference-only model's). A
// product whose B, or else whose A, lies in [begin, end) packs that operand the first time it
// meets it, keeps the pack and reuses it on every later call, until release_constant(begin):
// gmlp's own products (f32, and bf16 on AVX512-BF16 or AMX) in their packed format (gemm::Packed:
// a layer's weights as B, the gate's token-mixing weight as A), oneDNN's bf16 primitive as the
// dense bf16 copy it would otherwise round into on every call. The same bits either way.
// Thread-safe.
void hold_constant(const float* begin, const float* end);
void release_constant(const float* begin);
// Bytes of the packs kept now.
size_t constant_pack_bytes();

// Holds [begin, end) constant while it lives, as hold_constant does, for an op that multiplies by
// the same weight many times in one call: the gate's token-mixing W, once an image, is then
// packed (or, for oneDNN's bf16 primitive, rounded) once a call instead of once an image. Its
// packs outlive it, marked stale, so that the next hold of the same weight packs it again in
// place: once a training step has run, the step allocates nothing. Inside a range held already
// (a frozen model's weights) it does nothing. The weight must not change while it lives.
class ConstantForCall {
 public:
  ConstantForCall(const float* begin, const float* end);
  ~ConstantForCall();
  ConstantForCall(const ConstantForCall&) = delete;
  ConstantForCall& operator=(const ConstantForCall&) = delete;

 private:
  const float* begin_ = nullptr;  // the range it holds; null where it holds none
};
// Frees the packs kept of operands in [begin, end), stale or not, and forgets the ranges of the
// ConstantForCalls that held them: a model's weights, as it goes.
void drop_packs(const float* begin, const float* end);

// epilogue, when given, runs on C once it is final (gemm::Epilogue): block by block inside gmlp's
// own products, on the whole of C after the others.
// An operand stored as bf16 makes the product bf16. C may be stored as bf16 (with beta 0): gmlp's
// own bf16 product rounds each block there after the epilogue, without C's floats reaching
// memory; the others make C in floats first (core/operand.h's Output).
template <class T>
void matmul(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, OperandOf<T> A, int64_t lda, OperandOf<T> B,
            int64_t ldb, T beta, OutputOf<T> C, int64_t ldc, const gemm::Epilogue* epilogue = nullptr);

}  // namespace gmlp
