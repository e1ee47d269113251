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

CLI::Option* add_img_size_option(CLI::App& sub, int& img_size) {
  return sub
      .add_option("--img-size", img_size,
                  "Run the model at this image side in pixels, a multiple of its patch size: its spatial weights "
                  "and positions resampled (gmlp, amlp, resmlp, vit, cnn)")
      ->check(at_least(1));
}

CLI::Option* add_fit_option(CLI::App& sub, std::string& fit) {
  return sub
      .add_option("--fit", fit,
                  "How Fashion-MNIST or CIFAR-10 images meet a model of another size: resize them, or pad them "
                  "(centred on black; offsets in the spatial weights kept)")
      ->check(CLI::IsMember({"resize", "pad"}))
      ->capture_default_str();
}

Checkpoint load_image_checkpoint(const std::string& path, int img_size, GridFit fit) {
  Checkpoint ck = load_checkpoint(path);
  if (img_size > 0) change_image_size(ck, path, img_size, fit);
  print_notes(ck.notes);
  return ck;
}

}  // namespace gmlp::cli
