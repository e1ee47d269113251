// Evaluation of an image classifier on a labelled set, or a subset of it: mean cross-entropy (no
// smoothing), top-1 accuracy, and optionally the logits of every image evaluated.
#pragma once

#include <vector>

#include "data/idx.h"
#include "data/transform.h"
#include "dist/communicator.h"
#include "nn/model.h"
#include "nn/resample.h"

namespace gmlp {

struct EvalResult {
  int count = 0;                  // images evaluated
  int total = 0;                  // images in the set
  double loss = 0, accuracy = 0;  // accuracy in [0, 1]
  double seconds = 0;
};

struct EvalOptions {
  // The images to evaluate, by index into the set, in this order (eval_subset's draw, or the
  // first N); null: all of them in file order.
  const std::vector<int64_t>* items = nullptr;
  std::vector<float>* logits = nullptr;  // when given, receives (count, K) in the items' order
  // An image's logits are the mean of its own and its mirror image's (test-time augmentation
  // with the training's horizontal flip; twice the work).
  bool flip_tta = false;
  // Names the pass on a progress line while it runs, on a terminal only ("test"); null: none.
  const char* progress = nullptr;
  // The ranks that share the batches (dist::BatchShares: every rank gets the figures of one
  // process); null: this process alone. Not with logits.
  dist::Communicator* comm = nullptr;
};

// Evaluates in batches of up to the model's planned batch.
EvalResult evaluate(Model<float>& model, const data::ImageSet& set, const data::Normalization& norm,
                    const EvalOptions& options = {});

// Checks that a data set fits a model (channels, size, classes); throws a one-line error naming
// `source` otherwise.
// The set's images brought to the model's size by `fit` when only their size differs
// (data::fit_images); otherwise the set as it is, for check_compatible to judge.
data::ImageSet fit_to_model(data::ImageSet set, const ModelConfig& cfg, GridFit fit);

void check_compatible(const ModelConfig& cfg, const data::ImageSet& set, const std::string& source);

}  // namespace gmlp
