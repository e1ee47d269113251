// gmlp pretrain / finetune / fill-mask / classify-text: language modelling on text (the KJV by default).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/threads.h"
#include "gmlp/fill_mask.h"
#include "gmlp/text_classifier.h"
#include "serve/protocol.h"
#include "text/tokenizer.h"
#include "train/lm_trainer.h"

namespace gmlp::cli {
namespace {

struct LmFlags {
  LmOptions opt;
  std::vector<std::string> sets;
  std::string resume;
  int threads = 0;
  bool profile = false, overwrite = false;
  RunFlags run;
};

// fill-mask's and classify-text's command lines.
struct TextQueryArgs {
  std::string checkpoint;
  std::vector<std::string> texts;
  int top = 5, threads = 0;
  bool json = false;
};

// fill-mask's and classify-text's inputs: the texts given as arguments, or else one per non-blank
// line of stdin; none at all is an error naming what was to be done.
std::vector<std::string> texts_or_stdin(std::vector<std::string> texts, const char* action) {
  if (texts.empty())
    for (std::string line; std::getline(std::cin, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) texts.push_back(line);
  if (texts.empty()) fail("no text to ", action, ": give texts as arguments or one per line on stdin");
  return texts;
}

// Their --json, as Hugging Face's pipelines print it: one input gives its result, several a list.
void print_results_json(const nlohmann::json& all) {
  std::printf("%s\n", (all.size() == 1 ? all[0] : all).dump(2).c_str());
}

// What --resume takes besides itself: the rest of a resumed run is its own.
const std::vector<std::string> kResumeFlags = {"--resume",  "--epochs",    "--threads",
                                               "--profile", "--bucket-mb", "--config"};

// Pretraining's flags (finetune: false) or finetuning's: the same options, their help in each
// one's terms.
void add_lm_flags(CLI::App& sub, LmFlags& f, bool finetune) {
  LmOptions& o = f.opt;
  f.run = add_run_flags(sub, o, finetune ? "Examples" : "Sequences", !finetune);
  // Pretraining's weight decay is not the preset's: its default stands.
  if (!finetune) f.run.wd->description("AdamW decoupled weight decay")->capture_default_str();
  sub.add_option("--mask-prob", o.mask_prob,
                 finetune ? "Share of tokens masked for --mlm-weight's loss (BERT: 0.15, of which 80/10/10)"
                          : "Share of tokens masked (BERT: 0.15, of which 80/10/10)")
      ->check(real_in(0, 1, Ends::open_closed))
      ->capture_default_str();
  sub.add_option("--seed", o.seed,
                 finetune ? "Seed of the head's initialisation, order, --train-limit's and --eval-limit's draws"
                          : "Seed of initialisation, order, masking and --eval-limit's draw")
      ->check(seed_value())
      ->capture_default_str();
  sub.add_option("--train-limit", o.train_limit,
                 finetune ? "Train on N examples drawn at random, fixed by --seed (0: all)"
                          : "Train on the first N sequences only (0: all)")
      ->check(at_least(0))
      ->capture_default_str();
  add_eval_limit_option(sub, o.eval_limit,
                        finetune ? "dev and test examples" : "dev sequences (and dev pairs, with --nsp)", true,
                        finetune);
  sub.add_option("--out", o.out_dir, "Run folder: checkpoint.safetensors, train_state.safetensors, metrics.jsonl")
      ->capture_default_str();
  sub.add_option("--resume", f.resume,
                 "Continue the run in this folder from its last checkpoint, with the run's own options "
                 "(--epochs may extend it)");
  add_overwrite_option(sub, f.overwrite, "the run in the --out folder");
  sub.add_flag("--profile", f.profile, "Print where the training time went, per op, at the end");
  add_threads_option(sub, f.threads);
}

// With --profile: times every op of the run, then prints the table (largest first) on stderr.
struct ProfileRun {
  bool on;
  explicit ProfileRun(bool on) : on(on) {
    profile::reset();
    profile::enable(on);
  }
  ~ProfileRun() {
    if (!on) return;
    profile::enable(false);
    auto entries = profile::entries();
    std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.seconds > b.seconds; });
    double total = 0;
    for (const auto& e : entries) total += e.seconds;
    std::fprintf(stderr, "per-op profile (timed ops only):\n");
    for (const auto& e : entries)
      std::fprintf(stderr, "  %-22s %9.3f s  %5.1f%%  (%ld calls)\n", e.name.c_str(), e.seconds,
                   100 * e.seconds / total, e.calls);
  }
};

TextConfig apply_text_sets(TextConfig cfg, const std::vector<std::string>& sets) {
  try {
    cfg = TextConfig::from_json(apply_sets(cfg.to_json(), sets));
  } catch (const nlohmann::json::exception& e) {
    fail("invalid --set: ", e.what());
  }
  cfg.validate();
  param_table(cfg);  // its size, before any work
  return cfg;
}

void print_result(const char* what, const TrainResult& r, const std::string& dir) {
  std::printf("%s: %d epochs in %.0f s; run in %s\n", what, r.epochs_run, r.seconds, dir.c_str());
}

}  // namespace

void add_text(CLI::App& app) {
  {
    struct Args {
      std::string preset = "kjv-gmlp";
      LmFlags f;
    };
    auto args = std::make_shared<Args>();
    args->f.opt.out_dir = "runs/pretrain";
    CLI::App* sub = app.add_subcommand("pretrain", "Pretrain a masked language model (the KJV by default)");
    sub->add_option("--preset", args->preset, "Text model preset: kjv-gmlp, kjv-amlp, kjv-bert, kjv-bert-rel")
        ->capture_default_str();
    sub->add_option("--set", args->f.sets, "Override a text config field, e.g. --set gate=additive --set depth=6");
    sub->add_option("--corpus", args->f.opt.corpus,
                    "A text file, one document per line, split by line index (default: the KJV)");
    sub->add_option("--vocab-size", args->f.opt.vocab_size, "SentencePiece vocabulary, learned on the train split")
        ->check(whole_in(text::Tokenizer::kNumReserved + 1, 1000000))
        ->capture_default_str();
    sub->add_flag("--nsp", args->f.opt.nsp,
                  "Add BERT's next-sentence objective (the KJV): train on pairs of passages, half "
                  "of them with B from elsewhere, and a [CLS] head that tells them apart");
    sub->add_option("--nsp-negatives", args->f.opt.nsp_negatives,
                    "Where --nsp takes a negative's B: any book (BERT's rule), or the same book "
                    "(next-verse's)")
        ->check(CLI::IsMember({"any", "book"}))
        ->capture_default_str();
    CLI::Option* short_seqs =
        sub->add_option("--short-seq-prob", args->f.opt.short_seq_prob,
                        "Chance that a training sequence is replaced by a short one of whole verses (documents), "
                        "'[CLS] verse [SEP]' padded, as fill-mask and finetuning read a text (BERT's "
                        "short_seq_prob; not with --nsp)")
            ->check(real_in(0, 1, Ends::closed))
            ->capture_default_str();
    add_lm_flags(*sub, args->f, false);
    sub->callback([args, sub, short_seqs] {
      set_threads(args->f.threads);
      const ProfileRun profiling(args->f.profile);
      LmOptions opt = args->f.opt;
      if (!args->f.resume.empty()) {
        check_resume_flags(*sub, kResumeFlags);
        opt.out_dir = args->f.resume;
        if (!args->f.run.epochs->count()) opt.epochs = 0;
        print_result("pretrain", pretrain(TextConfig{}, opt, true), opt.out_dir);
        return;
      }
      const TextPreset& p = text_preset(args->preset);
      if (opt.nsp && !short_seqs->count()) opt.short_seq_prob = 0;
      if (!args->f.run.epochs->count()) opt.epochs = p.epochs;
      if (!args->f.run.batch->count()) opt.batch_size = p.batch_size;
      if (!args->f.run.lr->count()) opt.lr = p.lr;
      default_grad_accum(opt, args->f.run);
      print_result("pretrain", pretrain(apply_text_sets(p.config, args->f.sets), opt, false, args->f.overwrite),
                   opt.out_dir);
    });
  }
  {
    auto f = std::make_shared<LmFlags>();
    f->opt.out_dir = "runs/finetune";
    // Measured on the genre task's dev split (6,000 verses, one epoch, kjv-gmlp after 5
    // pretraining epochs): peak 1e-4 → 36.8 %, 3e-4 → 49.0 %, 1e-3 → 58.1 %, 3e-3 → 64.2 %,
    // warming up over a tenth of an epoch; 2e-3 for runs on all 24,815 verses, four times as long.
    // (A whole epoch of warmup, the old default, left a one-epoch run at the peak.)
    f->opt.epochs = 3;
    f->opt.lr = 2e-3;
    f->opt.warmup_epochs = 0.1;
    CLI::App* sub =
        app.add_subcommand("finetune", "Finetune a pretrained text model on a KJV task or your labelled texts");
    sub->add_option("--init", f->opt.init,
                    "The pretrained checkpoint (gmlp pretrain's checkpoint.safetensors; required unless --resume)");
    CLI::Option* task =
        sub->add_option("--task", f->opt.task,
                        "A KJV task: ot-nt (Old or New Testament), genre (7 classes), next-verse (pairs); or give "
                        "--train and --dev")
            ->check(CLI::IsMember({"ot-nt", "genre", "next-verse"}));
    sub->add_option("--train", f->opt.train_file,
                    "Your labelled texts to train on: .tsv or .csv with a header row, or .jsonl (one object a line)")
        ->excludes(task);
    sub->add_option("--dev", f->opt.dev_file, "Your labelled texts evaluated after each epoch (with --train)")
        ->excludes(task);
    sub->add_option("--test", f->opt.test_file, "Your labelled texts evaluated beside dev (optional)")->excludes(task);
    sub->add_option("--text-column", f->opt.text_column,
                    "The text's column (or JSON key) in the --train/--dev/--test files")
        ->capture_default_str();
    sub->add_option("--pair-column", f->opt.pair_column,
                    "A second text's column, for pairs (\"[CLS] text [SEP] pair [SEP]\"; default: single texts)");
    sub->add_option("--label-column", f->opt.label_column, "The label's column (or JSON key); labels are kept as text")
        ->capture_default_str();
    sub->add_option("--seq-len", f->opt.seq_len,
                    "Finetune at a shorter length than pretraining: length-sized tensors keep their "
                    "leading block (0: the pretrained length)")
        ->check(whole_in(0, 8192, "0: the pretrained length; else at least 3, 5 for next-verse"))
        ->capture_default_str();
    sub->add_option("--segments", f->opt.segments,
                    "Segment (token-type) embeddings, BERT's marker of a pair's second segment: "
                    "auto (on for next-verse), on, off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    sub->add_option("--layer-decay", f->opt.layer_decay,
                    "Layer-wise learning-rate decay (ELECTRA, BEiT): block i of L learns at "
                    "decay^(L-i) times --lr, the embeddings at decay^(L+1), the head at --lr (1: off)")
        ->check(real_in(0, 1, Ends::open_closed))
        ->capture_default_str();
    sub->add_option("--drop-path", f->opt.drop_path,
                    "Stochastic depth while finetuning (DeiT, BEiT: 0.1): the last block's rate, "
                    "linear in depth from 0 at the first")
        ->check(real_in(0, 1, Ends::closed_open))
        ->capture_default_str();
    sub->add_option("--mlm-weight", f->opt.mlm_weight,
                    "Keep the masked-token loss while finetuning, this weighted, beside the task's: "
                    "the inputs are masked as in pretraining (--mask-prob) (0: off)")
        ->check(real_in(0, INFINITY))
        ->capture_default_str();
    add_lm_flags(*sub, *f, true);
    sub->callback([f, sub] {
      set_threads(f->threads);
      const ProfileRun profiling(f->profile);
      LmOptions opt = f->opt;
      if (!f->resume.empty()) {
        check_resume_flags(*sub, kResumeFlags);
        opt.out_dir = f->resume;
        if (!f->run.epochs->count()) opt.epochs = 0;
        print_result("finetune", finetune(opt, true), opt.out_dir);
        return;
      }
      if (opt.init.empty() || (opt.task.empty() && opt.train_file.empty() && opt.dev_file.empty()))
        throw CLI::ValidationError("finetune", "needs --init, and --task or --train with --dev");
      // Finetuning masks its inputs only for the masked-token loss: a --mask-prob alone would do nothing.
      if (sub->count("--mask-prob") && opt.mlm_weight == 0)
        throw CLI::ValidationError("finetune", "--mask-prob applies only with --mlm-weight > 0");
      default_grad_accum(opt, f->run);
      const TrainResult r = finetune(opt, false, f->overwrite);
      if (opt.train_file.empty() || !opt.test_file.empty())  // files without --test have no test split
        std::printf("test accuracy %.2f%% (best %.2f%%); ", 100 * r.final_test_acc, 100 * r.best_test_acc);
      print_result("finetune", r, opt.out_dir);
    });
  }
  {
    auto args = std::make_shared<TextQueryArgs>();
    CLI::App* sub = app.add_subcommand("fill-mask", "Print the most probable tokens for each [MASK] in a text");
    sub->add_option("--checkpoint", args->checkpoint, "A text checkpoint (gmlp pretrain's or finetune's)")->required();
    sub->add_option("texts", args->texts, "Texts with one or more [MASK] each (none: one text per line of stdin)");
    sub->add_option("--top", args->top, "Predictions per [MASK]")->check(at_least(1))->capture_default_str();
    sub->add_flag("--json", args->json,
                  "Print JSON in the shape of Hugging Face's fill-mask pipeline: per [MASK], a list of "
                  "{score, token, token_str, sequence}");
    add_threads_option(*sub, args->threads);
    sub->callback([args] {
      set_threads(args->threads);
      const std::vector<std::string> texts = texts_or_stdin(args->texts, "fill");
      FillMask model(args->checkpoint);
      // Every text checked before any is run; with several, the error names which.
      for (size_t i = 0; i < texts.size(); ++i) try {
          model.check(texts[i]);
        } catch (const std::runtime_error& e) {
          if (texts.size() == 1) throw;
          fail("text ", i + 1, ": ", e.what());
        }
      nlohmann::json all = nlohmann::json::array();
      for (const std::string& text : texts) {
        const std::vector<std::vector<MaskFill>> masks = model.fill(text, args->top);
        if (args->json) {
          all.push_back(serve::fill_mask_json(masks));
          continue;
        }
        std::printf("%s\n", text.c_str());
        for (size_t m = 0; m < masks.size(); ++m) {
          if (masks.size() > 1) std::printf("  [MASK] %zu of %zu\n", m + 1, masks.size());
          // A token that is only a word start (SentencePiece's lone "▁") has no text: shown as (space).
          auto shown = [](const MaskFill& f) { return f.token_str.empty() ? std::string("(space)") : f.token_str; };
          size_t width = 0;
          for (const MaskFill& f : masks[m]) width = std::max(width, shown(f).size());
          for (const MaskFill& f : masks[m])
            std::printf("  %6.3f  %-*s  %s\n", f.score, int(width), shown(f).c_str(), f.sequence.c_str());
        }
      }
      if (args->json) print_results_json(all);
    });
  }
  {
    auto args = std::make_shared<TextQueryArgs>();
    CLI::App* sub = app.add_subcommand("classify-text", "Classify texts with a finetuned text model");
    sub->add_option("--checkpoint", args->checkpoint, "A text classifier checkpoint (gmlp finetune's)")->required();
    sub->add_option("texts", args->texts,
                    "Texts to classify; for a model finetuned on pairs, the two texts of each separated by a tab "
                    "(none: one per line of stdin)");
    sub->add_option("--top", args->top, "Classes per text, most probable first")
        ->check(at_least(1))
        ->capture_default_str();
    sub->add_flag("--json", args->json,
                  "Print JSON in the shape of Hugging Face's text-classification pipeline: per text, a list of "
                  "{label, score}");
    add_threads_option(*sub, args->threads);
    sub->callback([args] {
      set_threads(args->threads);
      const std::vector<std::string> texts = texts_or_stdin(args->texts, "classify");
      TextClassifier model(args->checkpoint);
      // Pairs split at their tab, every input checked before any is run.
      std::vector<std::string> firsts, seconds;
      for (size_t i = 0; i < texts.size(); ++i) {
        const size_t tab = texts[i].find('\t');
        if (model.takes_pairs() && tab == std::string::npos)
          fail("text ", i + 1, " is one text, but the model was finetuned on pairs (", model.task(),
               "): give the two texts separated by a tab: '", texts[i], "'");
        firsts.push_back(model.takes_pairs() ? texts[i].substr(0, tab) : texts[i]);
        if (model.takes_pairs()) seconds.push_back(texts[i].substr(tab + 1));
      }
      const std::vector<std::vector<Prediction>> results = model.classify(firsts, args->top, seconds);
      nlohmann::json all = nlohmann::json::array();
      for (size_t i = 0; i < texts.size(); ++i) {
        if (args->json) {
          nlohmann::json list = nlohmann::json::array();
          for (const Prediction& p : results[i]) list.push_back({{"label", p.name}, {"score", p.probability}});
          all.push_back(list);
          continue;
        }
        std::printf("%s\n", texts[i].c_str());
        for (const Prediction& p : results[i]) std::printf("  %6.3f  %s\n", p.probability, p.name.c_str());
      }
      if (args->json) print_results_json(all);
    });
  }
}

}  // namespace gmlp::cli
