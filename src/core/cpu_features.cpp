#include "core/cpu_features.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace gmlp {

namespace {

#if defined(__x86_64__) || defined(__i386__)

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

// XCR0: the register state the operating system saves on a context switch. An extension whose
// registers it does not save faults when used, whatever CPUID says.
uint64_t os_saved_state() {
  if (!(cpuid(1).c & (1u << 27))) return 0;  // no OSXSAVE: XGETBV is not available
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

std::string brand_string() {
  if (cpuid(0x80000000).a < 0x80000004) return "unknown CPU";
  char text[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const Regs r = cpuid(0x80000002 + i);
    std::memcpy(text + 16 * i, &r, 16);
  }
  std::string s(text);
  const auto first = s.find_first_not_of(' ');
  const auto last = s.find_last_not_of(' ');
  return first == std::string::npos ? "unknown CPU" : s.substr(first, last - first + 1);
}

CpuFeatures detect() {
  CpuFeatures f;
  f.name = brand_string();
  const uint64_t xcr0 = os_saved_state();
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // XMM and YMM
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM upper halves, ZMM16-31
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;         // tile config and tile data
  if (cpuid(0).a < 7) return f;
  const Regs l7 = cpuid(7, 0);
  f.avx2 = os_avx && (l7.b & (1u << 5));
  f.avx512f = os_avx512 && (l7.b & (1u << 16));
  f.amx_bf16 = os_amx && (l7.d & (1u << 22));
  if (l7.a >= 1) f.avx512_bf16 = f.avx512f && (cpuid(7, 1).a & (1u << 5));
  return f;
}

#else

CpuFeatures detect() { return CpuFeatures{"non-x86 CPU"}; }

#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace gmlp
