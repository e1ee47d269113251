#include "nn/resample.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "core/error.h"
#include "nn/model.h"

namespace gmlp {

namespace {

// Where the new grid's token u lies on the old grid, per axis: scale · u + shift (token units).
struct GridMap {
  double scale = 1, shift = 0;
  double operator()(int u) const { return scale * u + shift; }
};

GridMap grid_map(int old_grid, int new_grid, GridFit fit) {
  if (fit == GridFit::pad) return {1.0, -0.5 * (new_grid - old_grid)};
  const double s = double(old_grid) / new_grid;  // align_corners=False, as torch's interpolate
  return {s, 0.5 * s - 0.5};
}

// The two grid points around x and their weights (linear interpolation).
struct Taps {
  std::array<int, 2> at{};
  std::array<double, 2> w{};
};

// Clamped to the grid: a position beyond the edge takes the edge's value.
Taps clamped_taps(double x, int grid) {
  x = std::clamp(x, 0.0, double(grid - 1));
  const int i = std::min(int(std::floor(x)), grid - 1);
  const int j = std::min(i + 1, grid - 1);
  const double f = x - i;
  return {{i, j}, {1 - f, f}};
}

// Zero beyond the grid: a kernel has no weight for an input that was not there.
Taps zero_taps(double x, int grid) {
  const int i = int(std::floor(x));
  const double f = x - i;
  Taps t{{i, i + 1}, {1 - f, f}};
  for (int k = 0; k < 2; ++k)
    if (t.at[k] < 0 || t.at[k] >= grid) t.at[k] = 0, t.w[k] = 0;
  return t;
}

// C channels over a G×G grid (token-major rows of C values, token = y·G + x), sampled at the
// new grid's tokens, clamped at the edges.
void resample_field(float* out, const float* in, int64_t C, int old_grid, int new_grid, const GridMap& map) {
  for (int y = 0; y < new_grid; ++y) {
    const Taps ty = clamped_taps(map(y), old_grid);
    for (int x = 0; x < new_grid; ++x) {
      const Taps tx = clamped_taps(map(x), old_grid);
      float* o = out + (int64_t(y) * new_grid + x) * C;
      for (int64_t c = 0; c < C; ++c) {
        double v = 0;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) v += ty.w[a] * tx.w[b] * in[(int64_t(ty.at[a]) * old_grid + tx.at[b]) * C + c];
        o[c] = float(v);
      }
    }
  }
}

// The spatial matrix as a kernel over offsets: W'[i', j'] = scale² · K_{p(i')}(p(j') − p(i')),
// with K_p the bilinear blend of the kernels of the output tokens around p, each sampled
// bilinearly at its own position plus the offset.
void resample_kernel(float* out, const float* W, int old_grid, int new_grid, const GridMap& map) {
  const int64_t N = int64_t(old_grid) * old_grid, N2 = int64_t(new_grid) * new_grid;
  const double mass = map.scale * map.scale;
  for (int64_t i2 = 0; i2 < N2; ++i2) {
    const int yi = int(i2 / new_grid), xi = int(i2 % new_grid);
    const Taps ty = clamped_taps(map(yi), old_grid), tx = clamped_taps(map(xi), old_grid);
    for (int64_t j2 = 0; j2 < N2; ++j2) {
      const double dy = map.scale * (int(j2 / new_grid) - yi), dx = map.scale * (int(j2 % new_grid) - xi);
      double v = 0;
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {  // the kernel of old output token (ty.at[a], tx.at[b])
          const double w_out = ty.w[a] * tx.w[b];
          if (w_out == 0) continue;
          const float* row = W + (int64_t(ty.at[a]) * old_grid + tx.at[b]) * N;
          const Taps qy = zero_taps(ty.at[a] + dy, old_grid), qx = zero_taps(tx.at[b] + dx, old_grid);
          for (int c = 0; c < 2; ++c)
            for (int d = 0; d < 2; ++d) v += w_out * qy.w[c] * qx.w[d] * row[int64_t(qy.at[c]) * old_grid + qx.at[d]];
        }
      out[i2 * N2 + j2] = float(mass * v);
    }
  }
}

}  // namespace

GridFit parse_grid_fit(const std::string& name) {
  if (name == "resize") return GridFit::resize;
  if (name == "pad") return GridFit::pad;
  fail("invalid fit '", name, "': expected resize or pad");
}

const char* grid_fit_name(GridFit fit) { return fit == GridFit::pad ? "pad" : "resize"; }

void check_resizable(const ModelConfig& from, int img_size) {
  const ModelKindInfo& kind = model_kind_info(from.model);
  if (kind.patches && !kind.spatial_matrix && from.model != ModelKind::vit)
    fail("a ", kind.name, " model cannot change its image size (", from.img_size, " to ", img_size,
         " px): its token MLPs are tied to its ", from.patches(),
         " tokens; gmlp, amlp, resmlp, vit and cnn models can");
  if (kind.patches && (img_size <= 0 || img_size % from.patch_size != 0))
    fail("invalid image size ", img_size, ": expected a multiple of the model's patch size, ", from.patch_size);
}

std::vector<float> resample_weights(const ModelConfig& from, const float* weights, const ModelConfig& to, GridFit fit) {
  check_resizable(from, to.img_size);
  ModelConfig same = to;
  same.img_size = from.img_size;
  GMLP_CHECK(same.to_json() == from.to_json());  // only the image size differs
  const std::vector<ParamInfo> src = param_table(from), dst = param_table(to);
  std::map<std::string, const ParamInfo*> by_name;
  for (const ParamInfo& p : src) by_name[p.name] = &p;
  int64_t total = 0;
  for (const ParamInfo& p : dst) total = std::max(total, p.offset + p.numel);
  std::vector<float> out(size_t(total), 0.f);

  const int G = from.grid(), G2 = to.grid();
  const GridMap map = grid_map(G, G2, fit);
  const char* spatial = model_kind_info(from.model).spatial_matrix;
  const std::string spatial_w = spatial ? spatial : "", spatial_b = spatial_w.substr(0, spatial_w.rfind('.')) + ".bias";
  for (const ParamInfo& p : dst) {
    const auto it = by_name.find(p.name);
    GMLP_CHECK(it != by_name.end());
    const ParamInfo& s = *it->second;
    const float* in = weights + s.offset;
    float* o = out.data() + p.offset;
    if (s.shape == p.shape) {
      std::copy(in, in + s.numel, o);
    } else if (spatial && p.name.ends_with(spatial_w)) {
      resample_kernel(o, in, G, G2, map);
    } else if (spatial && p.name.ends_with(spatial_b)) {
      resample_field(o, in, 1, G, G2, map);
    } else if (p.name == "pos_embed") {  // [1, T, D]: the class token's position first, kept
      const int64_t D = p.shape[2], prefix = from.has_class_token() ? 1 : 0;
      std::copy(in, in + prefix * D, o);
      resample_field(o + prefix * D, in + prefix * D, D, G, G2, map);
    } else {
      fail("internal: no way to resample '", p.name, "' from ", G, "×", G, " to ", G2, "×", G2, " tokens");
    }
  }
  return out;
}

}  // namespace gmlp
