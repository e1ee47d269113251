// Validation and limits: a bad option, config or file is refused with one line naming it before
// any work, and a small input never asks for a large allocation. Training options out of range,
// the divergence guard, model sizes checked from the parameter table alone, checkpoints whose
// metadata asks for more than the file holds, memory plans, output probes, image folders and
// corpora. See docs/reliability.md, "Validation and limits".
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/memory.h"
#include "core/threads.h"
#include "data/image_folder.h"
#include "files.h"
#include "io/image.h"
#include "io/safetensors.h"
#include "io/writable.h"
#include "nn/text_model.h"
#include "text/corpus.h"
#include "train/checkpoint.h"
#include "train/guards.h"
#include "train/lm_trainer.h"

namespace gmlp {
namespace {

using test::expect_error;
using test::tmp_path;
namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --- training options ----------------------------------------------------------------------

// A broken internal invariant is not a user's mistake: GMLP_CHECK throws InternalError, which a
// handler of gmlp::Error (or of std::runtime_error, as the public API documents) does not catch.
TEST(Validation, InternalChecksAreNotUserErrors) {
  auto broken = [] { GMLP_CHECK(1 + 1 == 3); };
  EXPECT_THROW(broken(), InternalError);
  try {
    broken();
  } catch (const Error&) {
    ADD_FAILURE() << "an internal check was caught as a user's error";
  } catch (const std::runtime_error&) {
    ADD_FAILURE() << "an internal check was caught as std::runtime_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("check failed: 1 + 1 == 3"), std::string::npos) << e.what();
  }
}

// Each edit makes one option bad; the error names its flag and what it expected.
TEST(Validation, ImageTrainingOptionsOutOfRangeNameTheirFlag) {
  validate_options(TrainOptions{});  // the defaults pass
  struct Case {
    void (*edit)(TrainOptions&);
    std::vector<std::string> phrases;
  };
  const Case cases[] = {
      {[](TrainOptions& o) { o.lr = NAN; }, {"invalid --lr nan", "finite number >= 0"}},
      {[](TrainOptions& o) { o.lr = -1; }, {"invalid --lr -1"}},
      {[](TrainOptions& o) { o.lr = INFINITY; }, {"invalid --lr inf"}},
      {[](TrainOptions& o) { o.min_lr = 0.1, o.lr = 0.01; }, {"invalid --min-lr 0.1", "at most --lr"}},
      {[](TrainOptions& o) { o.epochs = 0; }, {"invalid --epochs 0", ">= 1"}},
      {[](TrainOptions& o) { o.batch_size = -3; }, {"invalid --batch-size -3"}},
      {[](TrainOptions& o) { o.warmup_epochs = 11, o.epochs = 10; },
       {"invalid --warmup-epochs 11", "at most --epochs"}},
      {[](TrainOptions& o) { o.weight_decay = -0.1; }, {"invalid --weight-decay -0.1"}},
      {[](TrainOptions& o) { o.weight_decay = 1000, o.lr = 0.01; },
       {"invalid --lr 0.01 with --weight-decay 1000", "below 1, found 10"}},
      {[](TrainOptions& o) { o.clip_norm = NAN; }, {"invalid --clip-norm nan"}},
      {[](TrainOptions& o) { o.label_smoothing = 1; }, {"invalid --label-smoothing 1", "[0, 1)"}},
      {[](TrainOptions& o) { o.crop_padding = -1; }, {"invalid --crop-padding -1"}},
      {[](TrainOptions& o) { o.mixup_alpha = 1e-9; }, {"invalid --mixup 1e-09", "(0: off)"}},
      {[](TrainOptions& o) { o.cutmix_alpha = -1; }, {"invalid --cutmix -1"}},
      {[](TrainOptions& o) { o.mix_prob = 1.5; }, {"invalid --mix-prob 1.5", "[0, 1]"}},
      {[](TrainOptions& o) { o.switch_prob = NAN; }, {"invalid --switch-prob nan"}},
      {[](TrainOptions& o) { o.erase_prob = 2; }, {"invalid --random-erase 2"}},
      {[](TrainOptions& o) { o.ema_decay = 1; }, {"invalid --ema 1", "[0, 1)"}},
      {[](TrainOptions& o) { o.eval_limit = -5; }, {"invalid --eval-limit -5"}},
      {[](TrainOptions& o) { o.train_limit = -1; }, {"invalid --train-limit -1"}},
      {[](TrainOptions& o) { o.precision = "f16"; }, {"invalid --precision 'f16'"}},
  };
  for (const Case& c : cases) {
    TrainOptions o;
    c.edit(o);
    try {
      validate_options(o);
      ADD_FAILURE() << "expected an error mentioning " << c.phrases[0];
    } catch (const Error& e) {
      for (const std::string& p : c.phrases) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
  TrainOptions zero_lr;  // lr 0 evaluates a model without changing it (finetune's zero-shot runs)
  zero_lr.lr = zero_lr.min_lr = 0;
  validate_options(zero_lr);
}

TEST(Validation, TextTrainingOptionsOutOfRangeNameTheirFlag) {
  LmOptions pre;
  validate_options(pre, false);
  LmOptions fine;
  fine.task = "genre", fine.epochs = 3, fine.warmup_epochs = 0.1;
  validate_options(fine, true);
  auto bad = [](LmOptions o, bool finetune, std::initializer_list<std::string> phrases) {
    expect_error([&] { validate_options(o, finetune); }, phrases);
  };
  LmOptions o = pre;
  o.mask_prob = 0;  // pretraining learns from masked tokens only
  bad(o, false, {"invalid --mask-prob 0", "(0, 1]"});
  o = pre, o.vocab_size = 3;
  bad(o, false, {"invalid --vocab-size 3", "6..1000000"});
  o = pre, o.lr = NAN;
  bad(o, false, {"invalid --lr nan"});
  o = pre, o.epochs = -3;
  bad(o, false, {"invalid --epochs -3"});
  o = pre, o.corpus = tmp_path("missing.txt");
  bad(o, false, {"failed to read corpus", "missing.txt"});
  o = fine, o.seq_len = 2;
  bad(o, true, {"invalid --seq-len 2", "3..8192"});
  o = fine, o.task = "next-verse", o.seq_len = 4;  // a pair needs [CLS] a [SEP] b [SEP]
  bad(o, true, {"invalid --seq-len 4", "5..8192"});
  o = fine, o.seq_len = -5;
  bad(o, true, {"invalid --seq-len -5"});
  o = fine, o.task = "poetry";
  bad(o, true, {"invalid --task 'poetry'"});
  o = fine, o.layer_decay = 0;
  bad(o, true, {"invalid --layer-decay 0", "(0, 1]"});
  o = fine, o.drop_path = 1;
  bad(o, true, {"invalid --drop-path 1"});
  o = fine, o.mlm_weight = INFINITY;
  bad(o, true, {"invalid --mlm-weight inf"});
}

// --- the divergence guard ---------------------------------------------------------------------

TEST(Validation, DivergenceGuardStopsNonFiniteAndExplodingLosses) {
  DivergenceGuard g(0.5);
  g.check(2.5, 0);
  g.check(250, 1);  // 100 times the first: the limit itself passes
  expect_error(
      [&] { g.check(2.4e9, 2); },
      {"training diverged at step 2: the loss is 2.4e+09, over 100 times the first step's 2.5", "--lr, now 0.5"});
  DivergenceGuard nan(1e-3);
  expect_error([&] { nan.check(NAN, 0); }, {"at step 0: the loss is nan (lower --lr"});
  // A resumed run near zero loss is held to 100 x 1, not 100 x its first loss.
  DivergenceGuard low(1e-3);
  low.check(0.01, 100);
  low.check(90, 101);
  expect_error([&] { low.check(101, 102); }, {"training diverged at step 102: the loss is 101, over 100"});
}

// --- model sizes from the parameter table ----------------------------------------------------

TEST(Validation, ParamTableMatchesTheAllocatedModel) {
  for (const ModelKind kind : model_kinds(Domain::vision)) {
    ModelConfig c;
    c.model = kind, c.img_size = 8, c.patch_size = 2, c.depth = 2, c.dim = 8, c.ffn = 16, c.heads = 2;
    const auto model = make_model<float>(c);
    const std::vector<ParamInfo> table = param_table(c);
    ASSERT_EQ(table.size(), model->params().size()) << kind;
    for (size_t i = 0; i < table.size(); ++i) {
      EXPECT_EQ(table[i].name, model->params()[i].name) << kind;
      EXPECT_EQ(table[i].shape, model->params()[i].shape) << kind;
    }
  }
  TextConfig t;
  t.model = ModelKind::bert_rel, t.vocab_size = 20, t.seq_len = 8, t.depth = 1, t.dim = 8, t.ffn = 16, t.heads = 2;
  EXPECT_EQ(param_table(t).size(), TextModel<float>(t).params().size());
}

TEST(Validation, ModelsTooLargeToAllocateAreRefusedNamingTheirFields) {
  ModelConfig c;  // 65536 x 262144 per projection: 17 billion values in fc1 alone
  c.dim = 65536, c.ffn = 262144;
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { param_table(c); },
               {"invalid model config", "more than the 2,147,483,648 a model may have",
                "'blocks.0.mlp_channels.fc1.weight' [262144, 65536]", "ffn 262144, dim 65536", "depth 6"});
  expect_error([&] { make_model<float>(c); }, {"more than the 2,147,483,648"});
  TextConfig t;
  t.vocab_size = 1000000, t.dim = 65536;
  expect_error([&] { param_table(t); }, {"'embed.weight' [1000000, 65536]", "vocab_size 1000000, dim 65536"});
  EXPECT_LT(seconds_since(t0), 5.0);
  ModelConfig eps;
  eps.ln_eps = NAN;
  expect_error([&] { eps.validate(); }, {"ln_eps must be in (0, 1]"});
}

// --- checkpoints whose metadata asks for more than the file holds ----------------------------

// A safetensors file of `tensors` (name -> shape, F32, zero) and metadata, written by hand.
std::string write_safetensors(const std::string& path, const std::map<std::string, std::string>& meta,
                              const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors = {}) {
  nlohmann::json header = {{"__metadata__", meta}};
  uint64_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    uint64_t n = 4;
    for (int64_t d : shape) n *= uint64_t(d);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  const std::string json = header.dump();
  std::string bytes(8, '\0');
  const uint64_t len = json.size();
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((len >> (8 * i)) & 0xff);
  bytes += json + std::string(offset, '\0');
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(Validation, SmallCheckpointAskingForALargeModelFailsBeforeAllocating) {
  // 3 GB of weights asked for by a file of a few hundred bytes: refused from the header alone.
  ModelConfig big;
  big.img_size = 224, big.in_chans = 3, big.patch_size = 16, big.depth = 30, big.dim = 2048, big.ffn = 8192;
  const std::string path =
      write_safetensors(tmp_path("big.safetensors"), {{"format", "gmlp"}, {"config", big.to_json().dump()}});
  EXPECT_LT(fs::file_size(path), 1000u);
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { load_checkpoint(path); },
               {"failed to load checkpoint '" + path + "'", "tensor 'stem.proj.weight' is missing",
                "its config asks for", "the file has 0"});
  // A tensor of the right name with another shape is named with both shapes.
  const std::string shaped =
      write_safetensors(tmp_path("shaped.safetensors"), {{"format", "gmlp"}, {"config", big.to_json().dump()}},
                        {{"stem.proj.weight", {4, 3, 16, 16}}});
  expect_error([&] { load_checkpoint(shaped); },
               {"tensor 'stem.proj.weight' has shape [4, 3, 16, 16], expected [2048, 3, 16, 16]"});
  // The same for a text checkpoint (fill-mask, finetune --init).
  TextConfig text;
  text.vocab_size = 50000, text.dim = 4096, text.ffn = 16384, text.depth = 12;
  const std::string text_path =
      write_safetensors(tmp_path("text.safetensors"),
                        {{"format", "gmlp-text"}, {"config", text.to_json().dump()}, {"tokenizer", "AAAA"}});
  expect_error([&] { load_text_checkpoint(text_path); },
               {"failed to load text checkpoint '" + text_path + "'", "tensor 'embed.weight' is missing"});
  EXPECT_LT(seconds_since(t0), 5.0);  // allocating the model first would take 3 GB and half a minute
}

// A state_dict saved from timm has no config: the kind comes from the first block's tensor names,
// the sizes from their shapes (interop_timm.py checks the logits of each kind end to end).
TEST(Validation, TimmStateDictsAreReadFromTheirTensorNamesAndShapes) {
  using Tensors = std::vector<std::pair<std::string, std::vector<int64_t>>>;
  auto config_of = [&](const std::string& name, const std::map<std::string, std::string>& meta, const Tensors& t,
                       std::vector<std::string>* notes = nullptr) {
    return config_from_tensors(st::File::open(write_safetensors(tmp_path(name), meta, t)), notes);
  };
  const ModelConfig mixer = config_of("mixer.safetensors", {},
                                      {{"stem.proj.weight", {32, 1, 4, 4}},
                                       {"blocks.0.norm1.weight", {32}},
                                       {"blocks.0.mlp_tokens.fc1.weight", {24, 49}},
                                       {"blocks.0.mlp_channels.fc1.weight", {64, 32}},
                                       {"blocks.1.norm1.weight", {32}},
                                       {"head.weight", {10, 32}}});
  EXPECT_EQ(mixer.model, ModelKind::mixer);
  EXPECT_EQ(mixer.depth, 2);
  EXPECT_EQ(mixer.token_ffn, 24);
  EXPECT_EQ(mixer.ffn, 64);
  EXPECT_EQ(mixer.img_size, 28);
  const Tensors vit = {{"patch_embed.proj.weight", {192, 3, 16, 16}},
                       {"cls_token", {1, 1, 192}},
                       {"pos_embed", {1, 197, 192}},
                       {"blocks.0.norm1.weight", {192}},
                       {"blocks.0.attn.qkv.weight", {576, 192}},
                       {"blocks.0.mlp.fc1.weight", {768, 192}},
                       {"head.weight", {1000, 192}}};
  std::vector<std::string> notes;
  const ModelConfig tiny = config_of("vit.safetensors", {}, vit, &notes);
  EXPECT_EQ(tiny.model, ModelKind::vit);
  EXPECT_EQ(tiny.img_size, 224);
  EXPECT_EQ(tiny.heads, 3);  // not in the tensors: timm's default for width 192, and said so
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("reading it with 3, timm's default for width 192"), std::string::npos) << notes[0];
  notes.clear();
  EXPECT_EQ(config_of("vit4.safetensors", {{"heads", "4"}}, vit, &notes).heads, 4);
  EXPECT_TRUE(notes.empty());
  expect_error(
      [&] {
        config_of("vitx.safetensors", {{"heads", "four"}}, vit);
      },
      {"metadata 'heads' is 'four', expected a whole number"});
  EXPECT_TRUE(tiny.class_token);
  EXPECT_EQ(tiny.global_pool, "token");
  // timm's global_pool="avg": fc_norm after pooling, with or without the class token.
  Tensors pooled = vit;
  pooled.push_back({"fc_norm.weight", {192}});
  const ModelConfig cls_avg = config_of("cls_avg.safetensors", {}, pooled);
  EXPECT_TRUE(cls_avg.class_token);
  EXPECT_EQ(cls_avg.global_pool, "avg");
  EXPECT_EQ(cls_avg.img_size, 224);
  pooled.erase(pooled.begin() + 1);  // no class token, and one position fewer
  pooled[1] = {"pos_embed", {1, 196, 192}};
  const ModelConfig avg = config_of("avg.safetensors", {}, pooled);
  EXPECT_FALSE(avg.class_token);
  EXPECT_EQ(avg.global_pool, "avg");
  EXPECT_EQ(avg.img_size, 224);
  Tensors prenorm = pooled;  // no class token and no fc_norm: global_pool="avg", fc_norm=False
  prenorm.pop_back();
  expect_error([&] { config_of("prenorm.safetensors", {}, prenorm); },
               {"prenorm.safetensors", "without a class token or 'fc_norm.weight'", "fc_norm=False"});
  expect_error(
      [&] {
        config_of("none.safetensors", {}, {{"stem.proj.weight", {8, 1, 4, 4}}, {"head.weight", {10, 8}}});
      },
      {"tensor 'blocks.0.norm.weight' is missing", "expected a timm state_dict: gMLP, MlpMixer"});
  expect_error(
      [&] {
        config_of("odd.safetensors", {},
                  {{"stem.proj.weight", {8, 1, 4, 4}},
                   {"blocks.0.norm1.alpha", {1, 1, 8}},
                   {"blocks.0.linear_tokens.weight", {48, 48}},
                   {"blocks.0.mlp_channels.fc1.weight", {16, 8}},
                   {"head.weight", {10, 8}}});
      },
      {"mix 48 tokens, expected a square number of patches"});
}

// --- memory plans -------------------------------------------------------------------------------

TEST(Validation, BatchesWhoseActivationsCannotFitNameBatchSize) {
  ModelConfig c;
  c.depth = 2, c.dim = 16, c.ffn = 32;
  const auto model = make_model<float>(c);
  const int64_t per_image = model->plan_bytes(1), huge = memory_limit_bytes() / per_image * 4 + 1;
  EXPECT_GT(model->plan_bytes(10), 9 * per_image);
  expect_error([&] { model->plan(huge); }, {"training activations", "--batch-size"});
  model->plan(4);  // still plans what fits
  EXPECT_EQ(model->planned_batch(), 4);
  // Inference runs in chunks, and its plan lays out one: any batch fits.
  model->plan(huge, Mode::infer);
  EXPECT_EQ(model->planned_batch(), huge);
  EXPECT_LT(model->chunk_batch(), huge);
  EXPECT_EQ(int64_t(model->activation_bytes()), model->plan_bytes(model->chunk_batch(), Mode::infer));
  EXPECT_LE(int64_t(model->activation_bytes()), Model<float>::kInferChunkBytes + model->plan_bytes(1, Mode::infer));
}

TEST(Validation, ThreadCountsAboveTheCapAreRefused) {
  EXPECT_GE(available_cpus(), 1);
  expect_error([] { set_threads(kMaxThreads + 1); }, {"invalid thread count 1025", "at most 1024"});
}

// --- output probes --------------------------------------------------------------------------

TEST(Validation, OutputPathsAreProbedWithoutLeavingFiles) {
  const std::string dir = tmp_path("out");
  fs::create_directories(dir);
  check_writable_file(dir + "/logits.npy");
  check_writable_folder(dir + "/new/deeper");  // created later by the command
  EXPECT_FALSE(fs::exists(dir + "/new"));
  EXPECT_TRUE(fs::is_empty(dir));  // the probe file is gone
  expect_error([&] { check_writable_file(dir); }, {"is a folder, expected a file name"});
  expect_error([&] { check_writable_file(dir + "/missing/l.npy"); },
               {"its folder '" + dir + "/missing' does not exist"});
  const std::string file = dir + "/plain";
  std::ofstream(file) << "x";
  expect_error([&] { check_writable_file(file + "/l.npy"); }, {"'" + file + "' is not a folder"});
  expect_error([&] { check_writable_folder(file + "/figs"); }, {"'" + file + "' is a file, expected a folder"});
  if (fs::is_directory("/proc/self"))  // a file system that takes no new files, even from root
    expect_error([] { check_writable_file("/proc/self/logits.npy"); }, {"cannot create a file in '/proc/self'"});
}

// --- data -----------------------------------------------------------------------------------

TEST(Validation, EmptyClassFolderIsNamed) {
  const std::string root = tmp_path("folder");
  const uint8_t px[4] = {0, 64, 128, 255};
  for (const char* d : {"/train/cat", "/train/dog", "/test/cat"}) fs::create_directories(root + d);
  img::write_png(root + "/train/cat/a.png", 2, 2, 1, px);
  img::write_png(root + "/test/cat/b.png", 2, 2, 1, px);
  expect_error([&] { data::load_image_folder(root, "train", 1, 2); },
               {"class folder '" + root + "/train/dog' has no .png, .jpg or .jpeg images"});
  img::write_png(root + "/train/dog/c.png", 2, 2, 1, px);
  EXPECT_EQ(data::load_image_folder(root, "train", 1, 2).count, 2);
}

TEST(Validation, CorpusSizeIsCheckedBeforeReading) {
  // A sparse file: 2 GiB to stat, nothing to read.
  const std::string big = tmp_path("big.txt");
  std::ofstream(big) << "x";
  fs::resize_file(big, uint64_t{2} << 30);
  const auto t0 = std::chrono::steady_clock::now();
  expect_error([&] { text::check_corpus_file(big); },
               {"failed to read corpus '" + big + "'", "2147483648 bytes", "1024 MiB"});
  expect_error([&] { text::load_lines(big); }, {big, "larger than the limit"});
  EXPECT_LT(seconds_since(t0), 1.0);
  fs::remove(big);
  // More lines than the cap: counted before a string is made for any of them.
  const std::string many = tmp_path("many.txt");
  std::ofstream(many) << std::string(size_t(text::kMaxCorpusLines) + 1, '\n');
  expect_error([&] { text::load_lines(many); }, {many, "16777217 lines, more than the 16777216"});
  fs::remove(many);
}

}  // namespace
}  // namespace gmlp
