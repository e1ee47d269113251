// gmlp export: a checkpoint, image or text, as an ONNX model of its eval-mode forward pass (one
// file: the graph, and the weights as initializers named by their state_dict keys), for ONNX
// Runtime, OpenVINO and the other runtimes that read ONNX. The batch dimension is symbolic.
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/base64.h"
#include "io/safetensors.h"
#include "nn/onnx_graph.h"
#include "train/checkpoint.h"
#include "train/lm_trainer.h"

namespace gmlp::cli {

namespace {

std::string shape_str(const onnx::ValueInfo& v) {
  std::string s;
  for (const onnx::Dim& d : v.shape)
    s += (s.empty() ? "" : ", ") + (d.param.empty() ? std::to_string(d.value) : d.param);
  return v.name + " (" + s + ")";
}

}  // namespace

void add_export(CLI::App& app) {
  struct Args {
    std::string checkpoint, onnx, head = "auto";
    int opset = kMinOpset;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "export",
      "Write a checkpoint, image or text, as an ONNX model (eval mode, dynamic batch) for ONNX Runtime, OpenVINO, ...");
  sub->add_option("--checkpoint", args->checkpoint,
                  "A checkpoint (.safetensors): an image classifier (gmlp train's, or a timm state_dict: gMLP, Mixer, "
                  "ResMLP, ViT) or a "
                  "text model (gmlp pretrain's or finetune's)")
      ->required();
  sub->add_option("--onnx", args->onnx, "The ONNX file to write (replaced if it exists)")->required();
  sub->add_option("--opset", args->opset,
                  "ONNX opset: the ops used mean the same in each; the oldest is read by the most runtimes")
      ->check(whole_in(kMinOpset, kMaxOpset))
      ->capture_default_str();
  sub->add_option(
         "--head", args->head,
         "Text models: the head the graph ends in: mlm (vocabulary logits at every position), classifier (the [CLS] "
         "head), or auto (classifier for a finetuned checkpoint, else mlm)")
      ->check(CLI::IsMember({"auto", "mlm", "classifier"}))
      ->capture_default_str();
  sub->callback([args] {
    const std::filesystem::path folder = std::filesystem::path(args->onnx).parent_path();  // before the work
    if (!folder.empty() && !std::filesystem::is_directory(folder))
      fail("invalid --onnx '", args->onnx, "': its folder '", folder.string(), "' does not exist");
    CheckpointKind kind;
    std::string described;  // "an image classifier checkpoint (gmlp train)", ...
    {
      const st::File file = st::File::open(args->checkpoint);  // the whole file: let go before loading
      kind = checkpoint_kind(file), described = describe_checkpoint(file);
    }
    onnx::Model m;
    std::string what;
    if (kind == CheckpointKind::text) {
      const TextCheckpoint ck = load_text_checkpoint(args->checkpoint);
      const bool finetuned = ck.metadata.count("task") > 0;
      const TextHead head =
          args->head == "classifier" || (args->head == "auto" && finetuned) ? TextHead::classifier : TextHead::mlm;
      if (head == TextHead::classifier && ck.config.num_classes == 0)
        fail("'", args->checkpoint, "' has no classification head (", described, "): export it with --head mlm");
      m = to_onnx(*ck.model, head, args->opset);
      m.metadata = {{"config", ck.config.to_json().dump()},
                    {"head", head == TextHead::mlm ? "mlm" : "classifier"},
                    {"tokenizer", base64_encode(ck.tokenizer->serialized())}};
      if (finetuned) m.metadata.push_back({"task", ck.metadata.at("task")});
      what = std::string(model_kind_name(ck.config.model)) + " text model, " +
             (head == TextHead::mlm ? "masked-language head" : "classifier head");
    } else {
      if (args->head != "auto")
        fail("--head ", args->head, " is for text models, but '", args->checkpoint, "' is ", described);
      const Checkpoint ck = load_image_checkpoint(args->checkpoint);
      m = to_onnx(*ck.model, args->opset);
      m.metadata = {{"config", ck.config.to_json().dump()},
                    {"mean", nlohmann::json(ck.norm.mean).dump()},
                    {"std", nlohmann::json(ck.norm.std).dump()}};
      if (!ck.class_names.empty()) m.metadata.push_back({"classes", nlohmann::json(ck.class_names).dump()});
      what = std::string(model_kind_name(ck.config.model)) + " image classifier";
    }
    m.doc = what + ", exported from '" + args->checkpoint + "' by gmlp export";  // "vit image classifier, ..."
    const std::string bytes = onnx::serialize(m);
    write_file_atomic(args->onnx, bytes);
    std::printf("%s: %s, opset %d, %s → %s, %zu nodes, %zu initializers, %.1f MB\n", args->onnx.c_str(), what.c_str(),
                args->opset, shape_str(m.graph.inputs[0]).c_str(), shape_str(m.graph.outputs[0]).c_str(),
                m.graph.nodes.size(), m.graph.initializers.size(), double(bytes.size()) / 1e6);
  });
}

}  // namespace gmlp::cli
