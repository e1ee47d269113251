#include "data/cifar.h"

#include <filesystem>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"

namespace gmlp::data {

namespace fs = std::filesystem;

namespace {

constexpr int kSide = 32, kChannels = 3, kClasses = 10;
constexpr size_t kImageBytes = size_t(kChannels) * kSide * kSide, kRecordBytes = 1 + kImageBytes;
constexpr size_t kMaxFileBytes = size_t{1} << 30;  // 1 GiB: CIFAR-10's batches are 30 MiB each
constexpr size_t kMaxMetaBytes = 64 << 10;         // batches.meta.txt: ten short names

std::vector<std::string> class_names(const fs::path& dir) {
  std::vector<std::string> names;
  const fs::path path = dir / "batches.meta.txt";
  std::error_code ec;
  if (fs::exists(path, ec)) {
    std::istringstream meta(read_file(path.string(), kMaxMetaBytes));
    for (std::string line; std::getline(meta, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (!line.empty()) names.push_back(line);
    }
  }
  if (names.size() == size_t(kClasses)) return names;
  return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
}

// Appends the records of one batch file to set.
void append_batch(ImageSet& set, const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    fail("failed to load CIFAR-10: '", path.string(), "' does not exist (is '", path.parent_path().string(),
         "' the cifar-10-batches-bin folder?)");
  // The size is checked before the file is read: a batch is a whole number of records.
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) fail("failed to load CIFAR-10 batch '", path.string(), "': ", ec.message());
  if (size == 0 || size % kRecordBytes != 0)
    fail("failed to load CIFAR-10 batch '", path.string(), "': ", size, " bytes is not a whole number of ",
         kRecordBytes, "-byte records");
  const std::string bytes = read_file(path.string(), kMaxFileBytes);
  if (bytes.size() != size)
    fail("failed to load CIFAR-10 batch '", path.string(), "': its size changed while it was read");
  set.pixels.reserve(set.pixels.size() + size / kRecordBytes * kImageBytes);
  const size_t n = bytes.size() / kRecordBytes;
  for (size_t i = 0; i < n; ++i) {
    const auto* record = reinterpret_cast<const uint8_t*>(bytes.data()) + i * kRecordBytes;
    if (record[0] >= kClasses)
      fail("failed to load CIFAR-10 batch '", path.string(), "': label ", int(record[0]), " of record ", i,
           " is out of range for the 10 classes");
    set.labels.push_back(record[0]);
    set.pixels.insert(set.pixels.end(), record + 1, record + kRecordBytes);  // already CHW
  }
  set.count += int(n);
}

}  // namespace

bool is_cifar10(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / "data_batch_1.bin", ec) || fs::exists(fs::path(dir) / "test_batch.bin", ec);
}

ImageSet load_cifar10(const std::string& dir, const std::string& split) {
  std::vector<std::string> files;
  if (split == "train")
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  else if (split == "test")
    files.push_back("test_batch.bin");
  else
    fail("failed to load CIFAR-10: unknown split '", split, "' (expected 'train' or 'test')");
  ImageSet set;
  set.channels = kChannels, set.height = kSide, set.width = kSide, set.classes = kClasses;
  set.class_names = class_names(dir);
  for (const auto& f : files) append_batch(set, fs::path(dir) / f);
  return set;
}

}  // namespace gmlp::data
