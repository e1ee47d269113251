// IDX image and label files (the MNIST format, yann.lecun.com/exdb/mnist: big-endian u32 magic
// and dims, then unsigned bytes), raw or gzipped, and the Fashion-MNIST splits stored that way
// (zalandoresearch/fashion-mnist).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace gmlp::data {

struct ImageSet {  // uint8 images, CHW per image, and labels
  int count = 0, channels = 0, height = 0, width = 0, classes = 0;
  std::vector<uint8_t> pixels;  // (count, channels, height, width); empty where `decode` reads them
  std::vector<uint8_t> labels;  // (count)
  std::vector<std::string> class_names;
  // A set read on demand (an image folder under mpirun, data/image_folder.h): writes image i's
  // channels × height × width bytes to dst, from its file, each time it is asked. Safe to call
  // from several threads at once; throws gmlp::Error naming the file.
  std::function<void(int64_t i, uint8_t* dst)> decode;

  int64_t image_size() const { return int64_t(channels) * height * width; }
  // Image i: in pixels, or decoded into scratch (image_size() bytes) when the set is read on demand.
  const uint8_t* image(int64_t i, uint8_t* scratch) const {
    if (!decode) return pixels.data() + i * image_size();
    decode(i, scratch);
    return scratch;
  }
};

// f(k, pixels of image index(k)) for k in [0, n), in parallel. A set read on demand decodes into
// scratch (n × image_size() bytes); the first decoding error, in k order, is thrown once all are
// done (an exception must not leave an OpenMP region).
template <class Index, class F>
void for_each_image(const ImageSet& set, int64_t n, Index index, uint8_t* scratch, F f) {
  std::vector<std::exception_ptr> errors(set.decode ? size_t(n) : 0);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < n; ++k) {
    if (!set.decode) {
      f(k, set.image(index(k), nullptr));
      continue;
    }
    try {
      f(k, set.image(index(k), scratch + k * set.image_size()));
    } catch (...) {
      errors[size_t(k)] = std::current_exception();
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

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
