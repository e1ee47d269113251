// Whole models, every kind: gradients against finite differences in double; logits, loss, every
// gradient and three AdamW steps against the PyTorch reference (timm's model where timm has it;
// fixtures from tests/reference/make_fixtures.py); and the invariances (threads 1 vs 2, a batch
// vs its rows one at a time, the inference plan, inference streams, save → load).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "check.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/matmul.h"
#include "core/threads.h"
#include "io/safetensors.h"
#include "nn/model.h"
#include "ops/cross_entropy.h"
#include "tolerances.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/optimizer.h"

namespace gmlp {
namespace {

using test::close;

// Every model kind the tests cover, the gate ablations ("gmlp:additive" is gMLP with that gate)
// and ViT's pooling ("vit:avg", global_pool avg without a class token; "vit:cls_avg", with one).
const std::vector<std::string> kKinds = {
    "gmlp",    "gmlp:multiplicative", "gmlp:additive", "gmlp:linear", "amlp",   "vit",
    "vit:avg", "vit:cls_avg",         "mixer",         "resmlp",      "ffonly", "eamlp",
    "cnn"};

ModelConfig with_kind(ModelConfig c, const std::string& kind) {
  const size_t colon = kind.find(':');
  c.model = parse_model_kind(kind.substr(0, colon), Domain::vision);
  if (colon == std::string::npos) return c;
  const std::string variant = kind.substr(colon + 1);
  if (c.model == ModelKind::vit)
    c.global_pool = "avg", c.class_token = variant == "cls_avg";
  else
    c.gate = variant;
  return c;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& ch : s)
    if (ch == ':') ch = '_';
  return s;
}

ModelConfig tiny_config(const std::string& kind = "gmlp") {
  ModelConfig c;
  c.img_size = 8, c.in_chans = 2, c.patch_size = 2, c.depth = 2, c.dim = 6, c.ffn = 10, c.num_classes = 5, c.heads = 2,
  c.token_ffn = 5, c.memory = 4, c.attn_dim = 3;
  c = with_kind(c, kind);
  if (c.model == ModelKind::cnn) c.dim = 3, c.depth = 1;  // widths 3/6/12: few parameters to perturb
  return c;
}

// Random parameters of O(1) scale everywhere, the SGU's W included: timm's init (W ≈ 0, b = 1)
// would leave the spatial path untested. BatchNorm's running statistics (buffers) get a random
// mean and a positive variance, so that eval mode is exercised off its (0, 1) start.
template <class T>
void randomize(Model<T>& m, Rng& rng) {
  for (const ParamInfo& p : m.params()) {
    const int64_t fan_in = p.shape.size() >= 2 ? p.numel / p.shape[0] : 1;
    const bool is_bn_weight =
        p.shape.size() == 1 && p.name.find("bn") != std::string::npos && p.name.ends_with(".weight");
    const bool is_norm_weight =
        p.shape.size() == 1 && (p.name.find("norm.weight") != std::string::npos || is_bn_weight);
    const bool is_running_var = !p.trainable && p.name.ends_with(".running_var");
    for (int64_t i = 0; i < p.numel; ++i) {
      const double x = rng.normal();
      m.weights()[p.offset + i] = T(p.shape.size() >= 2 ? x / std::sqrt(double(fan_in))
                                                        : (is_norm_weight || is_running_var ? 1 + 0.2 * x : 0.2 * x));
    }
  }
}

// In training mode (BatchNorm on batch statistics; drop path is 0 in these configs).
template <class T>
T model_loss(Model<T>& m, const std::vector<T>& images, const std::vector<int32_t>& labels, std::vector<T>& probs) {
  const int64_t B = int64_t(labels.size());
  Rng rng(0);
  const T* logits = m.forward(images.data(), B, &rng);
  return cross_entropy_forward(probs.data(), logits, labels.data(), B, m.config().num_classes, T(0.1));
}

class EveryKind : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Models, EveryKind, ::testing::ValuesIn(kKinds), test_name);

using test::OneThread;

TEST_P(EveryKind, EveryGradientMatchesFiniteDifferences) {
  const OneThread one_thread;
  auto mp = make_model<double>(tiny_config(GetParam()));
  Model<double>& m = *mp;
  Rng rng(21);
  randomize(m, rng);
  const int64_t B = 3, K = m.config().num_classes;
  auto images = test::randn<double>(B * 2 * 8 * 8, rng);
  const std::vector<int32_t> labels = {4, 0, 2};
  std::vector<double> probs(B * K), dlogits(B * K);
  m.plan(B);
  model_loss(m, images, labels, probs);
  cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K, 0.1);
  m.zero_grad();
  m.backward(dlogits.data());
  const std::vector<double> analytic(m.grads(), m.grads() + m.num_params());
  const std::vector<double> numeric =
      test::numeric_gradient(m.weights(), m.num_params(), [&] { return model_loss(m, images, labels, probs); });
  for (const ParamInfo& p : m.params())
    EXPECT_TRUE(close(p.name, analytic.data() + p.offset, numeric.data() + p.offset, p.numel, tol::kFdRel));
}

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("GMLP_FIXTURES");
  return std::string(dir ? dir : "fixtures") + "/" + name;
}

class ReferenceParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceParity, LogitsLossGradientsAndAdamWSteps) {
  const std::string model_path = fixture(GetParam() + ".model.safetensors");
  const std::string io_path = fixture(GetParam() + ".io.safetensors");
  ASSERT_TRUE(std::filesystem::exists(io_path))
      << io_path << " is missing: run tests/reference/make_fixtures.py (ctest does it first)";
  Checkpoint ck = load_checkpoint(model_path);  // tiny_*: a plain timm state_dict, config from shapes
  Model<float>& m = *ck.model;
  const st::File io = st::File::open(io_path);
  const auto& meta = io.metadata();
  const std::vector<float> images = io.read_f32("images");
  std::vector<int32_t> labels;
  for (int64_t l : io.read_i64("labels")) labels.push_back(int32_t(l));
  const int64_t B = int64_t(labels.size()), K = m.config().num_classes;
  m.plan(B);
  std::vector<float> probs(B * K), dlogits(B * K);

  Rng train_mode(0);  // training mode, as the reference (BatchNorm on batch statistics)
  const float* logits = m.forward(images.data(), B, &train_mode);
  EXPECT_TRUE(close("logits", logits, io.read_f32("logits").data(), B * K, tol::kTimmLogits, 0.0));
  const float smoothing = std::stof(meta.at("label_smoothing"));
  const float loss = cross_entropy_forward(probs.data(), logits, labels.data(), B, K, smoothing);
  EXPECT_NEAR(loss, io.read_f32("loss")[0], tol::kTimmLogits);
  cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K, smoothing);
  m.zero_grad();
  m.backward(dlogits.data());
  for (const ParamInfo& p : m.params())
    EXPECT_TRUE(
        close("grad." + p.name, m.grads() + p.offset, io.read_f32("grad." + p.name).data(), p.numel, tol::kTimmGrad));

  // Elements with an identically zero gradient (zero_grad.<name>, see make_fixtures.py): their
  // steps are rounding noise normalised by Adam, so only their gradient (above) is compared.
  AdamWConfig acfg;
  acfg.beta1 = std::stod(meta.at("beta1"));
  acfg.beta2 = std::stod(meta.at("beta2"));
  acfg.eps = std::stod(meta.at("eps"));
  acfg.weight_decay = std::stod(meta.at("weight_decay"));
  AdamW<float> opt(m.params(), acfg);
  const double lr = std::stod(meta.at("lr")), clip = std::stod(meta.at("clip_norm"));
  const double ema_decay = std::stod(meta.at("ema_decay"));
  std::vector<float> ema(m.weights(), m.weights() + m.num_params());  // timm's ModelEmaV2
  for (int k = 1; k <= std::stoi(meta.at("steps")); ++k) {
    const std::string tag = "step" + std::to_string(k) + ".";
    const float* lg = m.forward(images.data(), B, &train_mode);
    const float l = cross_entropy_forward(probs.data(), lg, labels.data(), B, K, smoothing);
    EXPECT_NEAR(l, io.read_f32(tag + "loss")[0], tol::kTimmAdamW) << tag;
    cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K, smoothing);
    m.zero_grad();
    m.backward(dlogits.data());
    optimizer_step(opt, m.weights(), m.grads(), m.num_params(), clip, lr);
    ema_update(ema.data(), m.weights(), m.num_params(), ema_decay);
    for (const ParamInfo& p : m.params()) {
      std::vector<float> got(m.weights() + p.offset, m.weights() + p.offset + p.numel);
      std::vector<float> want = io.read_f32(tag + p.name);
      if (io.find("zero_grad." + p.name)) {
        const std::vector<float> zero = io.read_f32("zero_grad." + p.name);
        for (int64_t i = 0; i < p.numel; ++i)
          if (zero[i] != 0) got[i] = want[i] = 0;
      }
      EXPECT_TRUE(close(tag + p.name, got.data(), want.data(), p.numel, tol::kTimmAdamW));
    }
  }
  for (const ParamInfo& p : m.params()) {
    std::vector<float> got(ema.data() + p.offset, ema.data() + p.offset + p.numel);
    std::vector<float> want = io.read_f32("ema." + p.name);
    if (io.find("zero_grad." + p.name)) {  // averages of the rounding-noise steps, as above
      const std::vector<float> zero = io.read_f32("zero_grad." + p.name);
      for (int64_t i = 0; i < p.numel; ++i)
        if (zero[i] != 0) got[i] = want[i] = 0;
    }
    EXPECT_TRUE(close("ema." + p.name, got.data(), want.data(), p.numel, tol::kTimmAdamW));
  }
  if (io.find("eval_logits")) {  // BatchNorm in eval mode, on the running statistics the steps left
    const float* eval = m.forward(images.data(), B);
    EXPECT_TRUE(close("eval_logits", eval, io.read_f32("eval_logits").data(), B * K, tol::kTimmAdamW));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceParity,
                         ::testing::Values("tiny_gray", "tiny_rgb", "amlp", "gate_multiplicative", "gate_additive",
                                           "gate_linear", "vit", "vit_avg", "vit_cls_avg", "mixer", "resmlp", "ffonly",
                                           "eamlp", "cnn"));

// Every kind's initial weights have timm's spread: per state_dict tensor, the count, mean and
// standard deviation over eight initialisations against those of the reference models as timm
// initialises them (tests/reference/make_fixtures.py, init_spread.json); a tensor timm sets to a
// constant must be that constant.
class InitialSpread : public ::testing::TestWithParam<std::string> {};

TEST_P(InitialSpread, MatchesTimm) {
  const std::string path = fixture("init_spread.json");
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run tests/reference/make_fixtures.py";
  std::ifstream in(path);
  const nlohmann::json all = nlohmann::json::parse(in);
  const nlohmann::json& want = all.at(GetParam());
  const ModelConfig cfg = ModelConfig::from_json(want.at("config"));
  const int draws = want.at("draws").get<int>();
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, bool> constant;
  for (int d = 0; d < draws; ++d) {
    auto m = make_model<double>(cfg);
    Rng rng(77 + uint64_t(d));
    m->init(rng);
    for (const ParamInfo& p : m->params()) {
      const double* w = m->weights() + p.offset;
      std::vector<double>& v = values[p.name];
      if (d == 0)
        constant[p.name] = true;
      else
        constant[p.name] = constant[p.name] && std::equal(w, w + p.numel, v.begin());
      v.insert(v.end(), w, w + p.numel);
    }
  }
  const nlohmann::json& tensors = want.at("tensors");
  ASSERT_EQ(values.size(), tensors.size()) << "gmlp and the reference have different tensors";
  for (const auto& [name, v] : values) {
    ASSERT_TRUE(tensors.contains(name)) << name << " is not in the reference";
    const nlohmann::json& r = tensors.at(name);
    const double n = double(v.size());
    ASSERT_EQ(v.size(), r.at("n").get<size_t>()) << name;
    if (r.at("constant").get<bool>()) {
      EXPECT_TRUE(constant[name]) << name << ": timm sets it to a constant, gmlp draws it";
      if (r.contains("value")) {  // compared as the float a model holds
        const float value = float(r.at("value").get<double>());
        EXPECT_TRUE(std::all_of(v.begin(), v.end(), [&](double x) { return float(x) == value; }))
            << name << " should be " << value;
      }
      continue;
    }
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= n;
    for (double x : v) var += (x - mean) * (x - mean);
    const double std = std::sqrt(var / n), ref_std = r.at("std").get<double>(), ref_mean = r.at("mean").get<double>();
    EXPECT_LE(std::abs(std / ref_std - 1), tol::kSpreadSigmas / std::sqrt(n))
        << name << ": std " << std << ", timm's " << ref_std << " (n " << n << ")";
    EXPECT_LE(std::abs(mean - ref_mean), tol::kSpreadSigmas * ref_std * std::sqrt(2 / n))
        << name << ": mean " << mean << ", timm's " << ref_mean << " (std " << ref_std << ", n " << n << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, InitialSpread,
                         ::testing::Values("gmlp", "gmlp_multiplicative", "amlp", "vit", "mixer", "resmlp", "ffonly",
                                           "eamlp", "cnn"));

struct FloatRun {
  std::vector<float> logits, grads;
};

// In training mode (the cnn's backward needs it; drop path is 0, so the token models are as in eval).
FloatRun run_float(Model<float>& m, const std::vector<float>& images, const std::vector<int32_t>& labels) {
  const int64_t B = int64_t(labels.size()), K = m.config().num_classes;
  std::vector<float> probs(B * K), dl(B * K);
  Rng train_mode(0);
  const float* lg = m.forward(images.data(), B, &train_mode);
  FloatRun r{{lg, lg + B * K}, {}};
  cross_entropy_backward(dl.data(), (cross_entropy_forward(probs.data(), lg, labels.data(), B, K, 0.1f), probs.data()),
                         labels.data(), B, K, 0.1f);
  m.zero_grad();
  m.backward(dl.data());
  r.grads.assign(m.grads(), m.grads() + m.num_params());
  return r;
}

ModelConfig small_config(const std::string& kind = "gmlp") {  // big enough for threads to split work
  ModelConfig c;
  c.depth = 2, c.dim = 64, c.ffn = 192, c.token_ffn = 32, c.attn_dim = 16;
  c = with_kind(c, kind);
  if (c.model == ModelKind::cnn) c.dim = 16;  // widths 16/32/64 at 28×28: already plenty to split
  return c;
}

// A randomized small model planned for B, with a random batch of images and labels.
struct RandomCase {
  std::unique_ptr<Model<float>> mp;
  Model<float>& m;
  std::vector<float> images;
  std::vector<int32_t> labels;
  RandomCase(uint64_t seed, int64_t B, const std::string& kind = "gmlp")
      : mp(make_model<float>(small_config(kind))), m(*mp) {
    Rng rng(seed);
    randomize(m, rng);
    images = test::randn<float>(B * 28 * 28, rng);
    for (int64_t b = 0; b < B; ++b) labels.push_back(int32_t(rng.below(10)));
    m.plan(B);
  }
};

class Invariance : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Models, Invariance, ::testing::ValuesIn(kKinds), test_name);

TEST_P(Invariance, OneThreadEqualsTwo) {
  RandomCase rc(31, 16, GetParam());
  auto& [mp, m, images, labels] = rc;
  const int saved = num_threads();
  set_threads(1);
  const FloatRun one = run_float(m, images, labels);
  set_threads(2);
  const FloatRun two = run_float(m, images, labels);
  set_threads(saved);
  EXPECT_TRUE(close("logits", two.logits, one.logits, tol::kInvariance));
  EXPECT_TRUE(close("grads", two.grads, one.grads, tol::kInvariance));
}

TEST_P(Invariance, BatchEqualsRowsOneAtATime) {
  const int64_t B = 7, K = 10, image = 28 * 28;
  RandomCase rc(32, B, GetParam());
  auto& [mp, m, images, labels] = rc;
  const float* lg = m.forward(images.data(), B);
  const std::vector<float> batched(lg, lg + B * K);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<float> row(images.begin() + b * image, images.begin() + (b + 1) * image);
    const float* one = m.forward(row.data(), 1);
    EXPECT_TRUE(close("row " + std::to_string(b), one, batched.data() + b * K, K, tol::kInvariance));
  }
}

TEST_P(Invariance, InferencePlanGivesIdenticalLogits) {
  // The inference plan reuses one block's buffers for every block: same numbers, less memory.
  const int64_t B = 5, K = 10;
  RandomCase rc(36, B, GetParam());
  auto& [mp, m, images, labels] = rc;
  const size_t train_bytes = m.activation_bytes();
  const float* lg = m.forward(images.data(), B);
  const std::vector<float> trained(lg, lg + B * K);
  m.plan(B, Mode::infer);
  EXPECT_LT(m.activation_bytes(), train_bytes / 2);
  const float* inferred = m.forward(images.data(), B);
  for (int64_t i = 0; i < B * K; ++i) ASSERT_EQ(inferred[i], trained[i]) << "logit " << i;
}

TEST_P(Invariance, FrozenWeightsGiveIdenticalLogits) {
  // A frozen model's products keep its weights packed after their first call: the same bits on
  // that call and every later one, and the packs go with the model. In f32, and in bf16 on each
  // engine the CPU runs (gmlp's own packs; oneDNN's primitive, AMX's, keeps a rounded copy).
  const int64_t B = 5, K = 10;
  std::vector<std::pair<Precision, Bf16Engine>> runs{{Precision::f32, Bf16Engine::automatic}};
  if (gemm::bf16_available()) runs.emplace_back(Precision::bf16, Bf16Engine::gmlp);
  if (cpu_has_bf16()) runs.emplace_back(Precision::bf16, Bf16Engine::onednn);
  for (const auto& [precision, engine] : runs) {
    set_bf16_engine(engine);
    set_matmul_precision(precision);
    SCOPED_TRACE(cat(precision_name(precision), " ", bf16_engine_name()));
    const size_t before = constant_pack_bytes();
    {
      RandomCase rc(38, B, GetParam());
      auto& [mp, m, images, labels] = rc;
      m.plan(B, Mode::infer);
      const float* lg = m.forward(images.data(), B);
      const std::vector<float> plain(lg, lg + B * K);
      m.freeze();
      for (int call = 0; call < 2; ++call) {
        const float* frozen = m.forward(images.data(), B);
        for (int64_t i = 0; i < B * K; ++i) ASSERT_EQ(frozen[i], plain[i]) << "call " << call << ", logit " << i;
      }
      if (gemm::available() || precision == Precision::bf16) {
        EXPECT_GT(constant_pack_bytes(), before);
      }
    }
    EXPECT_EQ(constant_pack_bytes(), before);
  }
  set_matmul_precision(Precision::f32);
  set_bf16_engine(Bf16Engine::automatic);
}

TEST_P(Invariance, Bf16ActivationsGiveTheBitsOfFloatOnes) {
  // In bf16 the products round every operand to bfloat16, so an activation that only they read may
  // be stored rounded (bf16_activations()): logits and every gradient keep their bits, with either
  // bf16 engine (gmlp's own, and oneDNN's primitive, which runs on AMX), at a small batch and at
  // one whose weight gradients split their sums across the threads.
  if (!gemm::bf16_available()) GTEST_SKIP() << "no bf16 product on this CPU";
  std::vector<Bf16Engine> engines{Bf16Engine::gmlp};
  if (cpu_has_bf16()) engines.push_back(Bf16Engine::onednn);  // oneDNN's needs the CPU's bf16
  const test::WithThreads two(2);
  for (const Bf16Engine engine : engines)
    for (const int64_t batch : {8, 128}) {
      set_bf16_engine(engine);
      SCOPED_TRACE(cat(bf16_engine_name(), ", batch ", batch));
      RandomCase rc(39, batch, GetParam());
      auto& [mp, m, images, labels] = rc;
      set_matmul_precision(Precision::bf16);
      m.plan(batch);  // a plan made in bf16 has room for the bf16 copies
      set_bf16_activations(false);
      const FloatRun floats = run_float(m, images, labels);
      set_bf16_activations(true);
      ASSERT_TRUE(bf16_activations());
      const FloatRun stored = run_float(m, images, labels);
      // Inference, batched and at batch 1 (where the threads share an image's rows).
      std::vector<std::vector<float>> infer[2];
      for (const bool on : {false, true}) {
        set_bf16_activations(on);
        for (const int64_t B : {batch, int64_t(1)}) {
          m.plan(B, Mode::infer);
          const float* lg = m.infer(images.data(), B);
          infer[on].emplace_back(lg, lg + B * 10);
        }
      }
      set_matmul_precision(Precision::f32);
      set_bf16_engine(Bf16Engine::automatic);
      ASSERT_EQ(floats.logits, stored.logits);
      for (size_t i = 0; i < floats.grads.size(); ++i) ASSERT_EQ(floats.grads[i], stored.grads[i]) << "gradient " << i;
      EXPECT_EQ(infer[0], infer[1]) << "inference logits";
    }
}

TEST_P(Invariance, InferenceInChunksGivesTheBatchLogits) {
  // infer() runs a batch in cache-sized chunks of images: chunks of 1, and chunks of 3 with a
  // ragged last one, give what one forward over the whole batch gives. One thread: with more,
  // the threads take the chunks as streams (the next test).
  const test::OneThread one;
  const int64_t B = 7, K = 10;
  RandomCase rc(37, B, GetParam());
  auto& [mp, m, images, labels] = rc;
  m.plan(B, Mode::infer);
  const float* lg = m.forward(images.data(), B);
  const std::vector<float> whole(lg, lg + B * K);
  const int64_t per_image = int64_t(m.activation_bytes()) / B;
  EXPECT_EQ(m.infer_chunk(per_image - 1), 1);
  EXPECT_EQ(m.infer_chunk(3 * per_image), 3);
  EXPECT_EQ(m.infer_chunk(), B);  // a small model's whole batch fits the default budget
  for (const int64_t chunk : {1, 3}) {
    const float* chunked = m.infer(images.data(), B, chunk * per_image);
    EXPECT_TRUE(close("chunks of " + std::to_string(chunk), chunked, whole.data(), B * K, tol::kInvariance));
  }
}

TEST(Inference, PlanLaysOutOneChunkAndInferTakesTheWholeBatch) {
  // An inference plan lays out one chunk of images, however large the batch: infer() runs the
  // batch through it, a chunk at a time, on one thread and as streams on two, and gives the
  // logits of one forward over the whole batch under a training plan, bit for bit.
  auto per_image = [](Model<float>& m) { return m.plan_bytes(2, Mode::infer) - m.plan_bytes(1, Mode::infer); };
  RandomCase probe(41, 1);
  const int64_t B = Model<float>::kInferChunkBytes / per_image(probe.m) * 3 / 2 + 3;
  RandomCase rc(41, B);
  auto& [mp, m, images, labels] = rc;
  const float* lg = m.forward(images.data(), B);
  const std::vector<float> whole(lg, lg + B * 10);
  m.plan(B, Mode::infer);
  EXPECT_EQ(m.planned_batch(), B);
  EXPECT_LT(m.chunk_batch(), B);
  // plan_bytes lays out a plan of its own, and leaves this one in place.
  EXPECT_EQ(int64_t(m.activation_bytes()), m.plan_bytes(m.chunk_batch(), Mode::infer));
  EXPECT_GT(m.plan_bytes(B, Mode::train), int64_t(m.activation_bytes()));
  EXPECT_EQ(m.infer_chunk(), m.chunk_batch());
  for (const int threads : {1, 2}) {
    const test::WithThreads t(threads);
    const float* got = m.infer(images.data(), B);
    ASSERT_EQ(std::vector<float>(got, got + B * 10), whole) << threads << " threads";
  }
}

TEST_P(Invariance, InferenceStreamsGiveTheBitsOfOneThread) {
  // With at least as many images as threads, infer() gives each thread whole chunks of images to
  // run alone, on a model that shares the weights: a one-thread process's logits, bit for bit, at
  // two threads (chunks of 3 and a ragged last one) and three (chunks of 2, and a thread that may
  // find none left), twice (the streams made, then reused), on frozen weights as an inference
  // process has them, in f32 and in bf16 where a bf16 product runs.
  const int64_t B = 19, K = 10;
  std::vector<Precision> precisions{Precision::f32};
  if (gemm::bf16_available()) precisions.push_back(Precision::bf16);
  for (const Precision precision : precisions) {
    set_matmul_precision(precision);
    SCOPED_TRACE(precision_name(precision));
    RandomCase rc(40, B, GetParam());
    auto& [mp, m, images, labels] = rc;
    m.plan(B, Mode::infer);
    m.freeze();
    std::vector<float> one;
    {
      const test::OneThread t;
      EXPECT_EQ(m.infer_streams(B), 1);
      const float* lg = m.infer(images.data(), B);
      one.assign(lg, lg + B * K);
    }
    for (const int threads : {2, 3}) {
      const test::WithThreads t(threads);
      EXPECT_EQ(m.infer_streams(B), threads);
      EXPECT_EQ(m.infer_streams(threads - 1), 1);  // fewer images than threads: they share each op
      for (int call = 0; call < 2; ++call) {
        const float* lg = m.infer(images.data(), B);
        ASSERT_EQ(std::vector<float>(lg, lg + B * K), one) << threads << " threads, call " << call;
      }
      EXPECT_EQ(omp_get_max_threads(), threads);  // the streams' one thread each stays inside them
    }
  }
  set_matmul_precision(Precision::f32);
}

TEST_P(Invariance, SaveLoadGivesIdenticalLogits) {
  const int64_t B = 4, K = 10;
  RandomCase rc(33, B, GetParam());
  auto& [mp, m, images, labels] = rc;
  const float* lg = m.forward(images.data(), B);
  const std::vector<float> before(lg, lg + B * K);
  // One file per model: ctest runs these tests in parallel processes.
  std::string name = GetParam();
  std::replace(name.begin(), name.end(), ':', '_');
  const std::string path = ::testing::TempDir() + "gmlp_save_load_" + name + ".safetensors";
  save_checkpoint(path, m, data::Normalization{{0.25f}, {0.75f}}, {"a", "b"});
  Checkpoint ck = load_checkpoint(path);
  std::filesystem::remove(path);
  EXPECT_EQ(ck.config.to_json(), m.config().to_json());
  EXPECT_EQ(ck.norm.mean, std::vector<float>{0.25f});
  EXPECT_EQ(ck.norm.std, std::vector<float>{0.75f});
  EXPECT_EQ(ck.class_names, (std::vector<std::string>{"a", "b"}));
  ck.model->plan(B);
  const float* after = ck.model->forward(images.data(), B);
  for (int64_t i = 0; i < B * K; ++i) ASSERT_EQ(after[i], before[i]) << "logit " << i;
}

TEST_P(Invariance, Bf16TracksF32) {
  // bf16 rounds each operand's mantissa to 8 bits (relative error ≤ 2^-9), so logits and
  // gradients move by about a percent; what must hold is that they still point the same way, as
  // far as the model's own sensitivity lets them: its f32 gradients with every weight perturbed by
  // a rounding's size bound how far a correct bf16 run may stray. Most kinds barely move, and the
  // bar is a cosine of 0.999; the CNN at random weights (its ReLUs and batch statistics) moves by
  // 0.7 % under the weights' perturbation alone, and bf16, which rounds its activations too, by
  // about twice that.
  if (!gemm::bf16_available()) GTEST_SKIP() << "no bf16 product on this CPU";
  RandomCase rc(35, 8, GetParam());
  auto& [mp, m, images, labels] = rc;
  const FloatRun f32 = run_float(m, images, labels);
  const std::vector<float> weights(m.weights(), m.weights() + m.num_params());
  Rng noise(36);
  for (int64_t i = 0; i < m.num_params(); ++i) m.weights()[i] = weights[i] * float(1 + noise.uniform(-1, 1) * 0x1p-9);
  const FloatRun perturbed = run_float(m, images, labels);
  std::copy(weights.begin(), weights.end(), m.weights());
  set_matmul_precision(Precision::bf16);
  const FloatRun bf16 = run_float(m, images, labels);
  set_matmul_precision(Precision::f32);
  EXPECT_TRUE(close("logits", bf16.logits, f32.logits, 0.05));
  const double sensitivity = 1 - test::cosine(f32.grads, perturbed.grads);
  EXPECT_LT(1 - test::cosine(f32.grads, bf16.grads), std::max(1e-3, 4 * sensitivity))
      << "1 - cosine similarity of the gradients; f32's under the weights' perturbation: " << sensitivity;
  EXPECT_FALSE(close("logits", bf16.logits, f32.logits, 1e-6)) << "bf16 must actually round";
}

TEST(Evaluate, FlipTtaAveragesAnImageAndItsMirror) {
  // 7 images in batches of 3 (a ragged last one): each image's logits under flip TTA are the
  // mean of its own and those of the mirror image, each evaluated as a plain image.
  const ModelConfig cfg = tiny_config();
  auto m = make_model<float>(cfg);
  Rng rng(41);
  randomize(*m, rng);
  m->plan(3, Mode::infer);
  data::ImageSet set, mirrored;
  set.count = 7, set.channels = cfg.in_chans, set.height = set.width = cfg.img_size;
  set.classes = cfg.num_classes;
  const int S = cfg.img_size;
  for (int64_t i = 0; i < int64_t(set.count) * set.channels * S * S; ++i)
    set.pixels.push_back(uint8_t(rng.next() % 256));
  for (int i = 0; i < set.count; ++i) set.labels.push_back(uint8_t(i % cfg.num_classes));
  mirrored = set;
  for (int64_t row = 0; row < int64_t(set.count) * set.channels * S; ++row)
    std::reverse(mirrored.pixels.begin() + row * S, mirrored.pixels.begin() + (row + 1) * S);
  const data::Normalization norm{{0.4f, 0.6f}, {0.3f, 0.5f}};
  std::vector<float> plain, flipped, tta;
  evaluate(*m, set, norm, {.logits = &plain});
  evaluate(*m, mirrored, norm, {.logits = &flipped});
  const EvalResult r = evaluate(*m, set, norm, {.logits = &tta, .flip_tta = true});
  ASSERT_EQ(r.count, 7);
  std::vector<float> want(plain.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = 0.5f * (plain[i] + flipped[i]);
  EXPECT_TRUE(close("flip TTA logits", tta.data(), want.data(), int64_t(want.size()), tol::kInvariance));
  double differs = 0;  // the mirror changes the logits: the test would notice a missing flip
  for (size_t i = 0; i < want.size(); ++i) differs = std::max(differs, double(std::abs(plain[i] - flipped[i])));
  EXPECT_GT(differs, 1e-3);
}

TEST(Evaluate, ASubsetReadsItsImagesInItsOrder) {
  // --eval-limit's items: the logits of images 5, 1, 3 are rows 5, 1, 3 of the whole set's, and
  // accuracy and count are over those three of the seven.
  const ModelConfig cfg = tiny_config();
  auto m = make_model<float>(cfg);
  Rng rng(43);
  randomize(*m, rng);
  m->plan(2, Mode::infer);
  data::ImageSet set;
  set.count = 7, set.channels = cfg.in_chans, set.height = set.width = cfg.img_size;
  set.classes = cfg.num_classes;
  for (int64_t i = 0; i < int64_t(set.count) * set.channels * cfg.img_size * cfg.img_size; ++i)
    set.pixels.push_back(uint8_t(rng.next() % 256));
  for (int i = 0; i < set.count; ++i) set.labels.push_back(uint8_t(i % cfg.num_classes));
  const data::Normalization norm{{0.5f, 0.5f}, {0.25f, 0.25f}};
  std::vector<float> all, some;
  const EvalResult whole = evaluate(*m, set, norm, {.logits = &all});
  const std::vector<int64_t> items = {5, 1, 3};
  const EvalResult part = evaluate(*m, set, norm, {.items = &items, .logits = &some});
  EXPECT_EQ(whole.count, 7);
  EXPECT_EQ(part.count, 3);
  EXPECT_EQ(part.total, 7);
  const int64_t K = cfg.num_classes;
  ASSERT_EQ(int64_t(some.size()), 3 * K);
  int correct = 0;
  for (size_t r = 0; r < items.size(); ++r) {
    const float* want = all.data() + items[r] * K;
    EXPECT_TRUE(close("row", some.data() + r * K, want, K, tol::kInvariance)) << "item " << items[r];
    correct += (std::max_element(want, want + K) - want) == set.labels[size_t(items[r])];
  }
  EXPECT_DOUBLE_EQ(part.accuracy, correct / 3.0);
  const std::vector<int64_t> outside = {7};
  EXPECT_THROW(evaluate(*m, set, norm, {.items = &outside}), Error);
}

TEST(Model, InitMatchesTimm) {
  // timm: xavier-uniform linears, SGU W ~ N(0, 1e-6) and b = 1, zero head, LayerNorm (1, 0).
  auto mp = make_model<float>(small_config());
  Model<float>& m = *mp;
  Rng rng(34);
  m.init(rng);
  auto stats = [&](const std::string& name) {
    const ParamInfo& p = m.param(name);
    double s = 0, ss = 0, mx = 0;
    for (int64_t i = 0; i < p.numel; ++i) {
      const double x = m.weights()[p.offset + i];
      s += x, ss += x * x, mx = std::max(mx, std::abs(x));
    }
    return std::array<double, 3>{s / p.numel, std::sqrt(ss / p.numel), mx};
  };
  const auto proj = stats("blocks.1.mlp_channels.gate.proj.weight");
  EXPECT_NEAR(proj[1], 1e-6, 1e-7);
  EXPECT_EQ(stats("blocks.1.mlp_channels.gate.proj.bias")[0], 1.0);
  const auto fc1 = stats("blocks.0.mlp_channels.fc1.weight");
  const double bound = std::sqrt(6.0 / (64 + 192));
  EXPECT_LE(fc1[2], bound);
  EXPECT_NEAR(fc1[1], bound / std::sqrt(3.0), 0.03 * bound);  // uniform(-a, a) has sd a/√3
  EXPECT_EQ(stats("head.weight")[2], 0.0);
  EXPECT_EQ(stats("norm.weight")[0], 1.0);
}

// Layer-wise decay gives each parameter its own rate, as a torch param group with lr·scale
// would: one AdamW over all parameters with factors equals one AdamW per parameter at its
// scaled rate (weight decay scaled too), and factors of one change nothing, bit for bit.
TEST(AdamW, LearningRateFactorsEqualSeparateRates) {
  ParamTable t;
  t.add("embed.weight", {3, 4}, true);
  t.add("blocks.0.fc.weight", {5, 2}, true);
  t.add("blocks.0.fc.bias", {5}, false);
  const std::vector<ParamInfo>& params = t.list();
  const std::vector<double> scale = {0.25, 0.5, 1.0};
  AdamWConfig cfg;
  cfg.weight_decay = 0.1;
  AdamW<double> joint(params, cfg, scale), ones(params, cfg, {1.0, 1.0, 1.0}), plain(params, cfg);
  std::vector<AdamW<double>> separate;
  for (const ParamInfo& p : params) {
    ParamInfo alone = p;
    alone.offset = 0;
    separate.emplace_back(std::vector<ParamInfo>{alone}, cfg);
  }
  Rng rng(3);
  const int64_t n = t.total();
  std::vector<double> w(n), g(n);
  for (double& x : w) x = rng.normal();
  std::vector<double> w_sep = w, w_ones = w, w_plain = w;
  for (int step = 0; step < 4; ++step) {
    for (double& x : g) x = rng.normal();
    const double lr = 1e-2 * (step + 1);
    joint.step(w.data(), g.data(), lr);
    for (size_t i = 0; i < params.size(); ++i)
      separate[i].step(w_sep.data() + params[i].offset, g.data() + params[i].offset, lr * scale[i]);
    ones.step(w_ones.data(), g.data(), lr);
    plain.step(w_plain.data(), g.data(), lr);
  }
  EXPECT_TRUE(close("scaled", w.data(), w_sep.data(), n, 1e-14));
  EXPECT_EQ(w_ones, w_plain);
  EXPECT_NE(w, w_plain);
  EXPECT_THROW(AdamW<double>(params, cfg, {1.0, 1.0}), Error);
}

// Clipping inside AdamW (optimizer_step) gives the bits of torch's order, g scaled in place by
// the coefficient and then stepped, with and without learning-rate factors, and leaves g as it
// was; below the cap, and with clipping off, g steps as it is.
TEST(AdamW, ClippingInsideTheStepGivesTheBitsOfClippedGradients) {
  ParamTable t;
  t.add("blocks.0.fc.weight", {70, 3}, true);
  t.add("blocks.0.fc.bias", {70}, false);
  const std::vector<ParamInfo>& params = t.list();
  const int64_t n = t.total();
  Rng rng(5);
  std::vector<float> w0(n), g(n);
  for (float& x : w0) x = float(rng.normal());
  for (float& x : g) x = float(3 * rng.normal());
  double norm2 = 0;
  for (const float x : g) norm2 += double(x) * double(x);
  const double norm = std::sqrt(norm2);
  for (const std::vector<double>& scale : {std::vector<double>{}, std::vector<double>{0.5, 2.0}})
    for (const double clip : {1.0, 2 * norm, 0.0}) {
      SCOPED_TRACE("clip " + std::to_string(clip) + (scale.empty() ? "" : ", lr factors"));
      AdamW<float> fused(params, AdamWConfig{}, scale), plain(params, AdamWConfig{}, scale);
      std::vector<float> w1 = w0, w2 = w0, g1 = g;
      std::vector<float> g2 = g;  // torch: clip_grad_norm_ scales g in place, then the step
      const double coef = clip / (norm + 1e-6);
      if (clip > 0 && coef < 1)
        for (float& x : g2) x = float(double(x) * coef);
      for (int step = 0; step < 3; ++step) {
        EXPECT_NEAR(optimizer_step(fused, w1.data(), g1.data(), n, clip, 1e-2), norm, 1e-9 * norm);
        plain.step(w2.data(), g2.data(), 1e-2);
      }
      EXPECT_EQ(w1, w2);
      EXPECT_EQ(g1, g);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(fused.m()[i], plain.m()[i]) << i;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(fused.v()[i], plain.v()[i]) << i;
    }
}

}  // namespace
}  // namespace gmlp
