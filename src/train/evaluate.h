// Evaluation of an image classifier on a labelled set: mean cross-entropy (no smoothing),
// top-1 accuracy, and optionally the logits of every image in file order.
#pragma once

#include <vector>

#include "data/idx.h"
#include "data/transform.h"
#include "nn/model.h"

namespace gmlp {

struct EvalResult {
  int count = 0;
  double loss = 0, accuracy = 0;  // accuracy in [0, 1]
  double seconds = 0;
};

// Evaluates the first `limit` images (all when limit <= 0) in batches of up to the model's
// planned batch. logits, when given, receives (count, K) in file order. With flip_tta, an
// image's logits are the mean of its own and its mirror image's (test-time augmentation with
// the training's horizontal flip; twice the work).
EvalResult evaluate(Model<float>& model, const data::ImageSet& set, const data::Normalization& norm,
                    int limit = 0, std::vector<float>* logits = nullptr, bool flip_tta = false);

// Checks that a data set fits a model (channels, size, classes); throws a one-line error naming
// `source` otherwise.
void check_compatible(const ModelConfig& cfg, const data::ImageSet& set, const std::string& source);

}  // namespace gmlp
