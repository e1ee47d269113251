#include "dist/mpi.h"

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <vector>

#include "core/error.h"

namespace gmlp::dist {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail("MPI: ", what, " failed: ", std::string(text, size_t(len)));
}

template <class T>
MPI_Datatype datatype();
template <>
MPI_Datatype datatype<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype datatype<double>() {
  return MPI_DOUBLE;
}

class MpiWorld;

// A sum in flight, whatever its element type, as MpiWorld::progress moves it through its phases.
class Phased : public Request {
 public:
  bool test() override;
  void wait() override {
    while (!test()) {
    }
  }

 protected:
  friend class MpiWorld;
  enum class Phase { scatter, gather, done };
  explicit Phased(MpiWorld& world) : world_(world) {}
  // Tests the phase's request; false while it runs.
  bool phase_done() {
    int flag = 0;
    check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    return flag != 0;
  }
  // The scatter has arrived: adds this rank's chunk and starts the gather on `comm`.
  virtual void reduce_and_gather(MPI_Comm comm) = 0;

  MpiWorld& world_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  Phase phase_ = Phase::scatter;
};

// The rank-order sum of communicator.h as a reduce-scatter and an all-gather, the traffic of a
// ring allreduce (each rank sends and receives 2(N-1)/N of the array) with a fixed order of
// addition: rank r owns chunk r of the array; every rank sends its piece of chunk r to rank r
// (MPI_Ialltoallv), which adds the N pieces in rank order into zeros; then every rank gathers
// every owner's sum (MPI_Iallgatherv). MPI_Iallreduce would be one call, but MPI leaves its order
// of addition to the library, which may differ with the message size and the world.
//
// MPI wants every rank to start the collectives of a communicator in the same order, and sums
// in flight finish their first phase in whatever order the network makes. So the two phases run
// on two communicators of their own, the first phases start in the order the sums are started
// (the same on every rank), and MpiWorld::progress moves sums to their second phase in that
// order too, never one before another started earlier.
template <class T>
class OrderedSum final : public Phased {
 public:
  OrderedSum(MpiWorld& world, T* data, int64_t n);
  ~OrderedSum() override;

 private:
  void reduce_and_gather(MPI_Comm comm) override {
    const int size = int(counts_.size()), mine = counts_[size_t(rank_)];
    const T* pieces = reinterpret_cast<const T*>(pieces_.data());
    T* out = data_ + displs_[size_t(rank_)];
    for (int i = 0; i < mine; ++i) out[i] = T(0);
    for (int r = 0; r < size; ++r) {
      const T* piece = pieces + size_t(r) * size_t(mine);
#pragma omp simd
      for (int i = 0; i < mine; ++i) out[i] += piece[i];
    }
    phase_ = Phase::gather;
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, datatype<T>(), data_, counts_.data(), displs_.data(), datatype<T>(), comm,
                          &request_),
          "MPI_Iallgatherv");
  }

  int rank_;
  T* data_;
  std::vector<int> counts_, displs_, recv_counts_, recv_displs_;
  std::vector<unsigned char> pieces_;  // the ranks' pieces of this rank's chunk: from the world's spares
};

class MpiWorld final : public Communicator {
 public:
  MpiWorld(int* argc, char*** argv) {
    // Open MPI's TCP transport moves a message only while MPI is called, unless it runs its own
    // progress thread; with it a sum between hosts goes on while backward computes (between two
    // network namespaces at 1 Gbit/s, gMLP-Ti/16: 14 ms of a step waiting for the sum instead of
    // 48). A value the user set stays.
    setenv("OMPI_MCA_btl_tcp_progress_thread", "1", 0);
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &scatter_), "MPI_Comm_dup");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &gather_), "MPI_Comm_dup");
    library_ = mpi_library();
  }
  ~MpiWorld() override {
    MPI_Comm_free(&scatter_);
    MPI_Comm_free(&gather_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return library_ + ", " + std::to_string(size_) + " ranks"; }

  std::unique_ptr<Request> start_sum(float* data, int64_t n) override {
    return std::make_unique<OrderedSum<float>>(*this, data, n);
  }
  void sum(double* data, int64_t n) override { OrderedSum<double>(*this, data, n).wait(); }
  void broadcast(void* data, int64_t bytes, int root) override {
    if (bytes > int64_t(INT32_MAX)) fail("MPI: a broadcast of ", bytes, " bytes is more than one message can hold");
    check(MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  template <class T>
  friend class OrderedSum;
  friend class Phased;

  // Moves every sum in flight as far as it can go: gathers finish in any order, scatters move on
  // to their gathers in the order the sums were started.
  void progress() {
    bool earlier_scattering = false;
    for (size_t i = 0; i < queue_.size();) {
      Phased* s = queue_[i];
      const bool scattering = s->phase_ == Phased::Phase::scatter;
      if (scattering && earlier_scattering) break;  // its gather must wait for the earlier ones'
      if (s->phase_done()) {
        if (!scattering) {  // finished
          s->phase_ = Phased::Phase::done;
          queue_.erase(queue_.begin() + std::ptrdiff_t(i));
          continue;
        }
        s->reduce_and_gather(gather_);
      } else if (scattering) {
        earlier_scattering = true;
      }
      ++i;
    }
  }
  void forget(Phased* s) { queue_.erase(std::remove(queue_.begin(), queue_.end(), s), queue_.end()); }
  // Scratch for a sum's pieces, kept between steps: the same chunks come back every step, so after
  // the first a step allocates none.
  std::vector<unsigned char> take_spare(size_t bytes) {
    std::vector<unsigned char> v;
    if (!spares_.empty()) v = std::move(spares_.back()), spares_.pop_back();
    v.resize(bytes);
    return v;
  }
  void give_back(std::vector<unsigned char>&& v) { spares_.push_back(std::move(v)); }

  int rank_ = 0, size_ = 1;
  MPI_Comm scatter_ = MPI_COMM_NULL, gather_ = MPI_COMM_NULL;
  std::string library_;
  std::vector<Phased*> queue_;  // the sums in flight, in the order they were started
  std::vector<std::vector<unsigned char>> spares_;
};

bool Phased::test() {
  if (phase_ != Phase::done) world_.progress();
  return phase_ == Phase::done;
}

template <class T>
OrderedSum<T>::OrderedSum(MpiWorld& world, T* data, int64_t n) : Phased(world), rank_(world.rank()), data_(data) {
  if (n > int64_t(INT32_MAX)) fail("MPI: a sum of ", n, " elements is more than one message can hold");
  const int size = world.size();
  counts_.resize(size_t(size)), displs_.resize(size_t(size));
  for (int r = 0; r < size; ++r) {
    displs_[size_t(r)] = int(n * r / size);
    counts_[size_t(r)] = int(n * (r + 1) / size) - displs_[size_t(r)];
  }
  const int mine = counts_[size_t(rank_)];
  pieces_ = world.take_spare(size_t(mine) * size_t(size) * sizeof(T));
  recv_counts_.assign(size_t(size), mine);
  recv_displs_.resize(size_t(size));
  for (int r = 0; r < size; ++r) recv_displs_[size_t(r)] = r * mine;
  check(MPI_Ialltoallv(data_, counts_.data(), displs_.data(), datatype<T>(), pieces_.data(), recv_counts_.data(),
                       recv_displs_.data(), datatype<T>(), world.scatter_, &request_),
        "MPI_Ialltoallv");
  world.queue_.push_back(this);
}

template <class T>
OrderedSum<T>::~OrderedSum() {
  if (phase_ != Phase::done) {
    try {
      wait();
    } catch (...) {  // an MPI failure while unwinding: the error already on its way ends the job
    }
  }
  world_.forget(this);
  world_.give_back(std::move(pieces_));
}

}  // namespace

std::unique_ptr<Communicator> mpi_world(int* argc, char*** argv) { return std::make_unique<MpiWorld>(argc, argv); }

std::string mpi_library() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string s(version, size_t(len));
  if (const size_t end = s.find_first_of(",\n"); end != std::string::npos) s.resize(end);
  return s;
}

}  // namespace gmlp::dist
