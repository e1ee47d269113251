#include "core/threads.h"

#include <omp.h>
#include <sched.h>

#include "core/error.h"

namespace gmlp {

int available_cpus() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : omp_get_num_procs();
}

void set_threads(int n) {
  if (n > kMaxThreads) fail("invalid thread count ", n, ": expected at most ", kMaxThreads);
  omp_set_num_threads(n <= 0 ? available_cpus() : n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace gmlp
