// libFuzzer harness: checkpoints (src/train/checkpoint.h, lm_trainer.h), through the loaders the
// CLI uses, so the metadata's JSON (config, mean, std, classes) and the text checkpoint's
// embedded tokenizer are parsed as they are for a user's file. The loaders take a path: the
// input is an in-memory file.
#include "fuzz.h"
#include "train/checkpoint.h"
#include "train/lm_trainer.h"

using namespace gmlp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile file("checkpoint.safetensors");
  file.set(data, size);
  fuzz::run([&] { load_checkpoint(file.path()); });
  fuzz::run([&] { load_text_checkpoint(file.path()); });
  return 0;
}
