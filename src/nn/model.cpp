#include "nn/model.h"

#include <algorithm>

#include "core/error.h"
#include "nn/cnn.h"
#include "nn/token_model.h"

namespace gmlp {

int64_t ParamTable::add(const std::string& name, std::vector<int64_t> shape, bool decay,
                        bool trainable) {
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

template <class T>
void Arena<T>::allocate(Buffer<T>& buf) {
  auto round = [](int64_t n) { return (n + 15) / 16 * 16; };  // 64-byte aligned views
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
  buf.resize(size_t(global + keep_total + temp_max));
  T* base = buf.data();
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

template <class T>
void ParamModel<T>::allocate_params() {
  w_.resize(size_t(table_.total()));
  g_.resize(size_t(table_.total()));
}

template <class T>
void ParamModel<T>::plan(int64_t max_batch, Mode mode) {
  GMLP_CHECK(max_batch > 0);
  Arena<T> arena(mode);
  lay_out(arena, max_batch);
  arena.allocate(acts_);
  max_batch_ = max_batch;
  mode_ = mode;
}

template <class T>
int64_t Model<T>::infer_chunk(int64_t chunk_bytes) const {
  GMLP_CHECK(this->max_batch_ > 0);
  const int64_t bytes = int64_t(this->activation_bytes());
  const int64_t per_image = std::max<int64_t>(1, bytes / this->max_batch_);
  return std::clamp<int64_t>(chunk_bytes / per_image, 1, this->max_batch_);
}

template <class T>
const T* Model<T>::infer(const T* images, int64_t B, int64_t chunk_bytes) {
  GMLP_CHECK(B > 0 && B <= this->max_batch_);
  // A training plan keeps every layer's activations, so its bytes per image say nothing of what
  // one forward touches: evaluation during training runs whole batches, as before.
  const int64_t chunk = this->mode_ == Mode::infer ? infer_chunk(chunk_bytes) : B;
  if (B <= chunk) return forward(images, B);
  const int64_t K = cfg_.num_classes;
  const int64_t image = int64_t(cfg_.in_chans) * cfg_.img_size * cfg_.img_size;
  if (gathered_.size() < size_t(B * K)) gathered_.resize(size_t(B * K));
  for (int64_t b0 = 0; b0 < B; b0 += chunk) {
    const int64_t n = std::min(chunk, B - b0);
    const T* logits = forward(images + b0 * image, n);
    std::copy(logits, logits + n * K, gathered_.data() + b0 * K);
  }
  return gathered_.data();
}

template <class T>
std::unique_ptr<Model<T>> make_model(const ModelConfig& config) {
  config.validate();
  if (config.model == "cnn") return std::make_unique<Cnn<T>>(config);
  return std::make_unique<TokenModel<T>>(config);
}

template class Arena<float>;
template class Arena<double>;
template class ParamModel<float>;
template class ParamModel<double>;
template class Model<float>;
template class Model<double>;
template std::unique_ptr<Model<float>> make_model<float>(const ModelConfig&);
template std::unique_ptr<Model<double>> make_model<double>(const ModelConfig&);

}  // namespace gmlp
