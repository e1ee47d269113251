// The subcommands registered in one place, for the CLI's main and for the --config fuzzer
// (fuzz/fuzz_config.cpp), so both see the same options.
#include "commands.h"

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

}  // namespace gmlp::cli
