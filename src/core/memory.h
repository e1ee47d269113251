// How much memory this process may use, for refusing a plan before allocating it: a batch, a
// model or a data set that cannot fit fails with one line naming what to lower, instead of
// bad_alloc or the kernel's OOM killer after minutes of work.
#pragma once

#include <cstdint>
#include <string>

namespace gmlp {

// The smallest of physical memory, the cgroup's limit (v2 memory.max, v1
// memory.limit_in_bytes) and the address-space rlimit (ulimit -v). Read once.
int64_t memory_limit_bytes();

// "1.5 GiB", "512 MiB", "300 KiB", "12 bytes".
std::string format_bytes(double bytes);

// Throws gmlp::Error "<what> need(s) <bytes>, more than the <limit> of memory this process may
// use<hint>" when bytes exceed memory_limit_bytes().
void check_fits_in_memory(double bytes, const std::string& what, const std::string& hint = "");

}  // namespace gmlp
