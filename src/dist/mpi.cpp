#include "dist/mpi.h"

#include <mpi.h>

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

// The rank-order sum of communicator.h as a reduce-scatter and an all-gather, the traffic of a
// ring allreduce (each rank sends and receives 2(N-1)/N of the array) with a fixed order of
// addition: rank r owns chunk r of the array; every rank sends its piece of chunk r to rank r
// (MPI_Ialltoallv), which adds the N pieces in rank order into zeros; then every rank gathers
// every owner's sum (MPI_Iallgatherv). MPI_Iallreduce would be one call, but MPI leaves its order
// of addition to the library, which may differ with the message size and the world.
template <class T>
class OrderedSum final : public Request {
 public:
  OrderedSum(MPI_Comm comm, int rank, int size, T* data, int64_t n) : comm_(comm), rank_(rank), data_(data) {
    if (n > int64_t(INT32_MAX)) fail("MPI: a sum of ", n, " elements is more than one message can hold");
    counts_.resize(size_t(size)), displs_.resize(size_t(size));
    for (int r = 0; r < size; ++r) {
      displs_[size_t(r)] = int(n * r / size);
      counts_[size_t(r)] = int(n * (r + 1) / size) - displs_[size_t(r)];
    }
    const int mine = counts_[size_t(rank)];
    pieces_.resize(size_t(mine) * size_t(size));
    recv_counts_.assign(size_t(size), mine);
    recv_displs_.resize(size_t(size));
    for (int r = 0; r < size; ++r) recv_displs_[size_t(r)] = r * mine;
    check(MPI_Ialltoallv(data_, counts_.data(), displs_.data(), datatype<T>(), pieces_.data(), recv_counts_.data(),
                         recv_displs_.data(), datatype<T>(), comm_, &request_),
          "MPI_Ialltoallv");
  }
  ~OrderedSum() override {
    if (phase_ != Phase::done) wait();
  }

  bool test() override {
    while (phase_ != Phase::done) {
      int flag = 0;
      check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (!flag) return false;
      advance();
    }
    return true;
  }
  void wait() override {
    while (phase_ != Phase::done) {
      check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
      advance();
    }
  }

 private:
  enum class Phase { scatter, gather, done };

  void advance() {
    if (phase_ == Phase::gather) {
      phase_ = Phase::done;
      return;
    }
    const int size = int(counts_.size()), mine = counts_[size_t(rank_)];
    T* out = data_ + displs_[size_t(rank_)];
    for (int i = 0; i < mine; ++i) out[i] = T(0);
    for (int r = 0; r < size; ++r) {
      const T* piece = pieces_.data() + size_t(r) * size_t(mine);
#pragma omp simd
      for (int i = 0; i < mine; ++i) out[i] += piece[i];
    }
    phase_ = Phase::gather;
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, datatype<T>(), data_, counts_.data(), displs_.data(), datatype<T>(), comm_,
                          &request_),
          "MPI_Iallgatherv");
  }

  MPI_Comm comm_;
  int rank_;
  T* data_;
  std::vector<int> counts_, displs_, recv_counts_, recv_displs_;
  std::vector<T> pieces_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  Phase phase_ = Phase::scatter;
};

class MpiWorld final : public Communicator {
 public:
  MpiWorld(int* argc, char*** argv) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    library_ = mpi_library();
  }
  ~MpiWorld() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return library_ + ", " + std::to_string(size_) + " ranks"; }

  std::unique_ptr<Request> start_sum(float* data, int64_t n) override {
    return std::make_unique<OrderedSum<float>>(MPI_COMM_WORLD, rank_, size_, data, n);
  }
  void sum(double* data, int64_t n) override { OrderedSum<double>(MPI_COMM_WORLD, rank_, size_, data, n).wait(); }
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
  int rank_ = 0, size_ = 1;
  std::string library_;
};

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
