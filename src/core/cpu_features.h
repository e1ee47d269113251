// What this CPU offers, read once by CPUID: the vector extensions that decide which kernels run
// (oneDNN's and ours) and whether bf16 matrix products are native.
#pragma once

#include <string>

namespace gmlp {

struct CpuFeatures {
  std::string name;  // the brand string, e.g. "AMD EPYC 9R14 96-Core Processor"
  // Each one is true only when the CPU has it and the operating system saves its registers.
  bool avx2 = false;
  bool avx512f = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
};

const CpuFeatures& cpu_features();

}  // namespace gmlp
