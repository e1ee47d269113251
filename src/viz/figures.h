// The pictures of a run: the learned spatial weights of the gating unit (as in Figure 3 of
// Liu et al. 2021) and the training curves from metrics.jsonl.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "viz/canvas.h"

namespace gmlp::viz {

// How the spatial-weight figure maps w to colour: each tile by its own largest |w| (shapes, as in
// the paper's figure), or one scale for the whole matrix (magnitudes, comparable across tiles).
enum class ColorScale { tile, shared };

// Rows of one SGU spatial matrix W (N×N, N = grid²), each reshaped to the grid×grid patch grid
// and tiled in grid order: tile (i, j) shows which input tokens output token i·grid + j mixes.
// A colour bar right of the tiles labels the diverging map's ends and 0: ±1 × a tile's largest
// |w| (ColorScale::tile), or ±the matrix's largest |w| (shared); a caption gives W's range.
Canvas render_spatial_weights(const float* W, int grid, const std::string& title, ColorScale scale = ColorScale::tile);

// Round tick values covering [lo, hi]: steps of 1, 2 or 5 × 10^k, the smallest that gives at
// most max_ticks (about five for the default), and whole numbers when `integer` (an axis of
// epochs or counts: no tick at 1.5).
std::vector<double> nice_ticks(double lo, double hi, bool integer, int max_ticks = 6);

struct Curve {
  std::string name;
  std::vector<double> x, y;
  Rgb color;
};
struct Panel {
  std::string title, xlabel;
  std::vector<Curve> curves;
};

// Panels in a grid of `columns` (0: one row), each with axes, ticks, a legend and its curves.
// An axis whose values are all whole numbers (epochs) ticks at whole numbers only. With
// shared_axes every panel gets the same x and y ranges: for panels of one quantity across models,
// so the eye can compare their heights.
Canvas render_panels(const std::vector<Panel>& panels, const std::string& title, int columns = 0,
                     bool shared_axes = false);

// A qualitative colour for series i (ten distinct hues, then they repeat).
Rgb palette(int i);

// What training curves are drawn against: the epoch, or the time since the run started in
// minutes (each epoch's training and evaluation: the sum of the rows' "seconds" up to its end),
// which compares runs of different speeds by what their users wait for.
enum class XAxis { epoch, time };

// The x of each metrics.jsonl row; XAxis::time fails on a row without a number "seconds".
std::vector<double> x_values(const std::vector<nlohmann::json>& rows, XAxis x);

// Accuracy and loss against epoch or time, from metrics.jsonl rows: one curve per split the rows
// hold (train, dev, test).
Canvas render_training_curves(const std::vector<nlohmann::json>& rows, const std::string& title,
                              XAxis x = XAxis::epoch);

// Several runs (name, metrics.jsonl rows) on shared axes, one curve each: test accuracy when
// every run has it, else dev loss (pretraining), else dev accuracy; fails when none is shared.
Canvas render_runs(const std::vector<std::pair<std::string, std::vector<nlohmann::json>>>& runs,
                   const std::string& title, XAxis x = XAxis::epoch);

}  // namespace gmlp::viz
