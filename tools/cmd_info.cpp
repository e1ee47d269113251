// gmlp info: a model's architecture, parameter count and FLOPs per image.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "nn/text_model.h"
#include "train/checkpoint.h"
#include "train/lm_trainer.h"

namespace gmlp::cli {

namespace {

void print_tensors(const std::vector<ParamInfo>& params) {
  for (const ParamInfo& p : params) {
    std::printf("  %-45s [", p.name.c_str());
    for (size_t i = 0; i < p.shape.size(); ++i) std::printf("%s%ld", i ? ", " : "", long(p.shape[i]));
    std::printf("]\n");
  }
}

// A text model (a kjv-* preset, or a checkpoint of gmlp pretrain or finetune, which carries its
// tokenizer): FLOPs are per sequence of seq_len tokens, the heads excluded.
void print_text_info(const TextConfig& cfg, bool json, bool tensors) {
  const TextModel<float> model(cfg);
  if (json) {
    nlohmann::json j = {{"params", model.num_trainable()},
                        {"flops_per_sequence", model.flops_per_sequence()},
                        {"tokens", cfg.seq_len},
                        {"config", cfg.to_json()}};
    if (tensors)
      for (const ParamInfo& p : model.params()) j["tensors"][p.name] = p.shape;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("model            %s (text), vocabulary %d, %d tokens, %s\n", cfg.model.c_str(),
              cfg.vocab_size, cfg.seq_len,
              cfg.num_classes > 0 ? (std::to_string(cfg.num_classes) + " classes").c_str() : "MLM head");
  std::printf("config           %s\n", cfg.to_json().dump().c_str());
  std::printf("params           %ld\n", long(model.num_trainable()));
  std::printf("flops per seq    %.4g (encoder forward, 2 per multiply-add)\n", model.flops_per_sequence());
  if (tensors) print_tensors(model.params());
}

bool is_text_checkpoint(const std::string& path) {
  return st::File::open(path).metadata().count("tokenizer") > 0;
}

bool is_text_preset(const std::string& name) {
  for (const TextPreset& p : text_presets())
    if (p.name == name) return true;
  return false;
}

}  // namespace

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
    if (args->preset.empty() ? is_text_checkpoint(args->checkpoint) : is_text_preset(args->preset)) {
      print_text_info(args->preset.empty() ? load_text_checkpoint(args->checkpoint).config
                                           : find_text_preset(args->preset).config,
                      args->json, args->tensors);
      return;
    }
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
    if (args->tensors) print_tensors(model.params());
  });
}

}  // namespace gmlp::cli
