// Patch embedding as timm's PatchEmbed: a P×P convolution with stride P is a linear layer over
// non-overlapping patches. patchify() lays the patches out token-major, each flattened in
// (c, py, px) order, the order of the conv weight [D, C, P, P]; tokens in row-major grid order
// (timm's flatten(2)).
#pragma once

#include <cstdint>

namespace gmlp {

struct PatchShape {
  int64_t B, C, S, P;  // batch, channels, image side, patch side (S % P == 0)
  int64_t grid() const { return S / P; }
  int64_t tokens() const { return grid() * grid(); }
  int64_t patch_dim() const { return C * P * P; }
};

// patches: (N, B, C·P·P) overwritten; img: (B, C, S, S).
template <class T>
void patchify(T* patches, const T* img, PatchShape s);

template <class T>
void patchify_ref(T* patches, const T* img, PatchShape s);

}  // namespace gmlp
