// The subcommands registered in one place, for the CLI's main and for the --config fuzzer
// (fuzz/fuzz_config.cpp), so both see the same options.
#include "commands.h"

#include <cstdio>

namespace gmlp::cli {

void add_commands(CLI::App& app) {
  add_train(app);
  add_eval(app);
  add_predict(app);
  add_info(app);
  add_bench(app);
  add_viz(app);
  add_compare(app);
  add_text(app);
  add_export(app);
  add_config_option(app);  // last: it adds --config to every subcommand above
}

Checkpoint load_image_checkpoint(const std::string& path) {
  Checkpoint ck = load_checkpoint(path);
  for (const std::string& note : ck.notes) std::fprintf(stderr, "gmlp: note: %s\n", note.c_str());
  return ck;
}

}  // namespace gmlp::cli
