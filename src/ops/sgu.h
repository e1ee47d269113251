// Spatial Gating Unit (Liu et al. 2021, eq. 2-3; timm SpatialGatingUnit), with the gating
// functions of the paper's ablation (§3.1):
//   g = W · LayerNorm(v) + b [+ r]  over TOKENS (r: aMLP's tiny attention, or none), then
//   split           z = [u | v] on channels (H = F/2 each);  out = u ⊙ g   (the default)
//   multiplicative  u = v = z (H = F);                         out = z ⊙ g
//   additive        u = v = z (H = F);                         out = z + g
//   linear          v = z (H = F);                             out = g
// With a padding mask, the rows of v̂ of padding tokens are zeroed before the token product, so
// that no token reads them: W's columns of padding are left out (text models padded to length).
// Activations are token-major (N, B, ·); an image's rows are N×H tiles at a stride, so W·v̂ and
// both of its gradients are (N×N)·(N×H) products per image, with no transposes anywhere.
#pragma once

#include <cstdint>

namespace gmlp {

enum class SguGate { split, multiplicative, additive, linear };
// Parses the config's gate name (throws gmlp::Error if unknown).
SguGate parse_sgu_gate(const char* name);

struct SguShape {
  int64_t N, B, F;  // tokens, batch, gate input channels
  SguGate gate = SguGate::split;
  const uint8_t* pad = nullptr;  // (B, N): nonzero where a token is padding; nullptr: none
  // z holds the gating MLP's fc1 output before its GELU: the gate applies GELU to each row as it
  // reads it (the same bits as on GELU's output), and its backward GELU's backward too, from the
  // slope it makes again there. No GELU output and no slope are kept between the two passes.
  bool gelu = false;
  int64_t H() const { return gate == SguGate::split ? F / 2 : F; }  // output channels
  int64_t rows() const { return N * B; }
};

// Which of the gate's arrays hold bfloat16 (float only; core/operand.h), in the first half of
// their buffers.
struct SguBf16 {
  // out (stored by sgu_forward): only products read it (the next layer's), so this keeps the
  // step's bits (bf16_activations()).
  bool stored = false;
  // The saved g, rounded, in bf16 precision (gelu_slope_bf16()). Backward reads it only to scale
  // dout into u's gradient, which GELU's slope (bf16 as well) then scales and fc1's products read
  // rounded to bfloat16: a rounding of the same size (2^-9) added to a value rounded anyway, for
  // half the bytes written in the forward and read back in the backward.
  bool g = false;
  // z, fc1's output before GELU (SguShape::gelu only), stored as bfloat16: in bf16 precision, where
  // the activations are (bf16_activations()), as autocast keeps a linear layer's output.
  bool z = false;
};

// out: (N, B, H) overwritten. Saved for backward, image-major because both passes run image by
// image: mean, rstd (B, N) and g (B, N, H); all three nullptr when nothing is saved (inference).
// v̂ = LayerNorm(v) is not saved: backward makes it again from z and the statistics (the same
// bits) in the pass that reads z's rows anyway, where keeping it wrote M·H values and read them
// back. z: (N, B, F).
// gamma, beta: (H). W: (N, N) [out token, in token]. b: (N).
// res: (N, B, H) added to the gate before it is applied (aMLP's attention), or nullptr.
// bf16: which arrays are bfloat16 (SguBf16).
template <class T>
void sgu_forward(T* out, T* mean, T* rstd, T* g, const T* z, const T* gamma, const T* beta, const T* W, const T* b,
                 SguShape s, T eps, const T* res = nullptr, SguBf16 bf16 = {});

// GELU's backward, where z = GELU(y) (the gating MLP's fc1): sgu_backward multiplies each row of
// dz by GELU's slope once the row is final (gelu_backward_by_slope_row, the same bits), so that dz
// crosses memory once instead of three times (written, then read and written again by a pass of
// its own). The slope is the one fc1's forward saved, or with SguShape::gelu (slope null) made
// again from the row of y it reads. The rows' sums are added to dbias (F, fc1's bias gradient)
// when given; with d16 (float only) the rows are stored there as bfloat16 and dz is left untouched.
template <class T>
struct SguGelu {
  const T* slope = nullptr;  // (N, B, F), stored as bfloat16 with slope_bf16 (gelu_slope_bf16)
  bool slope_bf16 = false;
  T* dbias = nullptr;
  uint16_t* d16 = nullptr;
};

// Overwrites dz (N, B, F) (a fresh activation gradient: nothing else flows into z); accumulates
// into the parameter gradients dgamma, dbeta (H), dW (N, N), db (N). dres (N, B, H), if given,
// is overwritten with ∂L/∂res. mean, rstd, g: as sgu_forward saved them; bf16: as it was given.
// gelu, when given: dz is GELU's input's gradient instead (SguGelu); with SguShape::gelu it always
// is. Working memory is per thread, allocated on first use.
template <class T>
void sgu_backward(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z, const T* mean, const T* rstd,
                  const T* g, const T* gamma, const T* beta, const T* W, SguShape s, T* dres = nullptr,
                  SguBf16 bf16 = {}, const SguGelu<T>* gelu = nullptr);

// Plain loops over (n, b, h) with the token sum written out; no saved state.
template <class T>
void sgu_forward_ref(T* out, const T* z, const T* gamma, const T* beta, const T* W, const T* b, SguShape s, T eps,
                     const T* res = nullptr);
template <class T>
void sgu_backward_ref(T* dz, T* dgamma, T* dbeta, T* dW, T* db, const T* dout, const T* z, const T* gamma,
                      const T* beta, const T* W, const T* b, SguShape s, T eps, const T* res = nullptr,
                      T* dres = nullptr);

}  // namespace gmlp
