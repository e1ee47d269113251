#include "train/lm_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <type_traits>

#include "core/error.h"
#include "core/matmul.h"
#include "dist/communicator.h"
#include "io/base64.h"
#include "io/safetensors.h"
#include "ops/cross_entropy.h"
#include "text/corpus.h"
#include "text/labelled.h"
#include "text/mlm.h"
#include "text/tasks.h"
#include "train/checkpoint.h"
#include "train/eval_subset.h"
#include "train/guards.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/run_dir.h"
#include "train/run_files.h"

namespace gmlp {

namespace fs = std::filesystem;
using text::Tokenizer;

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LmOptions, corpus, init, task, vocab_size, epochs, batch_size,
                                                grad_accum, lr, min_lr, warmup_epochs, weight_decay, clip_norm,
                                                mask_prob, short_seq_prob, seed, train_limit, eval_limit, seq_len,
                                                precision, segments, nsp, nsp_negatives, layer_decay, drop_path,
                                                mlm_weight, train_file, dev_file, test_file, text_column, pair_column,
                                                label_column)

nlohmann::json LmOptions::to_json() const { return *this; }
LmOptions LmOptions::from_json(const nlohmann::json& j) {
  LmOptions o = j.get<LmOptions>();
  if (!j.contains("short_seq_prob")) o.short_seq_prob = 0;  // a run from before the option had none
  return o;
}

void save_text_checkpoint(const std::string& path, const TextModel<float>& model, const Tokenizer& tokenizer,
                          const std::map<std::string, std::string>& extra) {
  std::vector<st::Entry> entries;
  for (const ParamInfo& p : model.params()) entries.push_back({p.name, p.shape, model.weights() + p.offset});
  std::map<std::string, std::string> meta = extra;
  meta["format"] = "gmlp-text";
  meta["config"] = model.config().to_json().dump();
  meta["tokenizer"] = base64_encode(tokenizer.serialized());
  st::save(path, entries, meta);
}

TextCheckpoint load_text_checkpoint(const std::string& path) {
  const st::File file = st::File::open(path);
  refuse_run_state(file, path);
  if (checkpoint_kind(file) == CheckpointKind::image)
    fail("'", path, "' is ", describe_checkpoint(file),
         ", not a text model (of gmlp pretrain or finetune): use it with gmlp predict, eval or viz");
  TextCheckpoint ck;
  ck.metadata = file.metadata();
  auto meta = [&](const char* key) {
    auto it = ck.metadata.find(key);
    if (it == ck.metadata.end())
      fail("failed to load text checkpoint '", path, "': metadata '", key,
           "' is missing (expected a checkpoint written by gmlp pretrain or finetune)");
    return it->second;
  };
  try {
    ck.config = TextConfig::from_json(nlohmann::json::parse(meta("config")));
    ck.config.validate();
    check_tensors(file, param_table(ck.config));  // before the model is allocated
  } catch (const nlohmann::json::exception& e) {
    fail("failed to load text checkpoint '", path, "': metadata 'config' is malformed: ", e.what());
  } catch (const Error& e) {
    fail("failed to load text checkpoint '", path, "': ", e.what());
  }
  ck.tokenizer = std::make_unique<Tokenizer>(
      Tokenizer::from_serialized(base64_decode(meta("tokenizer"), "metadata 'tokenizer' of '" + path + "'"), path));
  if (ck.tokenizer->vocab_size() != ck.config.vocab_size)
    fail("failed to load text checkpoint '", path, "': the tokenizer has ", ck.tokenizer->vocab_size(),
         " pieces but the model's vocab_size is ", ck.config.vocab_size);
  ck.model = std::make_unique<TextModel<float>>(ck.config);
  for (const ParamInfo& p : ck.model->params()) {
    const std::vector<float> v = file.read_f32(p.name, p.shape);
    std::copy(v.begin(), v.end(), ck.model->weights() + p.offset);
  }
  for (const st::TensorInfo& t : file.tensors()) {
    bool known = false;
    for (const ParamInfo& p : ck.model->params()) known |= p.name == t.name;
    if (!known) fail("failed to load text checkpoint '", path, "': unexpected tensor '", t.name, "'");
  }
  return ck;
}

namespace {

// The train or dev documents: KJV verses by the chapter split, or a text file's lines by index.
std::vector<std::string> documents(const LmOptions& opt, text::Split split) {
  if (!opt.corpus.empty()) return text::lines_in_split(text::load_lines(opt.corpus), split);
  return text::verse_texts(text::load_kjv(), split);
}

std::vector<std::vector<int32_t>> encode_all(const Tokenizer& tok, const std::vector<std::string>& docs) {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(docs.size());
  for (const auto& d : docs) ids.push_back(tok.encode(d));
  return ids;
}

// A split's documents tokenized, the empty ones left out (packing skips them too).
std::vector<std::vector<int32_t>> split_documents(const Tokenizer& tok, const LmOptions& opt, text::Split split) {
  std::vector<std::vector<int32_t>> ids = encode_all(tok, documents(opt, split));
  ids.erase(std::remove_if(ids.begin(), ids.end(), [](const auto& d) { return d.empty(); }), ids.end());
  return ids;
}

// The KJV verses of a split for next-sentence pairs, with their chapters (units) and where
// negatives come from (groups): their book, or with `any_book` the whole split.
struct NspDocs {
  std::vector<std::vector<int32_t>> ids;
  std::vector<int> unit, group;
};

NspDocs nsp_documents(const Tokenizer& tok, text::Split split, bool any_book) {
  NspDocs out;
  std::vector<std::string> texts;
  for (const text::Verse& v : text::load_kjv())
    if (text::kjv_split(v.chapter_index) == split)
      texts.push_back(v.text), out.unit.push_back(v.chapter_index), out.group.push_back(any_book ? 0 : v.book);
  out.ids = encode_all(tok, texts);
  return out;
}

// The masked positions of labels[0..count) (flat b·N + n) and their labels. Room for all count
// is kept from the first step, so a step that masks more than any before allocates nothing.
void gather_masked(const int32_t* labels, int64_t count, std::vector<int64_t>& positions,
                   std::vector<int32_t>& targets) {
  positions.clear(), targets.clear();
  positions.reserve(size_t(count)), targets.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i)
    if (labels[i] != text::kIgnoreLabel) positions.push_back(i), targets.push_back(labels[i]);
}

// A batch for the [CLS] head (finetuning, and pretraining's next-sentence loss) and its
// buffers, reused from step to step.
struct HeadBatch {
  std::vector<int32_t> ids, labels;
  std::vector<float> probs, dlogits;

  // Examples index[0..B) of set (index null: the B from `first` on) into ids and labels.
  void load(const std::vector<text::Example>& set, const int* index, int64_t first, int64_t B, int N) {
    ids.resize(size_t(B) * size_t(N)), labels.resize(size_t(B));
    for (int64_t b = 0; b < B; ++b) {
      const text::Example& e = set[size_t(index ? index[b] : first + b)];
      std::copy(e.ids.begin(), e.ids.end(), ids.begin() + b * N);
      labels[size_t(b)] = e.label;
    }
  }
  // Arg-max hits of logits (B, K) against labels.
  int64_t hits(const float* logits, int64_t B, int K) const {
    int64_t c = 0;
    for (int64_t b = 0; b < B; ++b)
      c += (std::max_element(logits + b * K, logits + (b + 1) * K) - logits - b * K) == labels[size_t(b)];
    return c;
  }
  // Mean cross-entropy of logits (B, K) against labels, summed over the batch in the result, and
  // its gradient with respect to the logits, times scale, in dlogits.
  StepStats loss(const float* logits, int B, int K, float scale = 1.f) {
    probs.resize(size_t(B) * size_t(K)), dlogits.resize(size_t(B) * size_t(K));
    const float mean = cross_entropy_forward(probs.data(), logits, labels.data(), B, K, 0.f);
    cross_entropy_backward(dlogits.data(), probs.data(), labels.data(), B, K, 0.f);
    if (scale != 1.f)
      for (float& d : dlogits) d *= scale;
    return StepStats{double(mean) * B, hits(logits, B, K), B};
  }
  // The head's accuracy on set, a planned batch at a time, the batches shared by the ranks of
  // comm, with a progress line naming `what` on a terminal.
  double accuracy(TextModel<float>& model, const std::vector<text::Example>& set, const char* what,
                  dist::Communicator& comm) {
    const int64_t B = model.planned_batch(), S = int64_t(set.size());
    const int N = model.config().seq_len, K = model.config().num_classes;
    EvalProgress progress(what, S);
    dist::BatchShares shares(comm, (S + B - 1) / B, 1);
    int64_t correct = 0;  // this rank's, for the progress line
    for (int64_t s0 = 0; s0 < S; s0 += B) {
      if (!shares.mine(s0 / B)) continue;
      const int64_t b = std::min(B, S - s0);
      load(set, nullptr, s0, b, N);
      model.encode(ids.data(), b);
      const int64_t c = hits(model.classify(), b, K);
      shares.row(s0 / B)[0] = double(c);
      correct += c;
      progress.update(s0 + b, correct);
    }
    const double all = shares.total()[0];
    return S ? all / double(S) : 0.0;
  }
};

// Pretraining and finetuning for the loop (loop.h): the model and tokenizer they share, and what
// differs between them, given by each command: the items, one step, the evaluation, the report.
struct TextTask final : Task {
  TextModel<float>* model = nullptr;
  const Tokenizer* tok = nullptr;
  int64_t n_items = 0;  // sequences or examples in the train split
  const char* item_unit = "seq";
  std::string tail;  // the opening line's end (", layer decay 0.75")
  // Forward and backward on the items items[0..B) (see Task::step).
  std::function<StepStats(const int* items, const uint64_t* keys, int B, Rng& rng, float grad_scale)> run_step;
  std::function<nlohmann::json(dist::Communicator&)> run_evaluate;  // figures after each epoch
  std::function<void(const nlohmann::json&, int epochs)> run_report;
  std::function<void(int epoch)> run_begin_epoch;  // optional: before the epoch's first step
  const char* aux = nullptr;                       // the second objective's name (Task::aux_name)
  std::map<std::string, std::string> metadata;     // in every checkpoint, beside the epoch marks

  Trainable trainable() override { return {model->weights(), model->grads(), model->num_params(), &model->params()}; }
  int64_t items() const override { return n_items; }
  const char* unit() const override { return item_unit; }
  void plan(int B) override { model->plan(B); }
  std::string describe(int64_t n) const override {
    return cat(model->config().model, ", ", model->num_trainable(), " params, ", n, " train ", item_unit, "s");
  }
  std::string notes() const override { return tail; }
  const char* aux_name() const override { return aux; }
  void begin_epoch(int epoch) override {
    if (run_begin_epoch) run_begin_epoch(epoch);
  }
  StepStats step(const int* items, const uint64_t* keys, int B, Rng& rng, float grad_scale) override {
    return run_step(items, keys, B, rng, grad_scale);
  }
  void set_grads_ready(std::function<void(int64_t from)> ready) override { model->set_grads_ready(std::move(ready)); }
  nlohmann::json evaluate(dist::Communicator& comm) override { return run_evaluate(comm); }
  void report(const nlohmann::json& row, int epochs) const override { run_report(row, epochs); }
  std::vector<EpochFile> checkpoints(const std::map<std::string, std::string>& marks) override {
    std::map<std::string, std::string> meta = metadata;
    for (const auto& [k, v] : marks) meta[k] = v;
    return {{RunFiles::kCheckpoint,
             [this, meta](const std::string& path) { save_text_checkpoint(path, *model, *tok, meta); }}};
  }
};

// A run's starting point: fresh (epoch 0) or from its folder.
struct Start {
  int epoch = 0;
  int64_t step = 0;
  std::vector<nlohmann::json> metrics;
  std::unique_ptr<RunState> state;  // set when resuming
};

// Reads the run folder for --resume: options (epochs may grow), state and checkpoint, checked
// to be from the same epoch.
Start resume_from(const RunFiles& files, LmOptions& opt, TextCheckpoint& ck) {
  Start st;
  st.state = std::make_unique<RunState>(read_run_state(files, &st.metrics));
  if (st.state->options.contains("crop_padding"))  // TrainOptions: an image run
    fail("'", opt.out_dir, "' is an image classifier's run, not a text run: resume it with gmlp train --resume");
  const LmOptions given = opt;
  try {
    opt = LmOptions::from_json(st.state->options);
  } catch (const nlohmann::json::exception&) {
    fail("failed to resume from '", files.state, "': metadata 'options' is malformed");
  }
  opt.out_dir = given.out_dir;
  opt.bucket_mb = given.bucket_mb;  // how the sums run, not what the run is
  if (given.epochs > 0) opt.epochs = given.epochs;
  validate_options(opt, !opt.task.empty());
  ck = load_text_checkpoint(files.checkpoint);
  if (ck.metadata["epoch"] != std::to_string(st.state->epoch))
    fail("failed to resume: '", files.checkpoint, "' is from epoch ", ck.metadata["epoch"], " but '", files.state,
         "' from epoch ", st.state->epoch, " (the folder was changed by hand; start again with --overwrite)");
  st.epoch = st.state->epoch;
  st.step = st.state->step;
  return st;
}

// Both commands' run: the opening line's notes, layer decay, then the one loop.
TrainResult run_text(TextTask& task, const LmOptions& opt, RunDir& folder, const RunFiles& files, Start& start) {
  TextModel<float>& model = *task.model;
  const std::vector<double> lr_scale =
      opt.layer_decay == 1.0 ? std::vector<double>{} : layer_decay_scales(model.params(), opt.layer_decay);
  char decay_note[40] = "", drop_note[40] = "", mlm_note[48] = "";
  if (!lr_scale.empty()) std::snprintf(decay_note, sizeof decay_note, ", layer decay %g", opt.layer_decay);
  if (model.config().drop_path > 0)
    std::snprintf(drop_note, sizeof drop_note, ", drop path %g", model.config().drop_path);
  if (opt.mlm_weight > 0) std::snprintf(mlm_note, sizeof mlm_note, ", masked-token loss x%g", opt.mlm_weight);
  task.tail = cat(decay_note, drop_note, mlm_note);
  ResumePoint from{start.epoch, start.step, std::move(start.metrics), start.state.get()};
  return run_loop(task, opt, opt.to_json(), folder, files, std::move(from), lr_scale);
}

// The items of an evaluation split that --eval-limit keeps (eval_subset.h), and its size before,
// with a note on stderr when the limit covers the whole split. Labelled examples (finetuning's
// dev and test) are drawn stratified by class.
template <class T>
int64_t limit_split(std::vector<T>& items, const LmOptions& opt, const char* what) {
  const int64_t total = int64_t(items.size());
  const std::string note = eval_limit_note(opt.eval_limit, total, what);
  if (!note.empty()) std::fprintf(stderr, "gmlp: %s\n", note.c_str());
  if constexpr (std::is_same_v<T, text::Example>) {
    std::vector<int> labels;
    labels.reserve(items.size());
    for (const text::Example& e : items) labels.push_back(e.label);
    keep_items(items, eval_subset(labels, opt.eval_limit, opt.seed));
  } else {
    keep_eval_subset(items, opt.eval_limit, opt.seed);
  }
  return total;
}

// " (2,000 of 10,000)" when an evaluation read a subset of its split, else "".
std::string subset_note(const nlohmann::json& m, const std::string& split) {
  if (!m.contains(split + "_count") || !m.contains(split + "_total")) return "";
  const std::string s = subset_label(m[split + "_count"].get<int64_t>(), m[split + "_total"].get<int64_t>());
  return s.empty() ? "" : " (" + s + ")";
}

RunStart run_start(bool resume, bool overwrite) {
  return resume ? RunStart::resume : overwrite ? RunStart::overwrite : RunStart::fresh;
}

}  // namespace

TrainResult pretrain(const TextConfig& config, const LmOptions& options, bool resume, bool overwrite) {
  LmOptions opt = options;
  // A text file is split line by line, so no two dev lines follow one another: no pairs to test.
  if (opt.nsp && !opt.corpus.empty())
    fail("pretrain --nsp needs the KJV, whose split keeps chapters whole; '", opt.corpus,
         "' is split line by line, so its dev lines never follow one another");
  const bool any_book = opt.nsp_negatives == "any";
  if (!resume) validate_options(opt, false);  // a resumed run's, once read
  RunDir folder(opt.out_dir, "pretrain", run_start(resume, overwrite));
  const RunFiles files(opt.out_dir);
  TextCheckpoint ck;
  Start start;
  if (resume) {
    start = resume_from(files, opt, ck);
  } else {
    // The vocabulary is learned from the train split only.
    // Rank 0 learns it and hands it to the other ranks of a data-parallel job.
    dist::Communicator& comm = dist::world();
    std::string learned;
    if (comm.rank() == 0)
      learned = Tokenizer::train(documents(opt, text::Split::train), (fs::path(opt.out_dir) / "tokenizer").string(),
                                 opt.vocab_size, opt.seed)
                    .serialized();
    comm.broadcast(learned, 0);
    ck.tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_serialized(learned, opt.out_dir));
    ck.config = config;
    ck.config.vocab_size = ck.tokenizer->vocab_size();
    ck.config.num_classes = opt.nsp ? 2 : 0;  // the next-sentence head: 1 when B follows A
    if (opt.nsp) ck.config.segments = true;
    ck.model = std::make_unique<TextModel<float>>(ck.config);
    Rng init_rng(opt.seed);
    ck.model->init(init_rng);
  }
  TextModel<float>& model = *ck.model;
  const Tokenizer& tok = *ck.tokenizer;
  const int N = model.config().seq_len, V = model.config().vocab_size;
  if (opt.nsp && model.config().num_classes != 2)
    fail("failed to pretrain with the next-sentence objective: the model has ", model.config().num_classes,
         " classes, expected 2");
  // Plain: the packed train split. Next-sentence: pairs drawn afresh each epoch (their number is
  // the same in every epoch), and a fixed draw of dev pairs.
  NspDocs nsp_train;
  std::vector<text::Example> pairs, dev_pairs;
  auto draw_pairs = [&](int epoch) {
    Rng r(epoch_seed(opt.seed ^ 0x4E5Bull, epoch));
    pairs = text::next_sentence_pairs(nsp_train.ids, nsp_train.unit, nsp_train.group, N, r);
  };
  std::vector<std::vector<int32_t>> train_seqs, train_docs;
  if (opt.nsp) {
    nsp_train = nsp_documents(tok, text::Split::train, any_book);
    draw_pairs(start.epoch);
    const NspDocs dev = nsp_documents(tok, text::Split::dev, any_book);
    Rng r(opt.seed ^ 0xDE5E7ull);
    dev_pairs = text::next_sentence_pairs(dev.ids, dev.unit, dev.group, N, r);
  } else {
    train_docs = split_documents(tok, opt, text::Split::train);
    train_seqs = text::pack_sequences(train_docs, N);
    // --train-limit trains on the first sequences: short ones come from the documents they hold,
    // each sequence holding N - 1 ids of the stream "doc [SEP] doc [SEP] ...".
    if (opt.train_limit > 0 && size_t(opt.train_limit) < train_seqs.size()) {
      const int64_t stream = int64_t(opt.train_limit) * (N - 1);
      int64_t used = 0;
      size_t keep = 0;
      while (keep < train_docs.size() && (keep == 0 || used + int64_t(train_docs[keep].size()) + 1 <= stream))
        used += int64_t(train_docs[keep++].size()) + 1;
      train_docs.resize(keep);
    }
  }
  std::vector<int32_t> short_seqs;  // validate_options: none with --nsp
  std::vector<std::vector<int32_t>> dev_docs = split_documents(tok, opt, text::Split::dev);
  auto dev_seqs = text::pack_sequences(dev_docs, N);
  const int64_t dev_total = limit_split(dev_seqs, opt, "dev sequences");
  const int64_t dev_pairs_total = opt.nsp ? limit_split(dev_pairs, opt, "dev pairs") : 0;
  text::MaskConfig mask;
  mask.mask_prob = float(opt.mask_prob);
  // Dev masks are drawn once, so every epoch is measured on the same positions.
  std::vector<int32_t> dev_inputs(dev_seqs.size() * N), dev_labels(dev_seqs.size() * N);
  Rng dev_rng(opt.seed ^ 0xDE5E7ull);
  for (size_t i = 0; i < dev_seqs.size(); ++i)
    text::mask_tokens(dev_seqs[i].data(), dev_inputs.data() + i * N, dev_labels.data() + i * N, N, V, mask, dev_rng);
  // Single dev documents (verses), each its own "[CLS] verse [SEP]" padded to N, as fill-mask and
  // finetuning read a text: up to kVerseEval of them, drawn by the seed, masked once.
  constexpr int64_t kVerseEval = 1000;
  const int64_t verses_total = int64_t(dev_docs.size());
  keep_eval_subset(dev_docs, opt.eval_limit > 0 ? std::min<int64_t>(opt.eval_limit, kVerseEval) : kVerseEval, opt.seed);
  std::vector<int32_t> verse_inputs(dev_docs.size() * N), verse_labels(dev_docs.size() * N);
  Rng verse_rng(opt.seed ^ 0x5E75Eull);
  for (size_t i = 0; i < dev_docs.size(); ++i) {
    const std::vector<int32_t> one = text::pack_sequences({dev_docs[i]}, N).front();  // a long one cut at N
    text::mask_tokens(one.data(), verse_inputs.data() + i * N, verse_labels.data() + i * N, N, V, mask, verse_rng);
  }

  std::vector<int32_t> inputs, labels, targets;
  std::vector<int64_t> positions;
  // The next-sentence head's loss, labels and figures over the epoch so far.
  HeadBatch nsp_batch;
  TextTask job;
  job.model = &model, job.tok = &tok;
  job.n_items = int64_t(opt.nsp ? pairs.size() : train_seqs.size());
  job.item_unit = "seq";
  if (opt.nsp) job.aux = "nsp";
  if (opt.nsp) job.run_begin_epoch = [&](int epoch) { draw_pairs(epoch); };
  job.run_step = [&](const int* items, const uint64_t* keys, int B, Rng& rng, float grad_scale) {
    inputs.resize(size_t(B) * N), labels.resize(size_t(B) * N), nsp_batch.labels.resize(size_t(B));
    short_seqs.resize(size_t(B) * N);
    for (int b = 0; b < B; ++b) {
      const int i = items[b];
      const int32_t* ids = opt.nsp ? pairs[i].ids.data() : train_seqs[i].data();
      Rng item_rng(keys[b]);
      if (opt.short_seq_prob > 0 && item_rng.uniform() < opt.short_seq_prob) {
        // BERT's short sequence in this one's place: whole documents from a random one on, as
        // many as fit in a length uniform in [2, N].
        const size_t first = size_t(item_rng.below(train_docs.size()));
        const int length = 2 + int(item_rng.below(uint64_t(N - 1)));
        text::short_sequence(train_docs, first, length, N, short_seqs.data() + size_t(b) * N);
        ids = short_seqs.data() + size_t(b) * N;
      }
      text::mask_tokens(ids, inputs.data() + b * N, labels.data() + b * N, N, V, mask, item_rng);
      if (opt.nsp) nsp_batch.labels[b] = pairs[i].label;
    }
    gather_masked(labels.data(), int64_t(B) * N, positions, targets);
    model.encode(inputs.data(), B, &rng);
    const float* cls_dlogits = nullptr;
    StepStats nsp;
    if (opt.nsp) {  // BERT's sum of the two mean losses
      nsp = nsp_batch.loss(model.classify(), B, 2, grad_scale);
      cls_dlogits = nsp_batch.dlogits.data();
    }
    const auto r =
        model.mlm(positions.data(), targets.data(), int64_t(positions.size()), true, cls_dlogits, grad_scale);
    return StepStats{r.loss_sum, r.correct, int64_t(positions.size()), nsp.loss_sum, nsp.correct, nsp.count};
  };
  // Masked-token figures of S masked sequences (inputs, labels): loss, arg-max and top-5 hits.
  struct Scores {
    double loss = 0;
    int64_t correct = 0, top5 = 0, count = 0;
  };
  // The batches are shared by the ranks of comm.
  auto score = [&](const std::vector<int32_t>& in, const std::vector<int32_t>& lab, const char* what,
                   dist::Communicator& comm) {
    const int64_t B = model.planned_batch(), S = int64_t(in.size()) / N;
    EvalProgress progress(what, S);
    dist::BatchShares shares(comm, (S + B - 1) / B, 4);
    for (int64_t s0 = 0; s0 < S; s0 += B) {
      if (!shares.mine(s0 / B)) continue;
      const int64_t b = std::min(B, S - s0);
      gather_masked(lab.data() + s0 * N, b * N, positions, targets);
      model.encode(in.data() + s0 * N, b);
      const auto r = model.mlm(positions.data(), targets.data(), int64_t(positions.size()), false);
      double* row = shares.row(s0 / B);
      row[0] = r.loss_sum, row[1] = double(r.correct), row[2] = double(r.top5), row[3] = double(positions.size());
      progress.update(s0 + b);
    }
    const std::vector<double> t = shares.total();
    return Scores{t[0], int64_t(t[1]), int64_t(t[2]), int64_t(t[3])};
  };
  job.run_evaluate = [&](dist::Communicator& comm) {
    const Scores p = score(dev_inputs, dev_labels, "dev sequences", comm);
    const Scores v = score(verse_inputs, verse_labels, "dev verses", comm);
    auto share = [](int64_t n, int64_t of) { return of ? double(n) / double(of) : 0.0; };
    const double mean = p.count ? p.loss / double(p.count) : 0.0, verse_mean = v.count ? v.loss / double(v.count) : 0.0;
    nlohmann::json m{{"dev_loss", mean},
                     {"dev_ppl", std::exp(mean)},
                     {"dev_acc", share(p.correct, p.count)},
                     {"dev_top5", share(p.top5, p.count)},
                     {"dev_masked_tokens", p.count},
                     {"dev_count", dev_seqs.size()},
                     {"dev_total", dev_total},
                     // The same on single verses, padded: what fill-mask and finetuning read.
                     {"dev_verse_ppl", std::exp(verse_mean)},
                     {"dev_verse_acc", share(v.correct, v.count)},
                     {"dev_verse_top5", share(v.top5, v.count)},
                     {"dev_verse_masked_tokens", v.count},
                     {"dev_verses", dev_docs.size()},
                     {"dev_verses_total", verses_total}};
    if (opt.nsp) {
      // Whether B follows A, on the unmasked dev pairs, as a finetuned model would read them.
      m["dev_nsp_acc"] = nsp_batch.accuracy(model, dev_pairs, "dev pairs", comm);
      m["dev_nsp_pairs"] = dev_pairs.size();
      m["dev_nsp_total"] = dev_pairs_total;
    }
    return m;
  };
  job.run_report = [&](const nlohmann::json& m, int epochs) {
    char nsp[96] = "";
    if (opt.nsp)
      std::snprintf(nsp, sizeof nsp, "  next sentence: train acc %.2f%%, dev acc %.2f%%",
                    100 * m["train_nsp_acc"].get<double>(), 100 * m["dev_nsp_acc"].get<double>());
    std::fprintf(stderr,
                 "epoch %d/%d  train loss %.4f  dev%s perplexity %.2f  masked-token acc %.2f%% (top 5 %.2f%%)  "
                 "single verses: perplexity %.2f, acc %.2f%% (top 5 %.2f%%)%s  (%s)\n",
                 m["epoch"].get<int>(), epochs, m["train_loss"].get<double>(), subset_note(m, "dev").c_str(),
                 m["dev_ppl"].get<double>(), 100 * m["dev_acc"].get<double>(), 100 * m["dev_top5"].get<double>(),
                 m["dev_verse_ppl"].get<double>(), 100 * m["dev_verse_acc"].get<double>(),
                 100 * m["dev_verse_top5"].get<double>(), nsp, format_duration(m["seconds"].get<double>()).c_str());
  };
  return run_text(job, opt, folder, files, start);
}

namespace {

// What finetune learns from: a KJV task (text/tasks.h) or the user's labelled files
// (text/labelled.h), its classes and whether its items are pairs of texts.
struct FinetuneData {
  const LmOptions& opt;
  std::optional<text::Task> task;   // a KJV task; none: the files
  std::vector<text::Verse> verses;  // the KJV, for a task
  std::vector<text::LabelledRow> train_rows, dev_rows, test_rows;
  std::vector<std::string> classes;
  bool pairs = false;

  explicit FinetuneData(const LmOptions& o) : opt(o) {
    if (o.train_file.empty()) {
      task = text::parse_task(o.task);
      verses = text::load_kjv();
      classes = text::class_names(*task), pairs = text::is_pair(*task);
      return;
    }
    const text::LabelledColumns columns{o.text_column, o.pair_column, o.label_column};
    train_rows = text::read_labelled(o.train_file, columns);
    dev_rows = text::read_labelled(o.dev_file, columns);
    if (!o.test_file.empty()) test_rows = text::read_labelled(o.test_file, columns);
    classes = text::label_set(train_rows), pairs = !o.pair_column.empty();
    if (classes.size() < 2)
      fail("failed to finetune on '", o.train_file, "': its '", o.label_column, "' column has one label, '", classes[0],
           "' (expected at least 2 classes)");
  }
  int num_classes() const { return int(classes.size()); }
  // next-verse: negatives drawn afresh each epoch, and a next-sentence head kept.
  bool kjv_pairs() const { return task && pairs; }
  std::string task_name() const { return task ? opt.task : std::string("files"); }
  std::string describe() const {
    return task ? cat("task ", opt.task) : cat("'", opt.train_file, "', ", classes.size(), " classes");
  }
  // The training examples of `epoch` (--train-limit's random subset, fixed by the seed).
  std::vector<text::Example> training(const Tokenizer& tok, int N, int epoch) const {
    if (task) return text::training_examples(*task, verses, tok, N, opt.seed, epoch, opt.train_limit);
    std::vector<text::Example> set = text::labelled_examples(train_rows, classes, tok, N, opt.train_file);
    keep_eval_subset(set, opt.train_limit, opt.seed);
    return set;
  }
  // All of dev or test (files without --test: none).
  std::vector<text::Example> split(const Tokenizer& tok, int N, text::Split s) const {
    if (task) return text::build_task(*task, verses, tok, s, N, opt.seed);
    const bool dev = s == text::Split::dev;
    return text::labelled_examples(dev ? dev_rows : test_rows, classes, tok, N, dev ? opt.dev_file : opt.test_file);
  }
};

}  // namespace

TrainResult finetune(const LmOptions& options, bool resume, bool overwrite) {
  LmOptions opt = options;
  if (!resume) validate_options(opt, true);  // a resumed run's, once read
  if (!resume && opt.init.empty()) fail("finetune needs --init, the pretrained checkpoint");
  // The folder first, so that one holding a run is refused before any work; a wrong --init
  // leaves nothing (a folder RunDir made for a run that saved no epoch is removed).
  RunDir folder(opt.out_dir, "finetune", run_start(resume, overwrite));
  const RunFiles files(opt.out_dir);
  TextCheckpoint pre;
  if (!resume) pre = load_text_checkpoint(opt.init);
  TextCheckpoint ck;
  Start start;
  if (resume) start = resume_from(files, opt, ck);
  const FinetuneData data(opt);  // a KJV task's examples, or the user's files, read and checked
  if (resume) {
    if (ck.config.num_classes != data.num_classes())
      fail("failed to resume: the run's checkpoint has ", ck.config.num_classes, " classes, but its data now gives ",
           data.num_classes());
  } else {
    ck.config = pre.config;
    ck.config.num_classes = data.num_classes();
    // BERT marks a pair's second segment with an embedding of its own; a pretrained checkpoint
    // without one gets it here, at zero, so finetuning starts from the pretrained function.
    if (opt.segments == "on" || opt.segments == "off")
      ck.config.segments = opt.segments == "on";
    else if (opt.segments == "auto")
      ck.config.segments = pre.config.segments || data.pairs;
    else
      fail("unknown --segments '", opt.segments, "': expected auto, on or off");
    const int64_t n0 = pre.config.seq_len;
    if (opt.seq_len > n0)
      fail("failed to finetune from '", opt.init, "': expected --seq-len <= the pretraining length ", n0, ", found ",
           opt.seq_len);
    if (opt.seq_len > 0) ck.config.seq_len = opt.seq_len;
    ck.config.drop_path = opt.drop_path;  // a finetuning regulariser, not the pretraining's
    ck.model = std::make_unique<TextModel<float>>(ck.config);
    Rng init_rng(opt.seed);
    ck.model->init(init_rng);  // the new head; everything else comes from the pretrained model
    // A next-sentence head (pretrain --nsp) answers next-verse's question with next-verse's
    // labels, so that task starts from it; every other task gets a new head.
    const bool keep_head = data.kjv_pairs() && pre.config.num_classes == ck.config.num_classes;
    try {
      copy_weights_to_length(*pre.model, *ck.model, [&](const std::string& name) {
        return (name == "segment_embed.weight" && !ck.config.segments) ||  // --segments off
               (name.rfind("cls_head.", 0) == 0 && !keep_head);
      });
    } catch (const Error& e) {
      fail("failed to finetune from '", opt.init, "': ", e.what());
    }
    ck.tokenizer = std::move(pre.tokenizer);
  }
  TextModel<float>& model = *ck.model;
  const Tokenizer& tok = *ck.tokenizer;
  const int N = model.config().seq_len, K = model.config().num_classes;
  auto train_set = data.training(tok, N, start.epoch);
  auto dev_set = data.split(tok, N, text::Split::dev);
  auto test_set = data.split(tok, N, text::Split::test);
  const int64_t dev_total = limit_split(dev_set, opt, "dev examples");
  const int64_t test_total = limit_split(test_set, opt, "test examples");
  const bool has_test = test_total > 0;
  const std::string dev_n = subset_label(int64_t(dev_set.size()), dev_total),
                    test_n = subset_label(int64_t(test_set.size()), test_total);
  std::fprintf(stderr, "gmlp: %s: %s train, %s dev, %s test examples%s\n", data.describe().c_str(),
               thousands(int64_t(train_set.size())).c_str(), (dev_n.empty() ? thousands(dev_total) : dev_n).c_str(),
               (test_n.empty() ? thousands(test_total) : test_n).c_str(),
               data.kjv_pairs() ? " (training negatives drawn afresh each epoch)" : "");
  HeadBatch batch;
  TextTask job;
  job.model = &model, job.tok = &tok;
  job.metadata = {{"task", data.task_name()},
                  {"classes", nlohmann::json(data.classes).dump()},
                  {"pairs", data.pairs ? "true" : "false"}};
  job.n_items = int64_t(train_set.size());
  job.item_unit = "example";
  if (opt.mlm_weight > 0) job.aux = "mlm";
  // With --mlm-weight: the masked copy of the batch, its masked positions and labels, and the
  // masked-token figures over the epoch so far.
  text::MaskConfig mask;
  mask.mask_prob = float(opt.mask_prob);
  std::vector<int32_t> masked, mask_labels, targets;
  std::vector<int64_t> positions;
  if (data.kjv_pairs() || opt.mlm_weight > 0)
    job.run_begin_epoch = [&](int epoch) {
      if (data.kjv_pairs()) train_set = data.training(tok, N, epoch);  // each epoch its own negatives
    };
  job.run_step = [&](const int* items, const uint64_t* keys, int B, Rng& rng, float grad_scale) {
    batch.load(train_set, items, 0, B, N);
    if (opt.mlm_weight == 0) {
      model.encode(batch.ids.data(), B, &rng);
      const StepStats r = batch.loss(model.classify(), B, K, grad_scale);
      model.classify_backward(batch.dlogits.data());
      return r;
    }
    // Both losses on one masked encode, as pretraining with --nsp: task + weight · masked tokens.
    const int64_t n = int64_t(B) * N;
    masked.resize(size_t(n)), mask_labels.resize(size_t(n));
    for (int b = 0; b < B; ++b) {
      Rng item_rng(keys[b]);
      text::mask_tokens(batch.ids.data() + b * N, masked.data() + b * N, mask_labels.data() + b * N, N,
                        model.config().vocab_size, mask, item_rng);
    }
    gather_masked(mask_labels.data(), n, positions, targets);
    model.encode(masked.data(), B, &rng);
    StepStats r = batch.loss(model.classify(), B, K, grad_scale);
    const auto m = model.mlm(positions.data(), targets.data(), int64_t(positions.size()), true, batch.dlogits.data(),
                             float(opt.mlm_weight) * grad_scale);
    r.aux_loss_sum = m.loss_sum, r.aux_correct = m.correct, r.aux_count = int64_t(positions.size());
    return r;
  };
  job.run_evaluate = [&](dist::Communicator& comm) {
    nlohmann::json m{{"task", data.task_name()},
                     {"dev_acc", batch.accuracy(model, dev_set, "dev examples", comm)},
                     {"dev_count", dev_set.size()},
                     {"dev_total", dev_total}};
    if (has_test) {  // --train files without --test: none
      m["test_acc"] = batch.accuracy(model, test_set, "test examples", comm);
      m["test_count"] = test_set.size();
      m["test_total"] = test_total;
    }
    return m;
  };
  job.run_report = [&](const nlohmann::json& m, int epochs) {
    char mlm[64] = "";
    if (m.contains("train_mlm_acc"))
      std::snprintf(mlm, sizeof mlm, "  masked tokens: train acc %.2f%%", 100 * m["train_mlm_acc"].get<double>());
    char test[96] = "";
    if (m.contains("test_acc"))
      std::snprintf(test, sizeof test, "  test%s acc %.2f%%", subset_note(m, "test").c_str(),
                    100 * m["test_acc"].get<double>());
    std::fprintf(stderr, "epoch %d/%d  train loss %.4f acc %.2f%%  dev%s acc %.2f%%%s%s  (%s)\n", m["epoch"].get<int>(),
                 epochs, m["train_loss"].get<double>(), 100 * m["train_acc"].get<double>(),
                 subset_note(m, "dev").c_str(), 100 * m["dev_acc"].get<double>(), test, mlm,
                 format_duration(m["seconds"].get<double>()).c_str());
  };
  return run_text(job, opt, folder, files, start);
}

}  // namespace gmlp
