#include "core/threads.h"

#include <omp.h>

#include "core/error.h"

namespace gmlp {

// The OpenMP runtime counts the process's CPUs when it starts, before it binds this thread to one
// of them (OMP_PROC_BIND): asked afterwards, this thread's own affinity would be that one CPU,
// and every product would run on one thread.
int available_cpus() { return omp_get_num_procs(); }

void set_threads(int n) {
  if (n > kMaxThreads) fail("invalid thread count ", n, ": expected at most ", kMaxThreads);
  // Teams of exactly this size: with OMP_DYNAMIC the runtime may start fewer threads when the
  // machine is loaded, and the bits of a product's sums follow the count (core/gemm.h).
  omp_set_dynamic(0);
  omp_set_num_threads(n <= 0 ? available_cpus() : n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace gmlp
