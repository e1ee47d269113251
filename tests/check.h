// Test helpers: comparisons whose failure names the tensor, the worst element, its index and
// both values; finite differences; random tensors; a call on a thread of the test's own.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "core/threads.h"
#include "tolerances.h"

namespace gmlp::test {

// Max |a - b| / max(floor, |b|) over n elements; reports the worst element on failure.
template <class A, class B>
::testing::AssertionResult close(const std::string& what, const A* a, const B* b, int64_t n, double tol,
                                 double floor = 1.0) {
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
  return ::testing::AssertionFailure() << what << ": worst error " << worst << " > " << tol << " at [" << at << "] of "
                                       << n << ": got " << double(a[at]) << ", expected " << double(b[at]);
}

template <class A, class B>
::testing::AssertionResult close(const std::string& what, const std::vector<A>& a, const std::vector<B>& b, double tol,
                                 double floor = 1.0) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << what << ": size " << a.size() << " vs " << b.size();
  return close(what, a.data(), b.data(), int64_t(a.size()), tol, floor);
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The cosine of the angle between two vectors of the same length (bf16's gradients beside f32's).
inline double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

// Central differences of loss() with respect to each of the n values at w.
inline std::vector<double> numeric_gradient(double* w, int64_t n, const std::function<double()>& loss) {
  std::vector<double> numeric(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const double old = w[i];
    w[i] = old + tol::kFdStep;
    const double lp = loss();
    w[i] = old - tol::kFdStep;
    const double lm = loss();
    w[i] = old;
    numeric[size_t(i)] = (lp - lm) / (2 * tol::kFdStep);
  }
  return numeric;
}

// Checks the gradient a backward left on top of `base` (accumulated − base) against central
// differences of loss() with respect to every element of x.
inline void expect_fd(const std::string& name, std::vector<double>& x, const std::vector<double>& accumulated,
                      const std::vector<double>& base, const std::function<double()>& loss) {
  std::vector<double> analytic(x.size());
  for (size_t i = 0; i < x.size(); ++i) analytic[i] = accumulated[i] - (base.empty() ? 0.0 : base[i]);
  EXPECT_TRUE(close(name, analytic, numeric_gradient(x.data(), int64_t(x.size()), loss), tol::kFdRel));
}
// The same for a gradient that was overwritten (no base).
inline void expect_fd(const std::string& name, std::vector<double>& x, const std::vector<double>& analytic,
                      const std::function<double()>& loss) {
  expect_fd(name, x, analytic, {}, loss);
}

// RAII: the enclosing scope runs with n threads.
struct WithThreads {
  int saved = num_threads();
  explicit WithThreads(int n) { set_threads(n); }
  ~WithThreads() { set_threads(saved); }
};
// One thread (finite differences: thousands of tiny forwards, where threads only add barriers).
struct OneThread : WithThreads {
  OneThread() : WithThreads(1) {}
};

template <class T>
std::vector<T> randn(int64_t n, Rng& rng, double scale = 1.0) {
  std::vector<T> v(n);
  for (auto& x : v) x = T(rng.normal() * scale);
  return v;
}

// Runs call() on a thread started here, as an application's worker is (not by OpenMP), and
// returns the size of the team that a parallel region opened on that thread right after it: the
// OpenMP thread count the call ran with and left there.
inline int team_after_call_on_new_thread(const std::function<void()>& call) {
  int team = 0;
  std::thread worker([&] {
    call();
#pragma omp parallel
#pragma omp single
    team = omp_get_num_threads();
  });
  worker.join();
  return team;
}

}  // namespace gmlp::test
