// A training step allocates nothing once its buffers are planned: heap allocations, counted by
// bench/alloc_counter.c linked into this program (every malloc-family entry point, whoever calls
// it: gmlp, libstdc++, oneDNN, libgomp), over steps 2..N of every image model kind and of
// pretraining and finetuning. A program of its own: the counter replaces malloc, which the
// sanitizers must own, so it is not built under GMLP_SANITIZE.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "core/gemm.h"
#include "core/matmul.h"
#include "core/rng.h"
#include "core/threads.h"
#include "files.h"
#include "nn/config.h"
#include "nn/model.h"
#include "nn/text_model.h"
#include "train/image_task.h"
#include "train/lm_trainer.h"
#include "train/loop.h"
#include "train/optimizer.h"

extern "C" long gmlp_allocations(void);

namespace gmlp {
namespace {

// Two threads whatever the machine: with one, every OpenMP parallel region starts a team of one
// thread, which libgomp allocates each time (gmlp's loops run parallel regions throughout).
class Allocations : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("GMLP_ALLOC_QUIET", "1", 1);
    threads_ = num_threads();
    set_threads(2);
  }
  void TearDown() override { set_threads(threads_); }
  int threads_ = 0;
};

data::ImageSet random_images(const ModelConfig& cfg, int n, uint64_t seed) {
  data::ImageSet set;
  set.count = n, set.channels = cfg.in_chans, set.height = set.width = cfg.img_size, set.classes = cfg.num_classes;
  Rng rng(seed);
  set.pixels.resize(size_t(n) * size_t(cfg.in_chans) * size_t(cfg.img_size) * size_t(cfg.img_size));
  for (auto& p : set.pixels) p = uint8_t(rng.below(256));
  for (int i = 0; i < n; ++i) set.labels.push_back(uint8_t(i % cfg.num_classes));
  for (int k = 0; k < cfg.num_classes; ++k) set.class_names.push_back("c" + std::to_string(k));
  return set;
}

// The precisions whose products are gmlp's own: f32, and bf16 wherever the CPU has AVX512-BF16
// (on AMX's tiles where it has those too).
std::vector<Precision> own_precisions() {
  std::vector<Precision> out{Precision::f32};
  if (gemm::bf16_available()) out.push_back(Precision::bf16);
  return out;
}

// Every image model kind, by its small preset, with every augmentation and regulariser the
// step runs (crop, flip, Mixup/CutMix, random erasing, drop path, the moving average) and two
// micro-batches a step: run_loop's step (StepGradients, then AdamW and the moving average),
// counted from the second; in each precision whose products are gmlp's own.
TEST_F(Allocations, NoneInImageTrainingStepsOfEveryKind) {
  for (const Precision precision : own_precisions())
    for (const Preset& preset : presets()) {
      if (preset.name.rfind("fmnist-", 0) != 0) continue;
      SCOPED_TRACE(preset.name + " " + precision_name(precision));
      set_matmul_precision(precision);
      ModelConfig cfg = preset.config;
      cfg.drop_path = 0.1;
      auto model = make_model<float>(cfg), ema = make_model<float>(cfg);
      Rng init(1);
      model->init(init);
      const int B = 32, K = 2, micro = B / K;
      const data::ImageSet set = random_images(cfg, 4 * B, 2);
      TrainOptions opt;
      opt.mixup_alpha = 0.8, opt.cutmix_alpha = 1.0, opt.erase_prob = 0.25, opt.ema_decay = 0.99;
      const data::Normalization norm = data::Normalization::gmlp_default(cfg.in_chans);
      ImageTask task(*model, ema.get(), set, set, norm, opt);
      task.plan(micro);
      const Trainable p = task.trainable();
      AdamW<float> adamw(*p.params, AdamWConfig{});
      std::vector<int> order(size_t(set.count));
      std::iota(order.begin(), order.end(), 0);
      std::vector<uint64_t> keys(static_cast<size_t>(B));
      StepGradients gradients(task, B, K);
      long before = 0;
      for (int s = 0; s < 4; ++s) {
        if (s == 1) before = gmlp_allocations();
        for (int b = 0; b < B; ++b) keys[size_t(b)] = item_key(3, 0, int64_t(s) * B + b);
        gradients.run(order.data() + s * B, keys.data());
        optimizer_step(adamw, p.weights, p.grads, p.size, 1.0, 1e-3);
        task.after_update();
      }
      set_matmul_precision(Precision::f32);
      EXPECT_EQ(gmlp_allocations() - before, 0) << "heap allocations in steps 2..4";
    }
}

// Pretraining (gMLP and BERT) and finetuning (with the masked-token loss beside the task's),
// whole runs of 20 steps through the one loop, counted between the end of step 1 and the end of
// step 20 (loop.h's step observer).
long g_after_first = -1, g_after_last = -1;
void observe(int64_t steps_done) {
  const long now = gmlp_allocations();
  if (steps_done == 1) g_after_first = now;
  g_after_last = now;
}

// Allocations in steps 2..20 of run().
template <class Run>
long in_steps_after_the_first(const Run& run) {
  g_after_first = g_after_last = -1;
  set_step_observer(observe);
  run();
  set_step_observer(nullptr);
  EXPECT_GE(g_after_first, 0) << "the run made no step";
  return g_after_last - g_after_first;
}

std::string made_up_corpus() {  // 600 lines of words of 1-3 random syllables
  std::string path = test::tmp_path("corpus.txt");
  const char* syllables[] = {"ba", "ke", "lo", "mi", "nu", "ra",  "se", "ti", "vo", "wa",
                             "za", "en", "or", "is", "ul", "dra", "ph", "th", "qu", "x"};
  std::ofstream out(path);
  Rng rng(4);
  for (int line = 0; line < 600; ++line) {
    for (int w = 0; w < 12; ++w) {
      out << (w ? " " : "");
      for (int s = 0, n = 1 + int(rng.below(3)); s < n; ++s) out << syllables[rng.below(20)];
    }
    out << ".\n";
  }
  return path;
}

LmOptions text_options(const std::string& out) {
  LmOptions o;
  o.out_dir = out;
  o.epochs = 1, o.batch_size = 16, o.grad_accum = 2, o.train_limit = 16 * 20, o.eval_limit = 16, o.seed = 5;
  o.vocab_size = 200;
  return o;
}

TEST_F(Allocations, NoneInPretrainingOrFinetuningSteps) {
  const std::string text = made_up_corpus();
  for (const char* preset : {"kjv-gmlp", "kjv-bert"}) {
    SCOPED_TRACE(preset);
    TextConfig config = find_text_preset(preset).config;
    config.depth = 1, config.dim = 16, config.ffn = 32, config.seq_len = 16, config.heads = 2;
    LmOptions o = text_options(test::tmp_path(preset));
    o.corpus = text;
    EXPECT_EQ(in_steps_after_the_first([&] { pretrain(config, o, false, true); }), 0) << "pretraining";
  }
  LmOptions o = text_options(test::tmp_path("finetune"));
  o.init = test::tmp_path("kjv-gmlp") + "/checkpoint.safetensors";
  o.task = "ot-nt", o.mlm_weight = 0.5;
  EXPECT_EQ(in_steps_after_the_first([&] { finetune(o, false, true); }), 0) << "finetuning";
}

}  // namespace
}  // namespace gmlp
