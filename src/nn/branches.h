// The branches f of the residual sublayers (see token_model.h), one per kind of mixing:
//   ChannelMlp         fc1 → GELU → fc2 over channels (every model's feed-forward)
//   TokenMlp           fc1 → GELU → fc2 over tokens (MLP-Mixer; with a LayerNorm over tokens
//                      first, the feed-forward-only model)
//   TokenLinear        one N×N linear map over tokens (ResMLP)
//   GatingMlp          gMLP: fc1 → GELU → spatial gating unit (any gate kind) → fc2, and aMLP's
//                      tiny attention added inside the gate
//   SelfAttention      multi-head softmax attention (ViT/DeiT)
//   ExternalAttention  two linear memories with the double normalisation (EAMLP)
// Each takes its parameter names' prefix and registers its parameters on construction.
#pragma once

#include <memory>
#include <string>

#include "nn/token_model.h"

namespace gmlp {

struct BranchDims {
  int64_t N, D;  // tokens, width
};

template <class T>
std::unique_ptr<Branch<T>> make_channel_mlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t hidden,
                                            InitStyle style);
// token_norm_name non-empty: a LayerNorm over the N tokens (per channel) precedes fc1.
template <class T>
std::unique_ptr<Branch<T>> make_token_mlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t hidden,
                                          InitStyle style, const std::string& token_norm_name = "", float eps = 1e-6f);
template <class T>
std::unique_ptr<Branch<T>> make_token_linear(ParamTable& t, const std::string& prefix, BranchDims d);
// Score biases owned by the model and shared by its attention layers: a (heads, N, N) bias
// (T5's relative positions; read in forward, its gradient accumulated in dbias in backward), and
// a (B, N) key bias (the padding mask; no gradient). pad is the same mask as bytes, nonzero at
// padding, for the spatial gating unit's token mix. Null pointers mean none.
template <class T>
struct SharedScoreBias {
  T* bias = nullptr;
  T* dbias = nullptr;
  T* key_bias = nullptr;
  const uint8_t* pad = nullptr;
};

// gate: "split" | "multiplicative" | "additive" | "linear"; attn_dim > 0 adds aMLP's attention.
// With a padding mask (score_bias->pad, ->key_bias), padding is left out of the spatial token mix
// and is no key of the tiny attention, so no other token reads it.
template <class T>
std::unique_ptr<Branch<T>> make_gating_mlp(ParamTable& t, const std::string& prefix, BranchDims d, int64_t ffn,
                                           const std::string& gate, float gate_eps, int64_t attn_dim,
                                           const SharedScoreBias<T>* score_bias = nullptr);

template <class T>
std::unique_ptr<Branch<T>> make_self_attention(ParamTable& t, const std::string& prefix, BranchDims d, int64_t heads,
                                               InitStyle style, const SharedScoreBias<T>* score_bias = nullptr);
template <class T>
std::unique_ptr<Branch<T>> make_external_attention(ParamTable& t, const std::string& prefix, BranchDims d,
                                                   int64_t heads, int64_t memory, InitStyle style);

}  // namespace gmlp
