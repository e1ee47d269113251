// Comparison helpers: a failure names the tensor, the worst element, its index and both values.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"

namespace gmlp::test {

// Max |a - b| / max(floor, |b|) over n elements; reports the worst element on failure.
template <class A, class B>
::testing::AssertionResult close(const std::string& what, const A* a, const B* b, int64_t n,
                                 double tol, double floor = 1.0) {
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::abs(double(a[i]) - double(b[i])) / std::max(floor, std::abs(double(b[i])));
    if (!(d <= worst)) {  // catches NaN too
      worst = d;
      at = i;
      if (std::isnan(d)) break;
    }
  }
  if (worst <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": worst error " << worst << " > " << tol << " at [" << at << "] of " << n
         << ": got " << double(a[at]) << ", expected " << double(b[at]);
}

template <class A, class B>
::testing::AssertionResult close(const std::string& what, const std::vector<A>& a,
                                 const std::vector<B>& b, double tol, double floor = 1.0) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << what << ": size " << a.size() << " vs " << b.size();
  return close(what, a.data(), b.data(), int64_t(a.size()), tol, floor);
}

template <class T>
std::vector<T> randn(int64_t n, Rng& rng, double scale = 1.0) {
  std::vector<T> v(n);
  for (auto& x : v) x = T(rng.normal() * scale);
  return v;
}

}  // namespace gmlp::test
