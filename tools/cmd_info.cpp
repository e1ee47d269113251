// gmlp info: a model's architecture, parameter count and FLOPs per image.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "nn/text_model.h"
#include "core/error.h"
#include "train/checkpoint.h"

namespace gmlp::cli {

void add_info(CLI::App& app) {
  struct Args {
    std::string preset, checkpoint;
    bool json = false, list = false, tensors = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("info", "Parameters and FLOPs of a preset or checkpoint");
  auto* preset = sub->add_option("--preset", args->preset, "Model preset");
  auto* ckpt = sub->add_option("--checkpoint", args->checkpoint, "Checkpoint (.safetensors)");
  preset->excludes(ckpt);
  sub->add_flag("--list", args->list, "List the presets");
  sub->add_flag("--tensors", args->tensors, "Also list every parameter tensor");
  sub->add_flag("--json", args->json, "Print one JSON object");
  sub->callback([args] {
    if (args->list) {
      for (const Preset& p : presets()) std::printf("%-14s %s\n", p.name.c_str(), p.description.c_str());
      std::printf("\ntext (gmlp pretrain --preset NAME):\n");
      for (const TextPreset& p : text_presets()) std::printf("%-14s %s\n", p.name.c_str(), p.description.c_str());
      return;
    }
    if (args->preset.empty() == args->checkpoint.empty())
      throw CLI::ValidationError("info", "give exactly one of --preset or --checkpoint");
    ModelConfig cfg = args->preset.empty() ? load_checkpoint(args->checkpoint).config
                                          : find_preset(args->preset).config;
    const auto model_ptr = make_model<float>(cfg);
    const Model<float>& model = *model_ptr;
    if (args->json) {
      nlohmann::json j = {{"params", model.num_trainable()},
                          {"buffers", model.num_params() - model.num_trainable()},
                          {"flops_per_image", model.flops_per_image()},
                          {"tokens", cfg.tokens()},
                          {"config", cfg.to_json()}};
      if (args->tensors)
        for (const ParamInfo& p : model.params()) j["tensors"][p.name] = p.shape;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("model            %s, %d×%d×%d input, %d classes\n", cfg.model.c_str(),
                cfg.in_chans, cfg.img_size, cfg.img_size, cfg.num_classes);
    std::printf("config           %s\n", cfg.to_json().dump().c_str());
    if (cfg.model != "cnn") std::printf("tokens           %d\n", cfg.tokens());
    std::printf("params           %ld\n", long(model.num_trainable()));
    if (model.num_params() > model.num_trainable())
      std::printf("buffers          %ld (BatchNorm running statistics)\n",
                  long(model.num_params() - model.num_trainable()));
    std::printf("flops per image  %.4g (forward, 2 per multiply-add)\n", model.flops_per_image());
    if (args->tensors)
      for (const ParamInfo& p : model.params()) {
        std::printf("  %-45s [", p.name.c_str());
        for (size_t i = 0; i < p.shape.size(); ++i) std::printf("%s%ld", i ? ", " : "", long(p.shape[i]));
        std::printf("]\n");
      }
  });
}

}  // namespace gmlp::cli
