// The `gmlp` command line: one function per subcommand, each registering its options (declared
// once, with defaults, so --help is generated) and its action on the parent app.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace gmlp::cli {

void add_train(CLI::App& app);
void add_eval(CLI::App& app);
void add_predict(CLI::App& app);
void add_info(CLI::App& app);
void add_bench(CLI::App& app);
void add_viz(CLI::App& app);

// --threads, shared by every subcommand: 0 = all cores this process may use.
void add_threads_option(CLI::App& sub, int& threads);

}  // namespace gmlp::cli
