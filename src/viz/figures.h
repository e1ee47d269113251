// The pictures of a run: the learned spatial weights of the gating unit (as in Figure 3 of
// Liu et al. 2021) and the training curves from metrics.jsonl.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "viz/canvas.h"

namespace gmlp::viz {

// Rows of one SGU spatial matrix W (N×N, N = grid²), each reshaped to the grid×grid patch grid
// and tiled in grid order: tile (i, j) shows which input tokens output token i·grid + j mixes.
// Each tile is scaled by its own largest |w|: the figure shows shapes, not magnitudes.
Canvas render_spatial_weights(const float* W, int grid, const std::string& title);

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
Canvas render_panels(const std::vector<Panel>& panels, const std::string& title, int columns = 0);

// A qualitative colour for series i (ten distinct hues, then they repeat).
Rgb palette(int i);

// Accuracy and loss against epoch, from metrics.jsonl rows: one curve per split the rows hold
// (train, dev, test).
Canvas render_training_curves(const std::vector<nlohmann::json>& rows, const std::string& title);

// Several runs (name, metrics.jsonl rows) on shared axes, one curve each: test accuracy when
// every run has it, else dev loss (pretraining), else dev accuracy; fails when none is shared.
Canvas render_runs(const std::vector<std::pair<std::string, std::vector<nlohmann::json>>>& runs,
                   const std::string& title);

}  // namespace gmlp::viz
