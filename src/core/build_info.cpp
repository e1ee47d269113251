#include "core/build_info.h"

#include <oneapi/dnnl/dnnl.h>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/threads.h"
#include "gmlp/version.h"

// Set by CMake on this file only, so that changing them recompiles nothing else.
#ifndef GMLP_BUILD_TYPE
#define GMLP_BUILD_TYPE ""
#endif
#ifndef GMLP_NATIVE
#define GMLP_NATIVE 0
#endif

namespace gmlp {

namespace {

std::string compiler() {
#if defined(__clang__)
  return cat("clang++ ", __clang_major__, ".", __clang_minor__, ".", __clang_patchlevel__);
#elif defined(__GNUC__)
  return cat("g++ ", __GNUC__, ".", __GNUC_MINOR__, ".", __GNUC_PATCHLEVEL__);
#else
  return "unknown compiler";
#endif
}

const char* onednn_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

std::string version_report() {
  const char* target = GMLP_NATIVE ? "-march=native" : "portable";
  std::string s = cat("gmlp ", GMLP_VERSION, " (commit ", build_commit(), ", ", compiler(), ", ",
                      *GMLP_BUILD_TYPE ? GMLP_BUILD_TYPE : "no build type", ", ", target, ")\n");

  const CpuFeatures& cpu = cpu_features();
  std::string features;
  for (auto [has, name] : {std::pair{cpu.avx2, "avx2"},
                           {cpu.avx512f, "avx512f"},
                           {cpu.avx512_bf16, "avx512_bf16"},
                           {cpu.amx_bf16, "amx_bf16"}})
    if (has) features += cat(features.empty() ? "" : " ", name);
  if (features.empty()) features = "no avx2";
  // gmlp's own product runs on AMX's tiles where the process may use them, else on AVX512-BF16;
  // without either, bf16 runs as f32.
  const char* amx = !cpu.amx_bf16 ? " (no amx)" : gemm::amx_available() ? "" : " (amx refused by the kernel)";
  const std::string bf16 = cpu.avx512_bf16 ? cat(gemm::bf16_kernel_name(), amx)
                           : cpu.amx_bf16  ? std::string("amx_bf16 (oneDNN's)")
                                           : std::string("none (--precision bf16 runs in f32)");
  s += cat("cpu: ", cpu.name, "; ", features, "; bf16 matmul: ", bf16, "\n");

  const dnnl_version_t* v = dnnl_version();
  s += cat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " (", onednn_isa_name(dnnl_get_effective_cpu_isa()),
           "), ", num_threads(), " threads");
  return s;
}

}  // namespace gmlp
