// The arithmetic peak of this CPU, measured: independent chains of one multiply-add instruction
// on registers, long enough that the clock settles, on 1 or more threads. The per-op benchmark
// reports every product as a share of the peak of the instructions it runs on.
#pragma once

#include <string>
#include <vector>

namespace gmlp::bench {

struct Peak {
  std::string name;  // "fp32 FMA (AVX2)", "bf16 dot (AVX512-BF16)", "bf16 tiles (AMX)"
  double flops_per_instruction;
  // GFLOP/s on `threads` threads (each running the chains alone for about `seconds`).
  double (*measure)(int threads, double seconds);
};

// The peaks this CPU has, detected at run time: fp32 FMA at the width gmlp's own product uses
// (AVX-512 where the CPU has it, otherwise AVX2), then AVX512-BF16's vdpbf16ps and AMX's
// tdpbf16ps where present. AMX is asked of the kernel first (arch_prctl); where it refuses, no AMX
// peak is listed.
std::vector<Peak> available_peaks();

}  // namespace gmlp::bench
