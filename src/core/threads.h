// Thread count for everything parallel: our OpenMP loops and oneDNN (built on the same GNU
// OpenMP runtime, so one setting governs both).
#pragma once

namespace gmlp {

// The CPUs this process may run on (sched_getaffinity: taskset and container limits shrink it).
// The command line's --threads takes 0..available_cpus().
int available_cpus();

// The most threads set_threads takes: more only time-share the CPUs, and a huge count makes
// the OpenMP runtime crash while creating them.
inline constexpr int kMaxThreads = 1024;

// n <= 0 picks the default: available_cpus(). n > kMaxThreads throws gmlp::Error. Counts above
// available_cpus() are allowed here (tests compare 1 and 2 threads on any machine).
void set_threads(int n);
int num_threads();

}  // namespace gmlp
