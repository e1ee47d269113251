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
  add_serve(app);
  add_config_option(app);  // last: it adds --config to every subcommand above
}

void print_notes(const std::vector<std::string>& notes) {
  for (const std::string& note : notes) std::fprintf(stderr, "gmlp: note: %s\n", note.c_str());
}

Checkpoint load_image_checkpoint(const std::string& path) {
  Checkpoint ck = load_checkpoint(path);
  print_notes(ck.notes);
  return ck;
}

}  // namespace gmlp::cli
