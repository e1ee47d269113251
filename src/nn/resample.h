// A vision model trained at one image size, run or finetuned at another (same patch size). What
// depends on the patch grid is resampled from the G×G grid to the G'×G' one, as timm resamples a
// ViT's position embeddings:
//   - the spatial matrix W (N×N, gMLP's and aMLP's gate, ResMLP's token mixing): row i is the
//     kernel of output token i over the input grid. Read as a function of the output token's
//     position p and the offset δ to an input token, K_p(δ) = W[p, p + δ] (zero off the grid), it
//     is sampled at the new tokens' positions and offsets, bilinearly in both;
//   - the biases over output tokens, and ViT's position embeddings, bilinearly over the grid.
// How the images meet the new size decides where a new token lies on the old grid:
//   - resize: the image is scaled by G'/G, and so are positions and offsets; the kernel's weights
//     are scaled by (G/G')², the inputs per unit of area, so that a smooth field is mixed as before;
//   - pad: the image is padded (or cropped) around its centre, so a token keeps its offsets and
//     weights and only moves by (G' − G)/2.
// The convolutional model has nothing tied to the grid; Mixer, the feed-forward-only model and
// EAMLP mix tokens with MLPs whose rows are not kernels, and are refused.
#pragma once

#include <string>
#include <vector>

#include "nn/config.h"

namespace gmlp {

enum class GridFit { resize, pad };

GridFit parse_grid_fit(const std::string& name);  // "resize" or "pad"; throws naming both
const char* grid_fit_name(GridFit fit);

// Throws gmlp::Error, one line naming the kind or size, when `from` cannot be run at img_size:
// another kind than above, or a size the patch size does not divide.
void check_resizable(const ModelConfig& from, int img_size);

// The weights of `to` (from's config with img_size changed) from `from`'s flat weights.
std::vector<float> resample_weights(const ModelConfig& from, const float* weights, const ModelConfig& to, GridFit fit);

}  // namespace gmlp
