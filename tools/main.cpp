// gmlp: train, compare, evaluate, run and measure gMLP and the models it is compared with.
// Exit status: 0 success, 1 failure (one line on stderr), 2 usage error.
#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "core/build_info.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"gmlp: gMLP and aMLP (\"Pay Attention to MLPs\") and the models they are compared with, for images and text, in C++ on the CPU"};
  app.require_subcommand(1);
  // Version, commit, compiler, build, CPU features: what a bug report needs, in three lines.
  app.set_version_flag("--version", [] { return gmlp::version_report(); },
                       "Print the version, the build and this CPU's features, then exit");
  gmlp::cli::add_train(app);
  gmlp::cli::add_eval(app);
  gmlp::cli::add_predict(app);
  gmlp::cli::add_info(app);
  gmlp::cli::add_bench(app);
  gmlp::cli::add_viz(app);
  gmlp::cli::add_compare(app);
  gmlp::cli::add_text(app);
  gmlp::cli::add_config_option(app);
  app.name(argv[0]);
  try {
    std::vector<std::string> args = gmlp::cli::expand_config(app, {argv + 1, argv + argc});
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const gmlp::Error& e) {
    std::fprintf(stderr, "gmlp: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gmlp: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gmlp: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
