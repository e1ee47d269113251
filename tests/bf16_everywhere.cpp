// Linked into every test program: gmlp's bf16 product is available to the tests on any CPU, through
// its emulation where the CPU has no AVX512-BF16 (gemm::set_bf16_emulated), so that the bf16 paths
// of the products and of the ops that store bf16 are tested on every machine the tests run on.
#include <gtest/gtest.h>

#include "core/gemm.h"

namespace {

struct Bf16Everywhere : ::testing::Environment {
  void SetUp() override { gmlp::gemm::set_bf16_emulated(true); }
};

// gtest owns the environment once it is added.
[[maybe_unused]] ::testing::Environment* const kBf16Everywhere =
    ::testing::AddGlobalTestEnvironment(new Bf16Everywhere);

}  // namespace
