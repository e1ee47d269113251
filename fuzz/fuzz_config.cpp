// libFuzzer harness: the --config JSON file (tools/config_file.cpp), with the real command
// line's subcommands and options (add_commands, as tools/main.cpp). expand_config reads
// a path: the input is an in-memory file. The arguments it returns are not parsed further
// (parsing would run the command).
#include "commands.h"
#include "fuzz.h"

using namespace gmlp;

namespace {

const CLI::App& app() {
  static CLI::App app{"gmlp"};
  static const bool registered = (cli::add_commands(app), true);
  (void)registered;
  return app;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile file("config.json");
  file.set(data, size);
  // Image training (flags, counts, lists), one with positional arguments, and a text command.
  for (const char* sub : {"train", "compare", "pretrain"})
    fuzz::run([&] { cli::expand_config(app(), {sub, "--epochs", "3", "--config", file.path()}); });
  return 0;
}
