// libFuzzer harness: CIFAR-10's binary batches and batches.meta.txt (src/data/cifar.h). One
// input holds the test batch and the class names, split at fuzz::kSplit; load_cifar10 reads a
// folder, so they are written to one under /dev/shm (memory), created once per process.
#include <unistd.h>

#include <filesystem>

#include "data/cifar.h"
#include "fuzz.h"
#include "io/atomic_file.h"

using namespace gmlp;
namespace fs = std::filesystem;

namespace {

struct Folder {
  fs::path dir;
  Folder() {
    const fs::path shm = "/dev/shm";
    dir = (fs::is_directory(shm) ? shm : fs::temp_directory_path()) / cat("gmlp_fuzz_cifar_", getpid());
    fs::create_directories(dir);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Folder folder;
  std::string_view parts[2];
  fuzz::split(fuzz::as_view(data, size), parts);
  write_file_atomic((folder.dir / "test_batch.bin").string(), parts[0]);
  write_file_atomic((folder.dir / "batches.meta.txt").string(), parts[1]);
  fuzz::run([&] { data::load_cifar10(folder.dir.string(), "test"); });
  return 0;
}
