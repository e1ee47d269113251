// Softmax self-attention on token-major packed QKV (Vaswani et al. 2017; timm's ViT Attention
// after its qkv Linear, and aMLP's tiny single-head attention, Liu et al. 2021 §4.3):
//   for every batch item b and head h:  S = Q Kᵀ · scale [+ bias_h],  P = softmax over keys (S),
//   O = P V
// with scale = 1/sqrt(dh), and bias an optional (heads, N, N) additive score bias shared by the
// batch (T5's relative position bias), and key_bias an optional (B, N) additive bias per image
// and key (a padding mask: -1e9 on [PAD] keys, 0 elsewhere; no gradient). The projections (qkv,
// output) are separate linear ops.
//
// Layout. qkv is (N, B, 3·W) token-major (row n·B + b), W = heads·dh, each row [q | k | v], and
// within q (and k, v) head h owns columns h·dh .. h·dh+dh-1: timm's
// qkv.reshape(B, N, 3, heads, dh) order. So Q_bh is the N×dh matrix at qkv + b·3W + h·dh with
// row stride B·3W (K at +W, V at +2W), and O_bh is at o + b·W + h·dh with row stride B·W: every
// product is one strided GEMM, no copies or transposes.
#pragma once

#include <cstdint>

#include "core/operand.h"

namespace gmlp {

struct AttnShape {
  int64_t N, B, heads, dh;                      // tokens, batch, heads, width per head
  int64_t width() const { return heads * dh; }  // D_attn
};

// o: (N, B, width) overwritten, head h at columns h·dh. P: (B, heads, N, N) overwritten with the
// softmax probabilities (saved for backward), row = query, column = key. Softmax is stable
// (the row max is subtracted before exp). Only products read qkv and o, so either may be stored
// as bf16 (core/operand.h): the bits of the floats they hold, or of o's floats rounded.
template <class T>
void attention_forward(OutputOf<T> o, T* P, OperandOf<T> qkv, AttnShape s, const T* bias = nullptr,
                       const T* key_bias = nullptr);

// dqkv: (N, B, 3·width) overwritten with ∂L/∂qkv given dout = ∂L/∂o (N, B, width) and the P
// saved by attention_forward. scratch: B·heads·N·N values (dP, then dS in place), overwritten.
//   dP = dO Vᵀ,  dV = Pᵀ dO,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),  dQ = dS K·scale,  dK = dSᵀ Q·scale
// dbias (heads, N, N), if given, accumulates Σ_b dS (the bias gradient). qkv may be stored as bf16.
template <class T>
void attention_backward(T* dqkv, const T* dout, OperandOf<T> qkv, const T* P, AttnShape s, T* scratch,
                        T* dbias = nullptr);

// Plain loops (double accumulation) straight from the definition; no saved state. The backward
// recomputes P and overwrites dqkv.
template <class T>
void attention_forward_ref(T* o, const T* qkv, AttnShape s, const T* bias = nullptr, const T* key_bias = nullptr);
template <class T>
void attention_backward_ref(T* dqkv, const T* dout, const T* qkv, AttnShape s, const T* bias = nullptr,
                            T* dbias = nullptr, const T* key_bias = nullptr);

}  // namespace gmlp
