// The ops the models compose beyond the layers of tests/test_ops.cpp: add_relu (the CNN block
// output).
// Each backward against central finite differences in double (loss Σ r ⊙ f(inputs), random r),
// parameter gradients starting non-zero (they accumulate) and activation gradients NaN-filled
// (they are overwritten), the in-place calls the models make, and every fast float op against its
// plain _ref twin on ragged shapes; where the fast backward promises the same bits for any thread
// count, 1 and 2 threads are compared exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "check.h"
#include "core/threads.h"
#include "ops/add_relu.h"
#include "tolerances.h"

namespace gmlp {
namespace {

using test::close;
using test::dot;
using test::expect_fd;
using test::randn;
using Vec = std::vector<double>;

// ---------------------------------------------------------------------------------------------
// add_relu: the CNN block's output. Inputs kept off the kink (|a + b| ≥ 0.01) so that central
// differences see one side of it.
TEST(AddRelu, GradientsMatchFiniteDifferences) {
  const int64_t n = 40;
  Rng rng(301);
  Vec a = randn<double>(n, rng), b = randn<double>(n, rng), r = randn<double>(n, rng), out(n);
  for (int64_t i = 0; i < n; ++i)
    if (std::abs(a[i] + b[i]) < 0.01) a[i] += 0.02;
  auto loss = [&] {
    add_relu_forward(out.data(), a.data(), b.data(), n);
    return dot(r, out);
  };
  loss();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], std::max(a[i] + b[i], 0.0));
  Vec dsum(n, std::nan(""));  // overwritten: NaN must not leak
  add_relu_backward(dsum.data(), r.data(), out.data(), n);
  expect_fd("da", a, dsum, loss);
  expect_fd("db", b, dsum, loss);
  // In place, as the CNN calls it: the output over an input, the gradient over dout.
  loss();
  Vec inplace = a, d = r;
  add_relu_forward(inplace.data(), inplace.data(), b.data(), n);
  EXPECT_EQ(inplace, out);
  add_relu_backward(d.data(), d.data(), out.data(), n);
  EXPECT_EQ(d, dsum);
  double nan = std::nan(""), zero = 0, y;
  add_relu_forward(&y, &nan, &zero, 1);
  EXPECT_TRUE(std::isnan(y));  // as torch.relu: a diverged activation stays visible
}

TEST(FastVsRef, AddRelu) {
  const test::WithThreads two(2);
  const int64_t n = 1001;
  Rng rng(302);
  auto a = randn<float>(n, rng), b = randn<float>(n, rng), dout = randn<float>(n, rng);
  std::vector<float> o1(n), o2(n), d1(n, std::nanf("")), d2(n, std::nanf(""));
  add_relu_forward(o1.data(), a.data(), b.data(), n);
  add_relu_forward_ref(o2.data(), a.data(), b.data(), n);
  EXPECT_EQ(o1, o2);  // one rounding each: the same bits
  add_relu_backward(d1.data(), dout.data(), o1.data(), n);
  add_relu_backward_ref(d2.data(), dout.data(), o2.data(), n);
  EXPECT_EQ(d1, d2);
}

}  // namespace
}  // namespace gmlp
