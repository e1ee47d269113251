// libFuzzer harness: safetensors files (src/io/safetensors.h) from memory. The header is parsed
// and validated, every tensor is converted to each type its readers offer, and the checkpoint
// helpers that look at a file's names and shapes (kind, description, architecture) run on it.
#include "fuzz.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"

using namespace gmlp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::run([&] {
    const st::File f = st::File::parse(std::string(fuzz::as_view(data, size)), "fuzz.safetensors");
    for (const st::TensorInfo& t : f.tensors()) {
      fuzz::run([&] { f.read_f32(t.name, t.shape); });
      fuzz::run([&] { f.read_f64(t.name); });
      fuzz::run([&] { f.read_i64(t.name); });  // an error for floating-point dtypes
    }
    fuzz::run([&] { f.read_f32("stem.proj.weight"); });  // a name the file may lack
    fuzz::run([&] { describe_checkpoint(f); });
    fuzz::run([&] { config_from_tensors(f); });
  });
  return 0;
}
