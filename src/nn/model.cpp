#include "nn/model.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <type_traits>

#include "core/error.h"
#include "core/matmul.h"
#include "core/memory.h"
#include "nn/cnn.h"
#include "nn/token_model.h"

namespace gmlp {

int64_t ParamTable::add(const std::string& name, std::vector<int64_t> shape, bool decay, bool trainable) {
  for (const ParamInfo& p : params_) GMLP_CHECK(p.name != name);
  ParamInfo p;
  p.name = name;
  p.numel = 1;
  for (int64_t d : shape) p.numel *= d;
  p.shape = std::move(shape);
  p.offset = total();
  p.decay = decay;
  p.trainable = trainable;
  params_.push_back(p);
  return p.offset;
}

namespace {
int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }  // 64-byte aligned views of float
}  // namespace

template <class T>
int64_t Arena<T>::size() const {
  const int layers = layer_ + 1;
  int64_t global = 0;
  std::vector<int64_t> keep(layers, 0), temp(layers, 0);
  for (const Request& r : requests_) {
    if (r.region == Region::global) global += round16(r.n);
    if (r.region == Region::keep) keep[r.layer] += round16(r.n);
    if (r.region == Region::temp) temp[r.layer] += round16(r.n);
  }
  int64_t keep_total = 0, temp_max = 0;
  for (int l = 0; l < layers; ++l) {
    keep_total = training() ? keep_total + keep[l] : std::max(keep_total, keep[l]);
    temp_max = std::max(temp_max, temp[l]);
  }
  return global + keep_total + temp_max;
}

template <class T>
void Arena<T>::allocate(Buffer<T>& buf) {
  buf.resize(size_t(size()));
  place(buf.data());
}

template <class T>
void Arena<T>::place(T* base) const {
  auto round = round16;
  const int layers = layer_ + 1;
  // Sizes: the global region in full; per layer, its keep and temp sums.
  int64_t global = 0;
  std::vector<int64_t> keep(layers, 0), temp(layers, 0);
  for (const Request& r : requests_) {
    if (r.region == Region::global) global += round(r.n);
    if (r.region == Region::keep) keep[r.layer] += round(r.n);
    if (r.region == Region::temp) temp[r.layer] += round(r.n);
  }
  const bool train = training();
  int64_t keep_total = 0, temp_max = 0;
  std::vector<int64_t> keep_base(layers, 0);
  for (int l = 0; l < layers; ++l) {
    keep_base[l] = train ? keep_total : 0;
    keep_total = train ? keep_total + keep[l] : std::max(keep_total, keep[l]);
    temp_max = std::max(temp_max, temp[l]);
  }
  GMLP_CHECK(global + keep_total + temp_max == size());
  int64_t g_off = 0;
  std::vector<int64_t> k_off = keep_base, t_off(layers, 0);
  for (const Request& r : requests_) {
    int64_t at = 0;
    switch (r.region) {
      case Region::global: at = g_off, g_off += round(r.n); break;
      case Region::keep: at = global + k_off[r.layer], k_off[r.layer] += round(r.n); break;
      case Region::temp: at = global + keep_total + t_off[r.layer], t_off[r.layer] += round(r.n); break;
    }
    *r.ptr = base + at;
  }
}

template <class T>
int64_t ParamModel<T>::num_trainable() const {
  int64_t n = 0;
  for (const ParamInfo& p : params())
    if (p.trainable) n += p.numel;
  return n;
}

template <class T>
const ParamInfo& ParamModel<T>::param(const std::string& name) const {
  for (const auto& p : params())
    if (p.name == name) return p;
  fail("the model has no parameter named '", name, "'");
}

namespace {

std::string thousands_sep(int64_t n) {  // 17179869184 -> "17,179,869,184" (n >= 0)
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "'blocks.0.mlp_channels.fc1.weight' [262144, 65536]: ffn 262144, dim 65536; depth 1000": the
// largest tensor, and the config's fields whose values are its dimensions.
std::string largest_tensor(const std::vector<ParamInfo>& params, const nlohmann::json& config) {
  const ParamInfo* big = nullptr;
  for (const ParamInfo& p : params)
    if (!big || p.numel > big->numel) big = &p;
  if (!big) return "";
  std::string shape, fields;
  for (int64_t d : big->shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  std::vector<std::string> named;
  for (int64_t d : big->shape)
    for (auto it = config.begin(); it != config.end(); ++it)
      if (it->is_number_integer() && it->get<int64_t>() == d && d > 1 && it.key() != "depth" &&
          std::find(named.begin(), named.end(), it.key()) == named.end()) {
        named.push_back(it.key());
        fields += (fields.empty() ? ": " : ", ") + it.key() + " " + std::to_string(d);
      }
  if (config.contains("depth")) fields += (fields.empty() ? ": " : "; ") + cat("depth ", config["depth"].dump());
  return cat("its largest tensor is '", big->name, "' [", shape, "]", fields);
}

}  // namespace

template <class T>
void ParamModel<T>::allocate_params(Storage storage, const nlohmann::json& config) {
  const int64_t n = table_.total();
  if (n > kMaxParams)
    fail("invalid model config: ", thousands_sep(n), " parameters, more than the ", thousands_sep(kMaxParams),
         " a model may have (", largest_tensor(table_.list(), config), ")");
  check_fits_in_memory(2.0 * double(n) * sizeof(T),
                       cat("the weights and gradients of a model of ", thousands_sep(n), " parameters"),
                       cat(" (", largest_tensor(table_.list(), config), ")"));
  if (storage == Storage::table_only) return;
  w_.resize(size_t(n));  // the gradients come with a training plan (plan): inference has none
}

template <class T>
Arena<T> ParamModel<T>::lay_out_plan(int64_t max_batch, Mode mode, int64_t& chunk_batch, int64_t& per_input) {
  GMLP_CHECK(max_batch > 0);
  Arena<T> arena(mode);
  lay_out(arena, max_batch);
  per_input = std::max<int64_t>(1, arena.size() * int64_t(sizeof(T)) / max_batch);
  chunk_batch = max_batch;
  if (mode == Mode::infer && infers_in_chunks()) {
    chunk_batch = std::clamp<int64_t>(kInferChunkBytes / per_input, 1, max_batch);
    if (chunk_batch < max_batch) {
      arena = Arena<T>(mode);
      lay_out(arena, chunk_batch);
    }
  }
  return arena;
}

template <class T>
int64_t ParamModel<T>::plan_bytes(int64_t max_batch, Mode mode) {
  int64_t chunk_batch = 0, per_input = 0;
  const int64_t bytes = lay_out_plan(max_batch, mode, chunk_batch, per_input).size() * int64_t(sizeof(T));
  // lay_out pointed the layers' views at requests that are never placed: point them into the
  // model's plan again, the same layout as before.
  if (max_batch_ > 0) lay_out_plan(max_batch_, mode_, chunk_batch, per_input).place(acts_.data());
  return bytes;
}

template <class T>
ParamModel<T>::~ParamModel() {
  if constexpr (std::is_same_v<T, float>) {
    if (frozen_) release_constant(w_.data());
    drop_packs(w_.data(), w_.data() + w_.size());  // ConstantForCall's, which outlive their calls
  }
}

template <class T>
void ParamModel<T>::freeze() {
  GMLP_CHECK(mode_ != Mode::train || max_batch_ == 0);  // not under a training plan
  if constexpr (std::is_same_v<T, float>)
    if (!frozen_ && w_.size() > 0) hold_constant(w_.data(), w_.data() + w_.size());
  frozen_ = true;
}

template <class T>
void ParamModel<T>::share_weights(ParamModel& owner) {
  GMLP_CHECK(w_.size() == 0 && max_batch_ == 0);  // built table_only, and not planned yet
  GMLP_CHECK(owner.num_params() == table_.total());
  shared_w_ = owner.weights();
}

template <class T>
void ParamModel<T>::plan(int64_t max_batch, Mode mode) {
  GMLP_CHECK(max_batch > 0);
  GMLP_CHECK(!(frozen_ && mode == Mode::train));    // a frozen model's weights must not change
  GMLP_CHECK(!(shared_w_ && mode == Mode::train));  // nor another model's
  int64_t chunk_batch = 0, per_input = 0;
  Arena<T> arena = lay_out_plan(max_batch, mode, chunk_batch, per_input);
  // An inference plan of one chunk that does not fit is one of a few inputs: no smaller batch helps.
  check_fits_in_memory(double(arena.size()) * sizeof(T),
                       cat("the ", mode == Mode::train ? "training" : "inference", " activations of a batch of ",
                           thousands_sep(chunk_batch)),
                       chunk_batch == max_batch ? " (lower --batch-size)" : "");
  arena.allocate(acts_);
  if (mode == Mode::train && g_.size() != w_.size()) g_.resize(w_.size());
  max_batch_ = max_batch;
  chunk_batch_ = chunk_batch;
  per_input_bytes_ = per_input;
  mode_ = mode;
}

template <class T>
int64_t ParamModel<T>::infer_chunk(int64_t chunk_bytes) const {
  GMLP_CHECK(max_batch_ > 0);
  return std::clamp<int64_t>(chunk_bytes / per_input_bytes_, 1, chunk_batch_);
}

template <class T>
int Model<T>::infer_streams(int64_t B) const {
  const int threads = omp_get_max_threads();
  return this->mode_ == Mode::infer && !omp_in_parallel() && B >= threads ? threads : 1;
}

// Threads that share every op of a forward pass wait for each other at the end of each op: on
// a 2-core Zen 3, 9–14 % of a batched inference's samples were a thread waiting in the OpenMP
// runtime, one core running 10–15 % slower than the other. As streams, each thread takes the next
// chunk of images once it has finished one and runs its whole forward pass alone, so the threads
// wait once a batch, for at most a chunk. Each thread's ops run as in a one-thread process
// (omp_set_num_threads(1) for the region's tasks): the same bits as there, which are a two-thread
// process's too. Their chunks are small enough that each thread takes about four, and no larger
// than its share of the cache budget.
template <class T>
const T* Model<T>::infer(const T* images, int64_t B, int64_t chunk_bytes) {
  GMLP_CHECK(B > 0 && B <= this->max_batch_);
  // A training plan keeps every layer's activations, so its bytes per image say nothing of what
  // one forward touches: evaluation during training runs whole batches, as before.
  if (this->mode_ != Mode::infer) return forward(images, B);
  constexpr int64_t kChunksPerStream = 4;
  const int streams = infer_streams(B);
  const int64_t chunk = streams == 1
                            ? this->infer_chunk(chunk_bytes)
                            : std::clamp<int64_t>((B + kChunksPerStream * streams - 1) / (kChunksPerStream * streams),
                                                  1, this->infer_chunk(chunk_bytes / streams));
  if (streams == 1 && B <= chunk) return forward(images, B);
  const int64_t K = cfg_.num_classes;
  const int64_t image = int64_t(cfg_.in_chans) * cfg_.img_size * cfg_.img_size;
  if (gathered_.size() < size_t(B * K)) gathered_.resize(size_t(B * K));
  std::atomic<int64_t> next{0};  // the first image no thread has taken
  // Model m's forward passes over the chunks not taken yet, its logits gathered.
  const auto take_chunks = [&](Model<T>& m) {
    for (int64_t b0; (b0 = next.fetch_add(chunk)) < B;) {
      const int64_t n = std::min(chunk, B - b0);
      const T* logits = m.forward(images + b0 * image, n);
      std::copy(logits, logits + n * K, gathered_.data() + b0 * K);
    }
  };
  if (streams == 1) {
    take_chunks(*this);
    return gathered_.data();
  }
  while (int(streams_.size()) < streams - 1) {
    streams_.push_back(make_model<T>(cfg_, Storage::table_only));
    streams_.back()->share_weights(*this);
  }
  for (const auto& s : streams_)
    if (s->planned_batch() < chunk) s->plan(chunk, Mode::infer);
  std::exception_ptr error;  // the first error a thread met; the others then stop
#pragma omp parallel num_threads(streams)
  {
    omp_set_num_threads(1);
    const int t = omp_get_thread_num();
    try {
      take_chunks(t == 0 ? *this : *streams_[size_t(t - 1)]);
    } catch (...) {
      next = B;
#pragma omp critical(gmlp_infer_streams_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return gathered_.data();
}

template <class T>
std::unique_ptr<Model<T>> make_model(const ModelConfig& config, Storage storage) {
  config.validate();
  if (!model_kind_info(config.model).patches) return std::make_unique<Cnn<T>>(config, storage);
  return std::make_unique<TokenModel<T>>(config, storage);
}

std::vector<ParamInfo> param_table(const ModelConfig& config) {
  config.validate();
  if (!model_kind_info(config.model).patches) return Cnn<float>(config, Storage::table_only).params();
  return TokenModel<float>(config, Storage::table_only).params();
}

template class Arena<float>;
template class Arena<double>;
template class ParamModel<float>;
template class ParamModel<double>;
template class Model<float>;
template class Model<double>;
template std::unique_ptr<Model<float>> make_model<float>(const ModelConfig&, Storage);
template std::unique_ptr<Model<double>> make_model<double>(const ModelConfig&, Storage);

}  // namespace gmlp
