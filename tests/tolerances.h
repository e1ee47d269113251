// Every tolerance the tests use, in one table, with the reason for its size.
#pragma once

namespace gmlp::tol {

// Finite differences in double: central difference with step kFdStep has truncation error
// ~h²·f''' ≈ 1e-12 and rounding error ~1e-16/h ≈ 1e-10 relative.
inline constexpr double kFdStep = 1e-6;
inline constexpr double kFdRel = 1e-6;  // |analytic - numeric| / max(1, |analytic|, |numeric|)

// Fast float op against its plain _ref twin on O(1) data: sums of up to a few hundred float
// terms in different orders (oneDNN blocks its reductions).
inline constexpr double kFastVsRef = 2e-5;

// The whole float32 model against timm computed in float64 and stored as float32 (the parity
// bar for logits is 1e-4 max abs).
inline constexpr double kTimmLogits = 1e-4;
inline constexpr double kTimmGrad = 1e-4;  // relative to max(1, |reference|)
// Three AdamW steps at lr 1e-2: Adam normalises each update to about lr, so an early tiny
// gradient difference can flip a sign in m/sqrt(v) only for near-zero gradients.
inline constexpr double kTimmAdamW = 1e-4;

// Thread count and batch composition change only summation order inside oneDNN.
inline constexpr double kInvariance = 1e-5;

// Initial spread against timm's: independent random draws, so a statistical bound. The standard
// deviations of two samples of n values differ by about 1/sqrt(n) of the std (a normal's std
// estimate has relative error 1/sqrt(2n), for each side), and the means by sqrt(2/n) stds; a
// difference over kSpreadSigmas of those fails. Truncating at ±2 std instead of ±2 (a 12 %
// smaller spread) is over 5 of them for every tensor of the test's models.
inline constexpr double kSpreadSigmas = 5.0;

}  // namespace gmlp::tol
