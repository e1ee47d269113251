// IDX reader (yann.lecun.com/exdb/mnist, "FILE FORMATS"): u32 magic 0x000008TD (T = 08 for
// unsigned byte, D = number of dims), D big-endian u32 dims, then the bytes. zlib's gzread
// reads gzipped and raw files alike. The declared size is checked before any payload is read:
// against a cap, and against the file's size (exactly, for a raw file; for a gzip file, against
// the most deflate can inflate that many bytes to). The payload buffer then grows only as data
// arrives, and reading stops one byte past the declared size, so a gzip stream that inflates to
// more than its header says is never inflated further.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace gmlp::data {

namespace {

constexpr uint32_t kImagesMagic = 0x00000803, kLabelsMagic = 0x00000801;
constexpr uint32_t kMaxCount = 10'000'000, kMaxSide = 4096;
// The most payload one file may declare: 14 times Fashion-MNIST's training images, and more
// than the largest EMNIST split (547 MB).
constexpr uint64_t kMaxPayload = uint64_t{768} << 20;
// Deflate emits at most 258 bytes per 2 bits of input (RFC 1951's longest match at its shortest
// code), so a gzip file of n bytes inflates to at most about 1032 n bytes.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr size_t kChunk = size_t{1} << 24;  // bytes per gzread call

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

class IdxFile {
 public:
  explicit IdxFile(const std::string& path) : path_(path) {
    errno = 0;
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) fail("failed to load '", path, "': ", errno ? std::strerror(errno) : "cannot open");
    gzbuffer(f_, 1 << 18);
    std::error_code ec;
    file_size_ = std::filesystem::file_size(path, ec);
    if (ec) fail("failed to load '", path, "': ", ec.message());
  }
  ~IdxFile() { gzclose(f_); }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  // Reads the magic and its dims; `kind` describes the magic for the error message.
  std::vector<uint32_t> header(uint32_t magic, const char* kind) {
    uint8_t buf[4 * 4];
    const size_t ndims = magic & 0xff, n = 4 * (1 + ndims);
    if (const size_t got = read(buf, 4); got < 4) short_header(got, n);
    const uint32_t found = be32(buf);
    if (found != magic)
      fail("failed to load '", path_, "': expected IDX magic ", hex32(magic), " (", kind, "), found ", hex32(found));
    if (const size_t got = read(buf + 4, n - 4); got < n - 4) short_header(4 + got, n);
    std::vector<uint32_t> dims(ndims);
    for (size_t i = 0; i < ndims; ++i) dims[i] = be32(buf + 4 * (i + 1));
    header_bytes_ = n;
    return dims;
  }

  // Reads exactly n payload bytes and checks that nothing follows them. n is checked against the
  // cap and the file's size first, so a header that lies costs neither memory nor inflating.
  std::vector<uint8_t> payload(uint64_t n, const std::string& declared) {
    if (n > kMaxPayload)
      fail("failed to load '", path_, "': the header declares ", n, " bytes of data (", declared,
           "), more than the limit of ", kMaxPayload);
    if (gzdirect(f_)) {  // raw: the file's size says it all
      const uint64_t have = file_size_ - std::min(file_size_, header_bytes_);
      if (have < n)
        fail("failed to load '", path_, "': the data ends after ", have, " of the ", n, " bytes its header declares (",
             declared, ")");
      if (have > n)
        fail("failed to load '", path_, "': the file has more data than the ", n, " bytes its header declares (",
             declared, ")");
    } else if (header_bytes_ + n > file_size_ * kMaxDeflateRatio + 1024) {
      fail("failed to load '", path_, "': the header declares ", n, " bytes of data (", declared,
           "), more than a gzip file of ", file_size_, " bytes can inflate to");
    }
    std::vector<uint8_t> out;
    while (out.size() < n) {
      const size_t old = out.size(), step = std::min<uint64_t>(n - old, std::max(old, kChunk));
      out.resize(old + step);
      if (const size_t got = read(out.data() + old, step); got < step)
        fail("failed to load '", path_, "': the data ends after ", old + got, " of the ", n,
             " bytes its header declares (", declared, ")", gz_reason());
    }
    uint8_t extra;
    if (read(&extra, 1) != 0)
      fail("failed to load '", path_, "': the file has more data than the ", n, " bytes its header declares (",
           declared, ")");
    return out;
  }

 private:
  static uint32_t be32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
  }

  // Reads up to n bytes; fewer only at the end of the data. Throws on corrupt gzip or I/O errors.
  size_t read(uint8_t* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      const int got = gzread(f_, dst + done, static_cast<unsigned>(std::min(n - done, kChunk)));
      if (got < 0) {
        int err = 0;
        const char* msg = gzerror(f_, &err);
        if (err == Z_ERRNO) fail("failed to load '", path_, "': ", std::strerror(errno));
        fail("failed to load '", path_, "': corrupt gzip data (zlib: ", strip_path(msg), ")");
      }
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

  // "; zlib: <reason>" when zlib saw a problem such as a truncated gzip stream, else "".
  std::string gz_reason() {
    int err = 0;
    const char* msg = gzerror(f_, &err);
    return err == Z_OK ? "" : cat("; zlib: ", strip_path(msg));
  }

  // gzerror's message is "<path>: <reason>"; the path is already in ours.
  std::string strip_path(const char* msg) const {
    const std::string m = msg, prefix = path_ + ": ";
    return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
  }

  [[noreturn]] void short_header(size_t got, size_t n) {
    fail("failed to load '", path_, "': the file ends inside the IDX header (", got, " of ", n, " bytes)", gz_reason());
  }

  std::string path_;
  gzFile f_;
  uint64_t file_size_ = 0, header_bytes_ = 0;
};

}  // namespace

ImageSet load_idx(const std::string& images_path, const std::string& labels_path) {
  ImageSet s;
  IdxFile images(images_path);
  const auto dims = images.header(kImagesMagic, "unsigned byte images, 3 dimensions");
  const std::string declared = cat(dims[0], " images of ", dims[1], "x", dims[2]);
  if (dims[0] > kMaxCount)
    fail("failed to load '", images_path, "': the header declares ", dims[0], " images, more than the limit of ",
         kMaxCount);
  if (dims[1] < 1 || dims[2] < 1 || dims[1] > kMaxSide || dims[2] > kMaxSide)
    fail("failed to load '", images_path, "': the header declares ", dims[1], "x", dims[2],
         " images, expected each side in 1..", kMaxSide);
  s.count = int(dims[0]), s.channels = 1, s.height = int(dims[1]), s.width = int(dims[2]);
  s.pixels = images.payload(uint64_t(dims[0]) * dims[1] * dims[2], declared);

  IdxFile labels(labels_path);
  const uint32_t nlabels = labels.header(kLabelsMagic, "unsigned byte labels, 1 dimension")[0];
  if (nlabels != dims[0])
    fail("failed to load '", labels_path, "': it holds ", nlabels, " labels but '", images_path, "' holds ", dims[0],
         " images");
  s.labels = labels.payload(nlabels, cat(nlabels, " labels"));
  s.classes = s.labels.empty() ? 0 : *std::max_element(s.labels.begin(), s.labels.end()) + 1;
  return s;
}

ImageSet load_fashion_mnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "test")
    fail("failed to load Fashion-MNIST: unknown split '", split, "' (expected 'train' or 'test')");
  const std::string prefix = (std::filesystem::path(dir) / (split == "train" ? "train" : "t10k")).string();
  auto pick = [&](const std::string& base) {
    std::error_code ec;
    if (std::filesystem::exists(base + ".gz", ec)) return base + ".gz";
    if (std::filesystem::exists(base, ec)) return base;
    fail("failed to load Fashion-MNIST: neither '", base, ".gz' nor '", base, "' exists (is '", dir,
         "' the dataset folder? an image folder would have a train/ folder of class folders)");
  };
  const std::string labels_path = pick(prefix + "-labels-idx1-ubyte");
  ImageSet s = load_idx(pick(prefix + "-images-idx3-ubyte"), labels_path);
  s.classes = 10;
  for (size_t i = 0; i < s.labels.size(); ++i)
    if (s.labels[i] >= s.classes)
      fail("failed to load '", labels_path, "': label ", int(s.labels[i]), " at index ", i,
           " is out of range for the 10 Fashion-MNIST classes");
  s.class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                   "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return s;
}

}  // namespace gmlp::data
