// Thread count for everything parallel: our OpenMP loops and oneDNN (built on the same GNU
// OpenMP runtime, so one setting governs both).
#pragma once

#include <cstdint>

namespace gmlp {

// The CPUs this process may run on as it started (taskset and cpusets shrink it), or the CPUs'
// worth of time a CPU quota grants its cgroup (a container's --cpus), rounded up, if fewer.
// The command line's --threads takes 0..available_cpus().
int available_cpus();

// The most threads set_threads takes: more only time-share the CPUs, and a huge count makes
// the OpenMP runtime crash while creating them.
inline constexpr int kMaxThreads = 1024;

// n <= 0 picks the default: available_cpus(). n > kMaxThreads throws gmlp::Error. Counts above
// available_cpus() are allowed here (tests compare 1 and 2 threads on any machine). It also turns
// off the runtime's dynamic adjustment (OMP_DYNAMIC), so that every team has the n threads
// asked for and the bits follow n alone. The count is the process's: it applies to the calling
// thread at once, and to any other thread when that thread calls use_process_threads().
void set_threads(int n);
int num_threads();

// Gives the calling thread the process's count: set_threads', or where it was never called
// OMP_NUM_THREADS's (left to the runtime) or available_cpus(). OpenMP keeps the count per thread: a
// thread the application started itself begins with the runtime's default, every CPU it may run on
// whatever the cgroup's quota, and does not see omp_set_num_threads() calls made on other threads.
// The library's entry points (api/) call this first, so that set_threads() in main governs a
// Classifier used in a worker. Inside a parallel region it does nothing.
void use_process_threads();

// Runs f(i) for every i in [0, n): shared by the threads of a new parallel region when
// `parallel`, on the calling thread otherwise. Use it for `#pragma omp parallel for if (cond)`:
// with the condition false, libgomp still starts (and allocates) a team of one thread, a heap
// allocation per call that a training step must not make.
template <class F>
void parallel_for_if(bool parallel, int64_t n, const F& f) {
  if (parallel) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

}  // namespace gmlp
