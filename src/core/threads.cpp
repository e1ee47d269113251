#include "core/threads.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace gmlp {

namespace {
// CPUs' worth of time that a quota of `quota` µs per `period` µs grants, rounded up; 0 for none.
int whole_cpus(long long quota, long long period) {
  return quota > 0 && period > 0 ? int(std::min<long long>((quota + period - 1) / period, 1 << 20)) : 0;
}

// The quota of one cgroup directory, in whole CPUs: cgroup v2's cpu.max ("max 100000", or
// "200000 100000"), v1's cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us; 0 where none is set
// or the files are not there.
int quota_of(const std::string& dir, bool v2) {
  long long quota = 0, period = 0;
  if (v2) {
    std::ifstream f(dir + "/cpu.max");
    std::string q;
    if (f >> q >> period && q != "max") std::istringstream(q) >> quota;
  } else {
    std::ifstream q(dir + "/cpu.cfs_quota_us"), p(dir + "/cpu.cfs_period_us");
    q >> quota, p >> period;
  }
  return whole_cpus(quota, period);
}

// The smallest CPU quota on this process's cgroup or any of its ancestors (a container's --cpus,
// a Kubernetes CPU limit), in whole CPUs; 0 where none is. /proc/self/cgroup names the cgroup
// under each hierarchy; inside a container the mounted tree may start at the container's own
// cgroup, which the walk up to the root then finds.
int cgroup_quota_cpus() {
  std::ifstream f("/proc/self/cgroup");
  int least = 0;
  for (std::string line; std::getline(f, line);) {  // "id:controllers:path"
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const bool v2 = controllers.empty();
    if (!v2 && ("," + controllers + ",").find(",cpu,") == std::string::npos) continue;
    const std::string roots[] = {v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/" + controllers,
                                 v2 ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup/cpu"};
    for (std::string path = line.substr(b + 1);; path.resize(path.rfind('/'))) {
      for (const std::string& root : roots)
        if (const int n = quota_of(root + path, v2); n > 0 && (least == 0 || n < least)) least = n;
      if (path.find('/') == std::string::npos) break;
    }
  }
  return least;
}
}  // namespace

// The OpenMP runtime counts the process's CPUs when it starts, before it binds this thread to one
// of them (OMP_PROC_BIND): asked afterwards, this thread's own affinity would be that one CPU,
// and every product would run on one thread. A CPU quota allows fewer than the CPUs it may run
// on: threads beyond it only wait for their turn, at every barrier of every product.
int available_cpus() {
  static const int n = [] {
    const int procs = omp_get_num_procs(), quota = cgroup_quota_cpus();
    return quota > 0 ? std::min(procs, quota) : procs;
  }();
  return n;
}

namespace {
std::atomic<int> process_threads{0};  // set_threads' count; 0 until it is called

// The team a count asks for: no larger than the runtime's thread limit (OMP_THREAD_LIMIT), which
// caps every team while omp_get_max_threads still answers the count asked. oneDNN 2.6.3's AMX
// matmul cut its work for the count it was told and, given the smaller team, left part of C
// unwritten; gmlp's own products follow either.
int team_of(int n) { return std::min(n, omp_get_thread_limit()); }

// The calling thread's teams: exactly team_of(n) threads. With OMP_DYNAMIC the runtime may start
// fewer when the machine is loaded, and the bits of a product's sums follow the count
// (core/gemm.h).
void apply(int n) {
  omp_set_dynamic(0);
  omp_set_num_threads(team_of(n));
}
}  // namespace

void set_threads(int n) {
  if (n > kMaxThreads) fail("invalid thread count ", n, ": expected at most ", kMaxThreads);
  const int count = n <= 0 ? available_cpus() : n;
  process_threads.store(count, std::memory_order_relaxed);
  apply(count);
}

void use_process_threads() {
  if (omp_in_parallel()) return;
  int count = process_threads.load(std::memory_order_relaxed);
  if (count == 0) {  // never set: OMP_NUM_THREADS's count, which the runtime gives every thread, or ours
    if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
    count = available_cpus();
  }
  if (omp_get_max_threads() != team_of(count) || omp_get_dynamic()) apply(count);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace gmlp
