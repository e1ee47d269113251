#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "data/cifar.h"
#include "io/image.h"

namespace gmlp::data {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxImages = 10'000'000;

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The entries of a directory that satisfy keep, sorted by name.
template <class Keep>
std::vector<fs::path> sorted_entries(const fs::path& dir, Keep keep) {
  std::error_code ec;
  std::vector<fs::path> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (keep(*it)) out.push_back(it->path());
  if (ec) fail("failed to read image folder '", dir.string(), "': ", ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> class_dirs(const fs::path& split_dir) {
  std::error_code ec;
  if (!fs::is_directory(split_dir, ec))
    fail("failed to read image folder: '", split_dir.string(),
         "' is not a directory (expected {root}/{split}/{class}/{image}.png|jpg)");
  return sorted_entries(split_dir, [](const fs::directory_entry& e) { return e.is_directory(); });
}

}  // namespace

bool is_image_folder(const std::string& root) {
  std::error_code ec;
  return fs::is_directory(fs::path(root) / "train", ec);
}

ImageSet load_image_folder(const std::string& root, const std::string& split, int channels, int size, Reading reading) {
  std::vector<std::string> names;  // the classes: train's sub-folders
  for (const auto& d : class_dirs(fs::path(root) / "train")) names.push_back(d.filename().string());
  if (names.size() > 256)  // labels are stored as bytes
    fail("failed to read image folder '", root, "': ", names.size(),
         " classes in its train folder, at most 256 supported");
  const fs::path split_dir = fs::path(root) / split;
  std::vector<fs::path> files;
  std::vector<uint8_t> labels;
  for (const auto& d : class_dirs(split_dir)) {
    const auto it = std::find(names.begin(), names.end(), d.filename().string());
    if (it == names.end())
      fail("failed to read image folder '", split_dir.string(), "': class '", d.filename().string(),
           "' is not a class of '", (fs::path(root) / "train").string(), "'");
    std::vector<fs::path> images =
        sorted_entries(d, [](const fs::directory_entry& e) { return !e.is_directory() && is_image_file(e.path()); });
    // A class folder without images is a copy that went wrong, not a class with no examples.
    if (images.empty())
      fail("failed to read image folder '", split_dir.string(), "': class folder '", d.string(),
           "' has no .png, .jpg or .jpeg images");
    for (auto& f : images) {
      files.push_back(std::move(f));
      labels.push_back(uint8_t(it - names.begin()));
    }
    if (files.size() > kMaxImages)
      fail("failed to read image folder '", split_dir.string(), "': more than ", kMaxImages, " images");
  }
  if (files.empty())
    fail("failed to read image folder '", split_dir.string(), "': no .png, .jpg or .jpeg images in its class folders");

  ImageSet set;
  set.count = int(files.size());
  set.channels = channels, set.height = size, set.width = size;
  set.classes = int(names.size());
  set.class_names = names;
  set.labels = std::move(labels);
  set.decode = [files = std::move(files), channels, size](int64_t i, uint8_t* dst) {
    const std::vector<float> chw = img::load_image(files[size_t(i)].string(), channels, size, size);
    for (size_t j = 0; j < chw.size(); ++j) dst[j] = uint8_t(std::lround(chw[j] * 255.0f));
  };
  if (reading == Reading::on_demand) return set;
  check_fits_in_memory(double(set.count) * channels * size * size,
                       cat("failed to read image folder '", split_dir.string(), "': the pixels of its ", set.count,
                           " images at ", channels, "x", size, "x", size));
  // Every image decoded once, in parallel, straight into its place (the scratch of
  // for_each_image is the pixels); the first error, in file order, is thrown once all are done.
  set.pixels.resize(size_t(set.count) * size_t(set.image_size()));
  for_each_image(
      set, set.count, [](int64_t i) { return i; }, set.pixels.data(), [](int64_t, const uint8_t*) {});
  set.decode = nullptr;
  return set;
}

ImageSet fit_images(const ImageSet& set, int size, bool pad) {
  GMLP_CHECK(!set.decode);
  check_fits_in_memory(double(set.count) * set.channels * size * size, cat(set.count, " images of ", size, "×", size));
  ImageSet out = set;
  out.height = out.width = size;
  const int C = set.channels, H = set.height, W = set.width;
  const size_t in_image = size_t(C) * H * W, out_image = size_t(C) * size * size;
  out.pixels.assign(size_t(set.count) * out_image, 0);
  std::vector<float> plane(in_image);
  for (int i = 0; i < set.count; ++i) {
    const uint8_t* src = set.pixels.data() + i * in_image;
    uint8_t* dst = out.pixels.data() + i * out_image;
    if (pad) {  // the offset of the old image in the new one, per axis (negative: a crop)
      const int oy = (size - H) / 2, ox = (size - W) / 2;
      for (int c = 0; c < C; ++c)
        for (int y = std::max(0, oy); y < std::min(size, oy + H); ++y)
          for (int x = std::max(0, ox); x < std::min(size, ox + W); ++x)
            dst[(size_t(c) * size + y) * size + x] = src[(size_t(c) * H + (y - oy)) * W + (x - ox)];
      continue;
    }
    for (size_t k = 0; k < in_image; ++k) plane[k] = src[k] / 255.0f;
    const std::vector<float> resized = img::resize_chw(plane.data(), C, H, W, size, size);
    for (size_t k = 0; k < out_image; ++k) dst[k] = uint8_t(std::lround(resized[k] * 255.0f));
  }
  return out;
}

ImageSet load_images(const std::string& dir, const std::string& split, int channels, int size, Reading reading) {
  if (is_image_folder(dir)) return load_image_folder(dir, split, channels, size, reading);
  if (is_cifar10(dir)) return load_cifar10(dir, split);
  return load_fashion_mnist(dir, split);
}

}  // namespace gmlp::data
