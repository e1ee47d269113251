#include "dist/communicator.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace gmlp::dist {

namespace {

struct Done final : Request {
  bool test() override { return true; }
  void wait() override {}
};

std::unique_ptr<Communicator>& installed() {
  static std::unique_ptr<Communicator> world = std::make_unique<SingleProcess>();
  return world;
}

}  // namespace

void Communicator::broadcast(std::string& s, int root) {
  int64_t n = int64_t(s.size());
  broadcast(&n, sizeof n, root);
  s.resize(size_t(n));
  broadcast(s.data(), n, root);
}

std::unique_ptr<Request> SingleProcess::start_sum(float*, int64_t) { return std::make_unique<Done>(); }

void SingleProcess::abort(int code) { std::_Exit(code); }

BatchShares::BatchShares(Communicator& comm, int64_t batches, int fields)
    : comm_(comm), fields_(fields), rows_(size_t(batches * fields), 0.0) {}

std::vector<double> BatchShares::total() {
  comm_.sum(rows_.data(), int64_t(rows_.size()));
  std::vector<double> sum(size_t(fields_), 0.0);
  for (size_t i = 0; i < rows_.size(); ++i) sum[i % size_t(fields_)] += rows_[i];
  return sum;
}

int launched_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  return std::getenv("PMIX_RANK") ? 1 : 0;
}

Communicator& world() { return *installed(); }

void set_world(std::unique_ptr<Communicator> communicator) {
  GMLP_CHECK(communicator != nullptr);
  installed() = std::move(communicator);
}

ChunkedSum::ChunkedSum(Communicator& comm, float* data, int64_t n, int64_t chunk_elems) : comm_(comm), data_(data) {
  bounds_.push_back(0);
  if (chunk_elems > 0)
    for (int64_t at = chunk_elems; at < n; at += chunk_elems) bounds_.push_back(at);
  if (n > 0) bounds_.push_back(n);
  next_ = chunks();
}

ChunkedSum::~ChunkedSum() {
  for (auto& r : flight_) r->wait();
}

void ChunkedSum::ready_from(int64_t from) {
  while (next_ > 0 && bounds_[size_t(next_ - 1)] >= from) {
    --next_;
    flight_.push_back(
        comm_.start_sum(data_ + bounds_[size_t(next_)], bounds_[size_t(next_ + 1)] - bounds_[size_t(next_)]));
  }
  for (auto& r : flight_) r->test();
}

void ChunkedSum::finish() {
  ready_from(0);
  for (auto& r : flight_) r->wait();
  flight_.clear();
}

}  // namespace gmlp::dist
