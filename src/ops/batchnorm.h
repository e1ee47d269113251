// BatchNorm2d as torch.nn.BatchNorm2d(C, eps, momentum), NCHW with the image flattened to HW:
//   y = (x - μ_c)·rstd_c·γ_c + β_c,   rstd = 1/sqrt(var + eps),
// μ and var over the B·HW values of each channel c (training) or the running statistics (eval).
#pragma once

#include <cstdint>

namespace gmlp {

// y (B, C, HW) overwritten (may alias x); x (B, C, HW); gamma, beta (C).
// training: batch statistics over (B, HW), the biased variance for normalising; then, unless
//   running_mean / running_var are nullptr (track_running_stats=False),
//   running_mean = (1-m)·running_mean + m·mean, running_var = (1-m)·running_var + m·var_unbiased.
//   Needs B·HW > 1 (throws gmlp::Error otherwise, as torch does).
// eval: normalises with running_mean / running_var (not updated).
// mean, rstd (C) receive the statistics used (batch or running; rstd = 1/sqrt(var + eps)) for
// backward; in eval they may be nullptr.
template <class T>
void batchnorm_forward(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, T* running_mean,
                       T* running_var, int64_t B, int64_t C, int64_t HW, bool training, T eps, T momentum);

// Training-mode backward (through the batch statistics) from the mean / rstd that forward saved:
// dx (B, C, HW) overwritten (skipped when nullptr; must not alias dy), dgamma, dbeta (C)
// accumulate.
template <class T>
void batchnorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                        const T* gamma, int64_t B, int64_t C, int64_t HW);

// Plain loops (double accumulation; the backward through the full Jacobian); same contracts.
template <class T>
void batchnorm_forward_ref(T* y, T* mean, T* rstd, const T* x, const T* gamma, const T* beta, T* running_mean,
                           T* running_var, int64_t B, int64_t C, int64_t HW, bool training, T eps, T momentum);
template <class T>
void batchnorm_backward_ref(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* mean, const T* rstd,
                            const T* gamma, int64_t B, int64_t C, int64_t HW);

}  // namespace gmlp
