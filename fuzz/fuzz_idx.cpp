// libFuzzer harness: IDX image and label files (src/data/idx.h), raw or gzipped. One input holds
// both files, split at fuzz::kSplit; each becomes an in-memory file, as load_idx takes paths
// (zlib's gzopen reads them).
#include "data/idx.h"
#include "fuzz.h"

using namespace gmlp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile images("images-idx3-ubyte"), labels("labels-idx1-ubyte");
  std::string_view parts[2];
  fuzz::split(fuzz::as_view(data, size), parts);
  images.set(parts[0]);
  labels.set(parts[1]);
  fuzz::run([&] { data::load_idx(images.path(), labels.path()); });
  return 0;
}
