// CIFAR-10 in its binary version (cs.toronto.edu/~kriz/cifar.html, "Binary version"): files of
// 3,073-byte records, one label byte then the 32 × 32 image as 1,024 red, 1,024 green and 1,024
// blue bytes, row-major; data_batch_1.bin … data_batch_5.bin are the training split and
// test_batch.bin the test split, batches.meta.txt names the classes one per line.
#pragma once

#include <string>

#include "data/idx.h"

namespace gmlp::data {

// Whether dir holds CIFAR-10 binary files (its data_batch_1.bin or test_batch.bin exists).
bool is_cifar10(const std::string& dir);

// split "train" (the five data batches, in order) or "test": 3 × 32 × 32 images, 10 classes,
// named by batches.meta.txt when it is there and by CIFAR-10's own names otherwise. Throws
// gmlp::Error naming the file: a missing batch, a size that is not a whole number of records, a
// label above 9, an unknown split.
ImageSet load_cifar10(const std::string& dir, const std::string& split);

}  // namespace gmlp::data
