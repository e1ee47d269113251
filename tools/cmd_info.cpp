// gmlp info: a model's architecture, parameter count and FLOPs per image; for a checkpoint also
// its class names and what its run recorded (epochs, data, accuracies, the training options).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "commands.h"
#include "core/error.h"
#include "data/idx.h"
#include "io/safetensors.h"
#include "nn/text_model.h"
#include "train/checkpoint.h"
#include "train/eval_subset.h"
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

constexpr size_t kIndent = 17, kWidth = 100;  // the value column, and where lines wrap

// "label            value", the value's items (", "-separated) wrapped under the value column.
void print_wrapped(const std::string& label, const std::vector<std::string>& items) {
  std::string line = label + std::string(kIndent > label.size() ? kIndent - label.size() : 1, ' ');
  size_t used = line.size();
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string item = items[i] + (i + 1 < items.size() ? "," : "");
    if (i > 0 && used + 1 + item.size() > kWidth) {
      line += "\n" + std::string(kIndent, ' ');
      used = kIndent;
    } else if (i > 0) {
      line += ' ', ++used;
    }
    line += item, used += item.size();
  }
  std::printf("%s\n", line.c_str());
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %%", 100 * v);
  return buf;
}

// What a checkpoint's metadata says of its data and run (checkpoint.h, run_files.h's
// training_summary): class names, the task, epochs, accuracies and the training options.
void print_run_record(const std::map<std::string, std::string>& meta, bool text) {
  const nlohmann::json classes = meta_json(meta, "classes");
  if (classes.is_array() && !classes.empty()) {
    std::vector<std::string> names;
    for (const auto& c : classes) names.push_back(c.is_string() ? c.get<std::string>() : c.dump());
    names[0] = std::to_string(names.size()) + ": " + names[0];
    print_wrapped("classes", names);
  }
  const nlohmann::json t = meta_json(meta, "training");
  if (!t.is_object()) {  // a checkpoint without a record of its run, such as a timm file
    if (meta.count("epoch")) std::printf("trained          %s epochs\n", meta.at("epoch").c_str());
    return;
  }
  const nlohmann::json o = t.value("options", nlohmann::json::object());
  const nlohmann::json last = t.value("last", nlohmann::json::object()),
                       best = t.value("best", nlohmann::json::object());
  auto str = [&](const char* key) { return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : ""; };
  // What it was trained on.
  std::string what = std::to_string(t.value("epochs", 0)) + " epochs";
  if (!str("preset").empty()) what += " of preset " + str("preset");
  if (!str("task").empty()) {
    what += " on task " + str("task");
    if (!str("init").empty()) what += ", from " + str("init");
  } else if (text) {
    what += " on " + (str("corpus").empty() ? std::string("the KJV") : str("corpus"));
  } else {
    what += " on " + (str("data_dir").empty() ? std::string(data::kFashionMnistDir) : str("data_dir"));
  }
  if (const int limit = o.value("train_limit", 0); limit > 0)
    what += !text                 ? " (its first " + thousands(limit) + " train images)"
            : str("task").empty() ? " (its first " + thousands(limit) + " train sequences)"
                                  : " (" + thousands(limit) + " train examples drawn by the seed)";
  std::printf("trained          %s\n", what.c_str());
  // Its last epoch's figures, the best accuracy beside each where another epoch did better.
  std::vector<std::string> figures;
  // Pretraining's accuracies are of the masked tokens.
  const std::string acc = text && str("task").empty() ? "masked-token acc" : "acc";
  // Each accuracy, with the keys that say how much of its split was read (none for train).
  struct Acc {
    const char* key;
    std::string name;
    const char *count, *total;
  };
  const Acc accs[] = {{"train_acc", "train " + acc, "", ""},
                      {"dev_acc", "dev " + acc, "dev_count", "dev_total"},
                      {"test_acc", "test " + acc, "test_count", "test_total"},
                      {"test_acc_ema", "moving-average test acc", "test_count", "test_total"},
                      {"dev_nsp_acc", "dev next-sentence acc", "dev_nsp_pairs", "dev_nsp_total"}};
  for (const auto& [key, name, count, total] : accs) {
    if (!last.contains(key) || !last[key].is_number()) continue;
    std::string f = name + " " + percent(last[key].get<double>());
    const bool train = std::string(key) == "train_acc";
    std::vector<std::string> notes;  // how much of the split, and the best epoch's figure
    if (!train && last.contains(count) && last.contains(total))
      notes.push_back(subset_label(last[count].get<int64_t>(), last[total].get<int64_t>()));
    if (!train && best.contains(key) && best[key].get<double>() > last[key].get<double>())
      notes.push_back("best " + percent(best[key].get<double>()));
    std::string joined;
    for (const std::string& n : notes)
      if (!n.empty()) joined.append(joined.empty() ? "" : "; ").append(n);
    if (!joined.empty()) f.append(" (").append(joined).append(")");
    figures.push_back(std::move(f));
  }
  if (last.contains("dev_ppl") && last["dev_ppl"].is_number()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "dev perplexity %.2f", last["dev_ppl"].get<double>());
    figures.push_back(buf);
  }
  if (!figures.empty()) print_wrapped("last epoch", figures);
  // The rest of the options, as key=value.
  std::vector<std::string> recipe;
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& k = it.key();
    if (k == "preset" || k == "task" || k == "init" || k == "corpus" || k == "data_dir" || k == "train_limit") continue;
    if (it->is_string() && it->get<std::string>().empty()) continue;
    char number[32];
    if (it->is_number_float()) std::snprintf(number, sizeof number, "%g", it->get<double>());
    recipe.push_back(k + "=" +
                     (it->is_string()         ? it->get<std::string>()
                      : it->is_number_float() ? number
                                              : it->dump()));
  }
  if (!recipe.empty()) print_wrapped("options", recipe);
}

// The record's entries for --json: classes, task and training, where the metadata has them.
void add_run_record(nlohmann::json& j, const std::map<std::string, std::string>& meta) {
  for (const char* key : {"classes", "training"})
    if (const nlohmann::json v = meta_json(meta, key); !v.is_null() && !v.is_discarded()) j[key] = v;
  if (meta.count("task")) j["task"] = meta.at("task");
}

// A text model (a kjv-* preset, or a checkpoint of gmlp pretrain or finetune, which carries its
// tokenizer): FLOPs are per sequence of seq_len tokens, the heads excluded.
// meta: a checkpoint's metadata (empty for a preset).
void print_text_info(const TextConfig& cfg, const std::map<std::string, std::string>& meta, bool json, bool tensors) {
  const TextModel<float> model(cfg);
  if (json) {
    nlohmann::json j = {{"params", model.num_trainable()},
                        {"flops_per_sequence", model.flops_per_sequence()},
                        {"tokens", cfg.seq_len},
                        {"config", cfg.to_json()}};
    add_run_record(j, meta);
    if (tensors)
      for (const ParamInfo& p : model.params()) j["tensors"][p.name] = p.shape;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("model            %s (text), vocabulary %d, %d tokens, %s\n", model_kind_name(cfg.model), cfg.vocab_size,
              cfg.seq_len, cfg.num_classes > 0 ? (std::to_string(cfg.num_classes) + " classes").c_str() : "MLM head");
  std::printf("config           %s\n", cfg.to_json().dump().c_str());
  std::printf("params           %ld\n", long(model.num_trainable()));
  std::printf("flops per seq    %.4g (encoder forward, 2 per multiply-add)\n", model.flops_per_sequence());
  if (meta.count("task")) std::printf("task             %s\n", meta.at("task").c_str());
  print_run_record(meta, true);
  if (tensors) print_tensors(model.params());
}

bool is_text_checkpoint(const std::string& path) { return st::File::open(path).metadata().count("tokenizer") > 0; }

bool is_text_preset(const std::string& name) {
  for (const TextPreset& p : text_presets())
    if (p.name == name) return true;
  return false;
}

}  // namespace

nlohmann::json meta_json(const std::map<std::string, std::string>& meta, const char* key) {
  const auto it = meta.find(key);
  return it == meta.end() ? nlohmann::json() : nlohmann::json::parse(it->second, nullptr, false);
}

void add_info(CLI::App& app) {
  struct Args {
    std::string preset, checkpoint;
    bool json = false, list = false, tensors = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "info",
      "Architecture, parameters and FLOPs of a preset or checkpoint; a checkpoint's classes and training record");
  auto* preset = sub->add_option("--preset", args->preset, "Model preset, image or text (see --list)");
  auto* ckpt = sub->add_option("--checkpoint", args->checkpoint, "Checkpoint (.safetensors), image or text");
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
      if (args->preset.empty()) {
        const TextCheckpoint ck = load_text_checkpoint(args->checkpoint);
        print_text_info(ck.config, ck.metadata, args->json, args->tensors);
      } else {
        print_text_info(find_text_preset(args->preset).config, {}, args->json, args->tensors);
      }
      return;
    }
    std::map<std::string, std::string> meta;  // a checkpoint's
    ModelConfig cfg;
    if (args->preset.empty()) {
      Checkpoint ck = load_image_checkpoint(args->checkpoint);
      cfg = ck.config, meta = ck.metadata;
    } else {
      cfg = find_preset(args->preset).config;
    }
    const auto model_ptr = make_model<float>(cfg);
    const Model<float>& model = *model_ptr;
    if (args->json) {
      nlohmann::json j = {{"params", model.num_trainable()},
                          {"buffers", model.num_params() - model.num_trainable()},
                          {"flops_per_image", model.flops_per_image()},
                          {"tokens", cfg.tokens()},
                          {"config", cfg.to_json()}};
      add_run_record(j, meta);
      if (args->tensors)
        for (const ParamInfo& p : model.params()) j["tensors"][p.name] = p.shape;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("model            %s, %d×%d×%d input, %d classes\n", model_kind_name(cfg.model), cfg.in_chans,
                cfg.img_size, cfg.img_size, cfg.num_classes);
    std::printf("config           %s\n", cfg.to_json().dump().c_str());
    if (model_kind_info(cfg.model).patches) std::printf("tokens           %d\n", cfg.tokens());
    std::printf("params           %ld\n", long(model.num_trainable()));
    if (model.num_params() > model.num_trainable())
      std::printf("buffers          %ld (BatchNorm running statistics)\n",
                  long(model.num_params() - model.num_trainable()));
    std::printf("flops per image  %.4g (forward, 2 per multiply-add)\n", model.flops_per_image());
    print_run_record(meta, false);
    if (args->tensors) print_tensors(model.params());
  });
}

}  // namespace gmlp::cli
