// A matrix product's operand as it lies in memory: T elements or, for float, bfloat16 ones.
//
// In bf16 precision every product rounds its float operands to bfloat16 anyway, so an activation
// that only products read can be stored rounded by the op that makes it (bf16_activations(),
// core/matmul.h): half the bytes to write and to read back, and no product rounds it again. The
// rounding is the products' own (round_to_bf16, vcvtne2ps2bf16), so a product gives the same bits
// on the stored bf16 as on the floats it was rounded from.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/error.h"

namespace gmlp {

template <class T>
class Operand {
 public:
  Operand(const T* p) : p_(p) {}  // NOLINT(google-explicit-constructor): plain pointers are operands
  // bfloat16 elements (float operands only).
  static Operand bf16(const uint16_t* p) {
    static_assert(std::is_same_v<T, float>, "only float operands are stored as bfloat16");
    Operand o(nullptr);
    o.p_ = p, o.bf16_ = true;
    return o;
  }
  bool is_bf16() const { return bf16_; }
  const void* address() const { return p_; }
  const T* data() const {
    GMLP_CHECK(!bf16_);
    return static_cast<const T*>(p_);
  }
  // The operand from its element i on (a submatrix's start), stored alike.
  Operand from(int64_t i) const {
    Operand o = *this;
    o.p_ = bf16_ ? static_cast<const void*>(static_cast<const uint16_t*>(p_) + i)
                 : static_cast<const void*>(static_cast<const T*>(p_) + i);
    return o;
  }

 private:
  const void* p_;
  bool bf16_ = false;
};

// Element i of a buffer of T, or of bfloat16 at the same address (an activation stored as bf16).
template <class T>
T* element(T* p, int64_t i, bool bf16) {
  using Half = std::conditional_t<std::is_const_v<T>, const uint16_t, uint16_t>;
  return bf16 ? reinterpret_cast<T*>(reinterpret_cast<Half*>(p) + i) : p + i;
}

// The activation at p as products read it: as bf16 where the op that made it stored it so
// (T = float only; the same buffer, half of it used).
template <class T>
Operand<T> stored(const T* p, bool bf16) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16) return Operand<T>::bf16(reinterpret_cast<const uint16_t*>(p));
  GMLP_CHECK(!bf16);
  return Operand<T>(p);
}

// Operand<T> where T is deduced from the other arguments (a plain pointer converts to it).
template <class T>
using OperandOf = std::type_identity_t<Operand<T>>;

// Where a product writes C: T elements or, for float, bfloat16 ones. A product storing C as bf16
// makes each block of it in floats in its own scratch, runs the epilogue there, and rounds the
// block into C as round_to_bf16 does: the bits an op gets by storing the float C (store_bf16),
// without C's floats ever reaching memory.
template <class T>
class Output {
 public:
  Output(T* p) : p_(p) {}  // NOLINT(google-explicit-constructor): plain pointers are outputs
  static Output bf16(uint16_t* p) {
    static_assert(std::is_same_v<T, float>, "only float outputs are stored as bfloat16");
    Output o(nullptr);
    o.p_ = p, o.bf16_ = true;
    return o;
  }
  bool is_bf16() const { return bf16_; }
  T* data() const {
    GMLP_CHECK(!bf16_);
    return static_cast<T*>(p_);
  }
  uint16_t* bf16_data() const {
    GMLP_CHECK(bf16_);
    return static_cast<uint16_t*>(p_);
  }
  // The output from its element i on (a submatrix's start), stored alike.
  Output from(int64_t i) const {
    Output o = *this;
    o.p_ = bf16_ ? static_cast<void*>(static_cast<uint16_t*>(p_) + i) : static_cast<void*>(static_cast<T*>(p_) + i);
    return o;
  }

 private:
  void* p_;
  bool bf16_ = false;
};

// The activation buffer at p as a product writes it: as bf16 with `bf16` (T = float only; the
// same buffer, half of it used), the counterpart of stored().
template <class T>
Output<T> storing(T* p, bool bf16) {
  if constexpr (std::is_same_v<T, float>)
    if (bf16) return Output<T>::bf16(reinterpret_cast<uint16_t*>(p));
  GMLP_CHECK(!bf16);
  return Output<T>(p);
}

template <class T>
using OutputOf = std::type_identity_t<Output<T>>;

}  // namespace gmlp
