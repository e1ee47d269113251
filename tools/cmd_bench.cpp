// gmlp bench: images/s of a training step (forward, backward, clipping, AdamW) and of inference,
// median and spread over repetitions after warm-up, GFLOP/s, and peak resident memory.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/matmul.h"
#include "core/profile.h"
#include "core/threads.h"
#include "dist/communicator.h"
#include "ops/cross_entropy.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"

namespace gmlp::cli {

namespace {

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

struct Timing {
  double median = 0, min = 0, max = 0;  // images/s, or a ratio of them
};

Timing summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// Times each of `steps` (each processes `images` images) in repetitions of >= 0.3 s, after warm-up,
// and returns each one's images/s per repetition. With two steps the repetitions alternate, one of
// each in turn, so that both see the same host: a ratio between two processes carries each one's
// own luck with the host, which moves it by up to ±8 % on a 2-core virtual machine. In a job of
// several ranks whose step is collective, every rank runs rank 0's number of steps.
std::vector<std::vector<double>> measure(const std::vector<std::function<void()>>& steps, int images, int warmup,
                                         int reps, bool collective = false) {
  using clock = std::chrono::steady_clock;
  std::vector<int> iters;
  for (const auto& step : steps) {
    for (int i = 0; i < warmup; ++i) step();
    const auto t0 = clock::now();
    step();
    const double once = std::chrono::duration<double>(clock::now() - t0).count();
    iters.push_back(std::max(1, int(0.3 / std::max(once, 1e-6))));
  }
  if (collective) dist::world().broadcast(iters.data(), iters.size() * sizeof(int), 0);
  std::vector<std::vector<double>> rates(steps.size());
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < steps.size(); ++k) {
      const auto t = clock::now();
      for (int i = 0; i < iters[k]; ++i) steps[k]();
      rates[k].push_back(double(images) * iters[k] / std::chrono::duration<double>(clock::now() - t).count());
    }
  return rates;
}

// One row of the measurement: its step's images/s, and with a second precision (--versus) that
// one's and the ratio of the two repetition by repetition.
struct Row {
  Timing rate, versus, ratio;
};

Row measure_row(const std::vector<std::function<void()>>& steps, int images, int warmup, int reps,
                bool collective = false) {
  const auto rates = measure(steps, images, warmup, reps, collective);
  Row row{summarize(rates[0]), {}, {}};
  if (rates.size() > 1) {
    std::vector<double> ratio;
    for (size_t r = 0; r < rates[0].size(); ++r) ratio.push_back(rates[0][r] / rates[1][r]);
    row.versus = summarize(rates[1]);
    row.ratio = summarize(ratio);
  }
  return row;
}

// Where `steps` runs of `step` spend their time, per op, slowest first, in seconds per run; the
// time outside every op's scope is the entry "(untimed)". Where `streams` threads each run their
// own images' ops (Model::infer_streams), an op's time is the sum of theirs ÷ streams.
template <class F>
std::vector<profile::Entry> profile_per_op(F&& step, int steps, int streams = 1) {
  profile::reset();
  profile::enable(true);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  profile::enable(false);
  std::vector<profile::Entry> prof = profile::entries();
  double covered = 0;
  for (auto& e : prof) covered += (e.seconds /= streams);
  prof.push_back({"(untimed)", total - covered, steps});
  for (auto& e : prof) e.seconds /= steps;
  std::sort(prof.begin(), prof.end(), [](auto& a, auto& b) { return a.seconds > b.seconds; });
  return prof;
}

void print_profile(const std::string& what, const std::vector<profile::Entry>& prof, const std::string& note = "") {
  double total = 0;
  for (const auto& e : prof) total += e.seconds;
  std::printf("\nper-op profile of %s (%.3f ms%s):\n", what.c_str(), 1e3 * total, note.c_str());
  for (const auto& e : prof)
    std::printf("  %-22s %8.3f ms  %5.1f%%\n", e.name.c_str(), 1e3 * e.seconds, 100 * e.seconds / total);
}

}  // namespace

void add_bench(CLI::App& app) {
  struct Args {
    std::string preset, checkpoint, precision = "f32", versus, mode = "all", bf16_engine = "auto";
    int batch_size = 64, threads = 0, warmup = 3, reps = 10;
    double bucket_mb = 1;
    bool json = false, profile = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "bench", "Measure an image model's training and inference speed: images/s, GFLOP/s, peak memory");
  auto* preset = sub->add_option("--preset", args->preset, "Image model preset (see `gmlp info --list`)");
  auto* ckpt = sub->add_option(
      "--checkpoint", args->checkpoint,
      "An image classifier checkpoint (.safetensors: gmlp train's, or a timm state_dict: gMLP, Mixer, ResMLP, ViT)");
  preset->excludes(ckpt);
  sub->add_option("--batch-size", args->batch_size, "Batch of the training step and batched inference")
      ->check(at_least(1))
      ->capture_default_str();
  sub->add_option("--warmup", args->warmup, "Untimed repetitions first")->check(at_least(0))->capture_default_str();
  sub->add_option("--reps", args->reps, "Timed repetitions (each >= 0.3 s)")->check(at_least(1))->capture_default_str();
  sub->add_option("--bucket-mb", args->bucket_mb,
                  "Under mpirun: the chunks, in MB, in which the gradients are summed over the ranks while "
                  "backward runs (0: one sum after backward)")
      ->type_name("MB")
      ->check(real_in(0, INFINITY, Ends::closed))
      ->capture_default_str();
  sub->add_option("--mode", args->mode,
                  "What to measure: all, train (the training step) or infer (inference only: the model never "
                  "plans training, so the peak RSS is an inference process's)")
      ->check(CLI::IsMember({"all", "train", "infer"}))
      ->capture_default_str();
  sub->add_flag("--json", args->json, "Print one JSON object");
  sub->add_option("--precision", args->precision, "Matrix products: f32, bf16, or auto (bf16 where the CPU has AMX)")
      ->check(CLI::IsMember({"f32", "bf16", "auto"}))
      ->capture_default_str();
  sub->add_option("--versus", args->versus,
                  "Also time the same model in this precision (f32, bf16 or auto), alternating with --precision "
                  "repetition by repetition in this process, and print the ratio of the two (the peak RSS then "
                  "covers both models)")
      ->check(CLI::IsMember({"f32", "bf16", "auto"}));
  sub->add_option("--bf16-engine", args->bf16_engine,
                  "Which bf16 product to measure: auto (gmlp's own), gmlp (its AMX kernel where the CPU has AMX, "
                  "its AVX512-BF16 kernel elsewhere) or onednn (oneDNN's matmul primitive)")
      ->check(CLI::IsMember({"auto", "gmlp", "onednn"}))
      ->capture_default_str();
  sub->add_flag(
      "--profile", args->profile,
      "Also print where the time of a training step, of batched inference and of batch-1 inference goes, per op");
  add_threads_option(*sub, args->threads);
  sub->callback([args] {
    if (args->preset.empty() == args->checkpoint.empty())
      throw CLI::ValidationError("bench", "give exactly one of --preset or --checkpoint");
    set_threads(args->threads);
    // --versus first, so that --precision is the one set from here on.
    const bool compare = !args->versus.empty();
    const Precision versus = compare ? use_precision(args->versus) : Precision::f32;  // read only if compare
    const Precision precision = use_precision(args->precision);
    use_bf16_engine(args->bf16_engine);
    // The products' precision, and in bf16 whose product computes it.
    const auto products = [](Precision p) {
      return p == Precision::bf16 ? cat(precision_name(p), " (", bf16_engine_name(), ")")
                                  : std::string(precision_name(p));
    };
    const double rss_start = peak_rss_mb();
    const auto make = [&] {
      if (!args->checkpoint.empty()) return std::move(load_image_checkpoint(args->checkpoint).model);
      std::unique_ptr<Model<float>> m = make_model<float>(image_preset(args->preset).config);
      Rng rng(0);
      m->init(rng);
      return m;
    };
    // The model in each precision measured: the same weights, planned while its precision is set
    // (a bf16 plan has room for bf16 copies), each with its own optimizer.
    struct Run {
      Precision precision;
      std::unique_ptr<Model<float>> model;
      std::unique_ptr<AdamW<float>> adamw;
    };
    std::vector<Run> runs;
    runs.push_back({precision, make(), nullptr});
    if (compare) runs.push_back({versus, make(), nullptr});
    Model<float>& model = *runs[0].model;
    const ModelConfig& cfg = model.config();
    const int64_t B = args->batch_size, K = cfg.num_classes;
    const int64_t image_size = int64_t(cfg.in_chans) * cfg.img_size * cfg.img_size;
    // Under mpirun the training step is data-parallel: --batch-size is the step's, each rank runs
    // its share and the gradients are summed over the ranks (overlapping backward, as gmlp train).
    dist::Communicator& comm = dist::world();
    const int64_t ranks = comm.size(), Bt = B / ranks;
    if (B % ranks != 0)
      fail("invalid --batch-size ", B, ": expected a multiple of the ", ranks, " ranks, which share each step");
    const bool training = args->mode != "infer", inference = args->mode != "train";
    // First: it refuses a batch whose activations cannot fit, naming --batch-size.
    for (Run& run : runs) {
      set_matmul_precision(run.precision);
      run.model->plan(B, training ? Mode::train : Mode::infer);
      if (training) run.adamw = std::make_unique<AdamW<float>>(run.model->params(), AdamWConfig{});
    }
    Rng rng(1);
    std::vector<float> input(B * image_size), probs(B * K), dlogits(B * K);
    for (auto& x : input) x = float(rng.normal());
    std::vector<int32_t> labels(B);
    for (auto& l : labels) l = int32_t(rng.below(K));
    const int64_t chunk = int64_t(args->bucket_mb * (1 << 20) / sizeof(float));
    auto train_step = [&](Run& run) {
      set_matmul_precision(run.precision);
      Model<float>& m = *run.model;
      const float* logits = m.forward(input.data(), Bt, &rng);
      {
        const profile::Scope p("loss");
        cross_entropy_forward(probs.data(), logits, labels.data(), Bt, K, 0.1f);
        cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), Bt, K, 0.1f);
      }
      {
        const profile::Scope p("zero_grad");
        m.zero_grad();
      }
      if (ranks == 1) {
        m.backward(dlogits.data());
      } else {
        dist::ChunkedSum sum(comm, m.grads(), m.num_params(), chunk);
        m.set_grads_ready([&sum](int64_t from) { sum.ready_from(from); });
        m.backward(dlogits.data());
        m.set_grads_ready(nullptr);
        const profile::Scope p("gradient sum");
        sum.finish();
      }
      const profile::Scope p("optimizer");
      optimizer_step(*run.adamw, m.weights(), m.grads(), m.num_params(), 1.0, 1e-4);
    };
    // One step per run, --precision's first.
    const auto each = [&](const auto& step) {
      std::vector<std::function<void()>> steps;
      steps.reserve(runs.size());
      for (Run& run : runs) steps.emplace_back([&step, &run] { step(run); });
      return steps;
    };
    Row train, infer, infer1;
    if (training) train = measure_row(each(train_step), int(B), args->warmup, args->reps, ranks > 1);
    // Profiled runs (--precision's): enough for about a second each at the measured speed.
    const auto profile_steps = [](double per_s, int images) { return std::max(5, int(per_s / images)); };
    std::vector<profile::Entry> prof_train, prof_infer, prof_infer1;
    if (args->profile && training) {
      int steps = profile_steps(train.rate.median, int(B));
      comm.broadcast(&steps, sizeof steps, 0);
      prof_train = profile_per_op([&] { train_step(runs[0]); }, steps);
    }
    for (Run& run : runs) {
      set_matmul_precision(run.precision);
      if (training) run.model->plan(B, Mode::infer);  // what eval and predict use
      if (inference) run.model->freeze();             // as they do: the weights packed once
    }
    const auto infer_step = [&](Run& run) {
      set_matmul_precision(run.precision);
      run.model->infer(input.data(), B);
    };
    const auto infer1_step = [&](Run& run) {
      set_matmul_precision(run.precision);
      run.model->forward(input.data(), 1);
    };
    if (inference) {
      infer = measure_row(each(infer_step), int(B), args->warmup, args->reps);
      infer1 = measure_row(each(infer1_step), 1, args->warmup, args->reps);
    }
    const int streams = inference ? runs[0].model->infer_streams(B) : 1;
    if (args->profile && inference) {
      prof_infer = profile_per_op([&] { infer_step(runs[0]); }, profile_steps(infer.rate.median, int(B)), streams);
      prof_infer1 = profile_per_op([&] { infer1_step(runs[0]); }, profile_steps(infer1.rate.median, 1));
    }
    set_matmul_precision(precision);
    const double flops = model.flops_per_image();
    const double train_gflops = train.rate.median * 3 * flops / 1e9, infer_gflops = infer.rate.median * flops / 1e9;
    const double peak = peak_rss_mb();
    // The rows measured: JSON key, text label, and the row.
    std::vector<std::pair<std::string, const Row*>> rows;
    if (training) rows.emplace_back("train", &train);
    if (inference) rows.emplace_back("infer", &infer), rows.emplace_back("infer1", &infer1);
    if (args->json) {
      nlohmann::json j = {{"framework", "gmlp"},
                          {"threads", num_threads()},
                          {"precision", precision_name(precision)},
                          {"bf16_engine", precision == Precision::bf16 ? bf16_engine_name() : "none"},
                          {"batch_size", B},
                          {"ranks", ranks},
                          {"config", cfg.to_json()},
                          {"params", model.num_params()},
                          {"flops_per_image", flops},
                          {"mode", args->mode},
                          {"peak_rss_mb", peak},
                          {"rss_before_model_mb", rss_start}};
      for (const auto& [key, row] : rows) {
        j[key + "_images_per_s"] = row->rate.median;
        j[key + "_spread"] = {row->rate.min, row->rate.max};
        if (compare) {
          j["versus"]["precision"] = precision_name(versus);
          j["versus"][key + "_images_per_s"] = row->versus.median;
          j["versus"][key + "_spread"] = {row->versus.min, row->versus.max};
          j["versus"][key + "_ratio"] = row->ratio.median;  // --precision's ÷ --versus's, per repetition
          j["versus"][key + "_ratio_spread"] = {row->ratio.min, row->ratio.max};
        }
      }
      if (training) j["train_gflops_per_s"] = train_gflops;
      if (inference) j["infer_gflops_per_s"] = infer_gflops, j["infer1_latency_ms"] = 1e3 / infer1.rate.median;
      for (const auto& e : prof_train) j["profile_ms_per_step"][e.name] = 1e3 * e.seconds;
      for (const auto& e : prof_infer) j["profile_ms_per_infer_batch"][e.name] = 1e3 * e.seconds;
      for (const auto& e : prof_infer1) j["profile_ms_per_infer1"][e.name] = 1e3 * e.seconds;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    const std::string job = ranks > 1 ? cat(" (", comm.describe(), ", ", Bt, " images each)") : std::string();
    std::printf("gmlp bench  %ld params, %.1f MFLOP/image, batch %ld%s, %d threads, %s\n", long(model.num_params()),
                flops / 1e6, long(B), job.c_str(), num_threads(), products(precision).c_str());
    if (compare)
      std::printf("            each row also in %s, alternating repetition by repetition: ratio %s ÷ %s\n",
                  products(versus).c_str(), precision_name(precision), precision_name(versus));
    for (const auto& [key, row] : rows) {
      const Timing& t = row->rate;
      char extra[64];
      if (key == "infer1")
        std::snprintf(extra, sizeof extra, "  (%.3f ms)", 1e3 / t.median);
      else
        std::snprintf(extra, sizeof extra, "  %6.1f GFLOP/s", key == "train" ? train_gflops : infer_gflops);
      const char* label = key == "train" ? "train step" : key == "infer" ? "inference" : "inference b=1";
      std::printf("%-13s %9.1f images/s  [%.1f, %.1f]%s\n", label, t.median, t.min, t.max, extra);
      if (compare)
        std::printf("  %-11s %9.1f images/s  [%.1f, %.1f]  ratio %.3f [%.3f, %.3f]\n", precision_name(versus),
                    row->versus.median, row->versus.min, row->versus.max, row->ratio.median, row->ratio.min,
                    row->ratio.max);
    }
    std::printf("peak RSS      %9.1f MB%s%s\n", peak, training ? "" : " (inference only)",
                compare ? " (both precisions' models)" : "");
    if (args->profile && training) print_profile(cat("a training step, batch ", B), prof_train);
    if (args->profile && inference) {
      const std::string each =
          streams > 1
              ? cat("; ", streams, " threads, each on its own images: an op's time is theirs summed ÷ ", streams)
              : "";
      print_profile(cat("inference, batch ", B), prof_infer, each);
      print_profile("inference, batch 1", prof_infer1);
    }
  });
}

}  // namespace gmlp::cli
