// gmlp's bf16 product beside oneDNN's batch-reduce GEMM microkernel (brgemm), the building block
// oneDNN's own AMX matmuls are made of, as PyTorch exposes it (at::native::cpublas::brgemm, oneDNN
// 3.x as bundled in the torch wheel of .venv/). `make bench-brgemm` builds and runs it.
//
// The products are the channel products of the presets' training step whose A is row-major (the
// microkernel's form): fc1's and fc2's forward and input gradient, A stored as bfloat16 (as the
// step stores the activations and gradients that products read), B a weight packed once (gmlp's
// gemm::Packed; for brgemm, its VNNI layout), C fp32, overwritten. One thread: the
// microkernel is a single-threaded building block; threads are its caller's. brgemm is called on
// strips of `--rows` rows and all columns, the fastest driver of those tried (32 × 32, 32 × 64,
// 64 × 64, 32 × N, 96 × N tiles, either loop order). The two run alternately, call by call, with
// AMX's peak measured on the same core between rounds, so that a host whose speed drifts gives
// each its share of the drift: read the ratio and the shares of the peak, not the microseconds.
#include <ATen/Version.h>
#include <ATen/native/CPUBlas.h>
#include <c10/util/BFloat16.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/build_info.h"
#include "core/gemm.h"
#include "nn/config.h"
#include "peak.h"

namespace {

using namespace gmlp;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Product {
  std::string name;
  int64_t M, N, K;
};

// fc1 (D → F) and fc2 (F/2 → D, after the gate halves F) of a preset at a batch: forward x·Wᵀ and
// input gradient dy·W, each M × N × K with A (M × K) row-major.
std::vector<Product> products(const char* preset, int64_t batch) {
  const Preset& p = find_preset(preset);
  const ModelConfig& c = p.config;
  const int64_t M = c.tokens() * (batch ? batch : p.train.batch_size), D = c.dim, F = c.ffn, H = c.ffn / 2;
  const std::string s = preset;
  return {{s + " fc1 fwd", M, F, D}, {s + " fc1 dx", M, D, F}, {s + " fc2 fwd", M, D, H}, {s + " fc2 dx", M, H, D}};
}

// The q-quantile of v, the nearest of its values.
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[size_t(std::lround(q * double(v.size() - 1)))];
}
double median(const std::vector<double>& v) { return quantile(v, 0.5); }

// The text after `key` in torch's build configuration (at::show_config), up to `end`.
std::string config_value(const std::string& key, const char* end) {
  const std::string config = at::show_config();
  const size_t at = config.find(key);
  if (at == std::string::npos) return "unknown";
  const size_t from = at + key.size();
  return config.substr(from, config.find_first_of(end, from) - from);
}

// AMX's tdpbf16ps peak on one thread now, GFLOP/s (bench/peak.cpp's chains for `seconds`).
double amx_peak(double seconds) {
  for (const bench::Peak& peak : bench::available_peaks())
    if (peak.name.find("AMX") != std::string::npos) return peak.measure(1, seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = 30;
  int64_t rows = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--pairs" && i + 1 < argc) {
      pairs = std::atoi(argv[++i]);
    } else if (a == "--rows" && i + 1 < argc) {
      rows = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--pairs N (default 30)] [--rows R (default 32)]: unknown argument '%s'\n",
                   argv[0], a.c_str());
      return 2;
    }
  }
  if (pairs < 4 || rows < 1) {
    std::fprintf(stderr, "--pairs: expected at least 4, got %d; --rows: expected at least 1, got %ld\n", pairs,
                 static_cast<long>(rows));
    return 2;
  }
  if (!gemm::amx_available()) {
    std::fprintf(stderr, "gmlp_brgemm_bench: needs a CPU with AMX-BF16 (gmlp's bf16 kernel here: %s)\n",
                 gemm::bf16_kernel_name());
    return 2;
  }
  omp_set_num_threads(1);
  std::printf("commit %s, 1 thread, gmlp's bf16 kernel: %s; torch %s, its oneDNN %s\n", build_commit(),
              gemm::bf16_kernel_name(), config_value("TORCH_VERSION=", ",").c_str(),
              config_value("MKL-DNN v", " ").c_str());
  std::printf("brgemm on strips of %ld rows; %d pairs of calls, alternating; medians [quartiles]\n\n",
              static_cast<long>(rows), pairs);
  std::printf("%-22s %20s %9s %9s %12s %12s %20s %9s\n", "product", "M x N x K", "gmlp us", "brgemm us", "gmlp % AMX",
              "brgemm % AMX", "gmlp / brgemm time", "max diff");
  std::vector<Product> all;
  for (auto [preset, batch] : {std::pair{"fmnist-s", 0}, {"cifar-s", 0}, {"gmlp-ti16", 8}})
    for (const Product& p : products(preset, batch)) all.push_back(p);
  for (const Product& p : all) {
    const int64_t M = p.M, N = p.N, K = p.K;
    // Operands exact in bfloat16, so that both products multiply the same numbers.
    std::vector<uint16_t> A(size_t(M * K));
    std::vector<float> B(size_t(K * N));
    for (size_t i = 0; i < A.size(); ++i) A[i] = float_to_bf16(float(int(i * 7919 % 61) - 30) / 32.f);
    for (size_t i = 0; i < B.size(); ++i) B[i] = float(int(i * 104729 % 67) - 33) / 64.f;
    // B in the VNNI layout brgemm reads (is_vnni): the two k of a pair side by side, (K/2, N, 2).
    std::vector<c10::BFloat16> Bv(B.size());
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) Bv[size_t((k / 2) * N * 2 + j * 2 + k % 2)] = c10::BFloat16(B[size_t(k * N + j)]);
    const gemm::Packed packed(gemm::Side::b, true, false, K, N, B.data(), N);
    std::vector<float> C(size_t(M * N)), C_brgemm(size_t(M * N));
    const auto* A16 = reinterpret_cast<const c10::BFloat16*>(A.data());
    auto gmlp_product = [&](float* c) {
      gemm::multiply(false, M, Operand<float>::bf16(A.data()), K, packed, false, c, N);
    };
    auto brgemm_product = [&](float* c) {
      for (int64_t i = 0; i < M; i += rows)
        at::native::cpublas::brgemm(std::min(rows, M - i), N, K, K, N, N, false, A16 + i * K, Bv.data(), c + i * N);
      at::native::cpublas::brgemm_release();
    };
    gmlp_product(C.data());
    brgemm_product(C_brgemm.data());
    double diff = 0;
    for (size_t i = 0; i < C.size(); ++i) diff = std::max(diff, double(std::fabs(C[i] - C_brgemm[i])));
    std::vector<double> t_gmlp, t_brgemm, ratio, share_gmlp, share_brgemm;
    const double flops = 2.0 * double(M) * double(N) * double(K);
    for (int r = 0; r < pairs; ++r) {
      const double peak = amx_peak(0.02) * 1e9;
      double t[2];
      for (int k = 0; k < 2; ++k) {
        const bool g = (r + k) % 2 == 0;  // who goes first alternates
        const double t0 = now();
        g ? gmlp_product(C.data()) : brgemm_product(C.data());
        t[g ? 0 : 1] = now() - t0;
      }
      t_gmlp.push_back(t[0]), t_brgemm.push_back(t[1]), ratio.push_back(t[0] / t[1]);
      share_gmlp.push_back(100 * flops / t[0] / peak), share_brgemm.push_back(100 * flops / t[1] / peak);
    }
    char shape[64];
    std::snprintf(shape, sizeof shape, "%ld x %ld x %ld", static_cast<long>(M), static_cast<long>(N),
                  static_cast<long>(K));
    std::printf("%-22s %20s %9.0f %9.0f %12.0f %12.0f %8.2f [%.2f-%.2f] %9.2g\n", p.name.c_str(), shape,
                median(t_gmlp) * 1e6, median(t_brgemm) * 1e6, median(share_gmlp), median(share_brgemm), median(ratio),
                quantile(ratio, 0.25), quantile(ratio, 0.75), diff);
    std::fflush(stdout);
  }
  std::printf(
      "\n%% AMX: the product's GFLOP/s as a share of AMX's tdpbf16ps peak on this core (tile loads from L1),\n"
      "measured before each pair. gmlp / brgemm time above 1: brgemm is faster.\n");
  return 0;
}
