// IDX image and label files (the MNIST format, yann.lecun.com/exdb/mnist: big-endian u32 magic
// and dims, then unsigned bytes), raw or gzipped, and the Fashion-MNIST splits stored that way
// (zalandoresearch/fashion-mnist).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gmlp::data {

struct ImageSet {  // uint8 images, CHW per image, and labels
  int count = 0, channels = 0, height = 0, width = 0, classes = 0;
  std::vector<uint8_t> pixels;  // (count, channels, height, width)
  std::vector<uint8_t> labels;  // (count)
  std::vector<std::string> class_names;
};

// Reads an IDX image file (magic 0x00000803: u8, 3 dims) and its label file (0x00000801: u8,
// 1 dim), each gzipped or raw. channels = 1; classes = largest label + 1; class_names is empty.
// Throws gmlp::Error naming the file on a missing file, wrong magic, absurd dims (more than
// 10,000,000 images or a side over 4096, checked before allocating), a declared size over
// 768 MiB or more than the file can hold (checked before reading the data), truncated or corrupt
// data, data beyond what the header declares, or an image/label count mismatch.
ImageSet load_idx(const std::string& images_path, const std::string& labels_path);

// split "train" or "test": reads {dir}/train-images-idx3-ubyte(.gz) and -labels-idx1-ubyte(.gz)
// (t10k-... for "test"), preferring .gz. Sets classes = 10 and the class names, and throws if a
// label is >= 10.
ImageSet load_fashion_mnist(const std::string& dir, const std::string& split);

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace gmlp::data
