// The processes of a data-parallel job and what they say to one another: a communicator with
// rank and size, sums over the ranks (blocking, or started now and finished later so that they
// run while backward does), broadcast, barrier and abort.
//
// One implementation is a single process (size 1, every operation a no-op); another is MPI
// (dist/mpi.h, in the command line when it is built with MPI). A GPU backend such as NCCL would be
// another implementation, bootstrapped through MPI; nothing here assumes where the memory lives
// beyond a pointer the backend can read and write.
//
// Sums are deterministic: every rank gets ((0 + x_0) + x_1) + ... + x_{N-1}, added element by
// element in rank order, bitwise the same on every rank, from run to run, and as one process that
// adds the ranks' arrays one after another into zeros. That is what makes N ranks train bitwise as
// one process with N micro-batches (train/loop.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gmlp::dist {

// A sum in flight. test() progresses it and says whether it has finished; wait() finishes it.
// Destroying an unfinished request waits for it.
class Request {
 public:
  virtual ~Request() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "single process", "Open MPI v4.1.4": for the opening line and bench's report.
  virtual std::string describe() const = 0;

  // Starts the sum of data[0..n) over the ranks, in place, in rank order (above). data must stay
  // untouched until the request has finished.
  virtual std::unique_ptr<Request> start_sum(float* data, int64_t n) = 0;
  // The same for doubles, blocking: the step's loss and counts.
  virtual void sum(double* data, int64_t n) = 0;
  void sum(float* data, int64_t n) { start_sum(data, n)->wait(); }
  // Copies root's bytes into every rank's data[0..bytes).
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job with `code` (a rank that failed: never a hang).
  [[noreturn]] virtual void abort(int code) = 0;

  // Root's string on every rank.
  void broadcast(std::string& s, int root);
};

// A job of one process.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "single process"; }
  std::unique_ptr<Request> start_sum(float* data, int64_t n) override;
  void sum(double* data, int64_t n) override {}
  void broadcast(void* data, int64_t bytes, int root) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
};

// The job this process belongs to: a single process unless the command line installed another
// (an MPI job, started by mpirun). Like MPI_COMM_WORLD, one per process.
Communicator& world();
void set_world(std::unique_ptr<Communicator> communicator);

// The number of ranks an MPI launcher (mpirun, mpiexec, srun with PMI) started this process among,
// from its environment; 0 when none did.
int launched_ranks();

// Sums of fixed-size chunks of a flat array, started when the array's tail from some offset
// onwards is final (backward produces gradients from the last layer to the first, and lays them
// out in the order of the layers), so that the sums run while backward goes on. The chunks'
// bounds depend only on the array's size and the chunk size, so every rank sums the same pieces.
class ChunkedSum {
 public:
  // chunk_elems <= 0: one chunk (a single sum started by finish()).
  ChunkedSum(Communicator& comm, float* data, int64_t n, int64_t chunk_elems);
  ~ChunkedSum();
  // data[from..n) is final: starts the sums of every chunk lying wholly in it that has not been
  // started, and progresses those in flight.
  void ready_from(int64_t from);
  // Starts what remains and waits for every sum.
  void finish();
  int64_t chunks() const { return int64_t(bounds_.size()) - 1; }

 private:
  Communicator& comm_;
  float* data_;
  std::vector<int64_t> bounds_;  // chunk c is [bounds_[c], bounds_[c+1])
  int64_t next_;                 // chunks [next_, chunks()) are started; they start from the last
  std::vector<std::unique_ptr<Request>> flight_;
};

// An evaluation spread over the ranks. Of its `batches` batches, rank r runs those t with
// t mod size == r and records each one's figures (`fields` sums or counts) in row t of a table
// that is zero elsewhere. total() sums the tables over the ranks, where every entry has a single
// non-zero term and so is exact, then adds the rows up in batch order: the figures are the bits
// of one process that ran every batch itself, whatever the number of ranks.
class BatchShares {
 public:
  BatchShares(Communicator& comm, int64_t batches, int fields);
  bool mine(int64_t batch) const { return batch % comm_.size() == comm_.rank(); }
  double* row(int64_t batch) { return rows_.data() + batch * fields_; }
  // Collective: every rank calls it, after its own batches.
  std::vector<double> total();

 private:
  Communicator& comm_;
  int fields_;
  std::vector<double> rows_;
};

}  // namespace gmlp::dist
