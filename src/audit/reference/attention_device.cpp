// SPDX-License-Identifier: Apache-2.0
/// @file attention_f64_device: the reference's types over tiebreak::gpu::attention_f64.
#include <tiebreak/reference/attention.hpp>

#include "check.hpp"

#ifdef TIEBREAK_HAVE_GPU
#include <tiebreak/gpu/attention_reference.hpp>
#endif

#include <limits>

namespace tiebreak::reference {

std::string device_unavailable_reason() {
#ifdef TIEBREAK_HAVE_GPU
  if (gpu::attention_f64_available()) return {};
  return "no usable GPU for the f64 reference (" + gpu::attention_f64_unavailable_reason() + ")";
#else
  return "this tiebreak was built without CUDA: the GPU f64 reference is not available";
#endif
}

attention_outputs attention_f64_device(const attention_inputs& in, const attention_options& opt, device_row_ties* ties,
                                       device_timing* timing) {
  detail::check_inputs(in, "");
#ifdef TIEBREAK_HAVE_GPU
  const attention_shape& s = in.shape;
  if (s.dim > gpu::attention_f64_max_dim || s.dim_v > gpu::attention_f64_max_dim)
    throw reference_error("the GPU f64 reference takes dim and dim_v up to " + std::to_string(gpu::attention_f64_max_dim) +
                          " (have " + std::to_string(s.dim) + ", " + std::to_string(s.dim_v) + "); use the host reference");
  if (const std::string why = device_unavailable_reason(); !why.empty()) throw device_unavailable(why);
  const bool backward = !in.d_o.empty();
  attention_outputs out;
  out.o.assign(s.o_size(), 0.0);
  out.lse.assign(s.lse_size(), 0.0);
  if (backward) {
    out.delta.assign(s.lse_size(), 0.0);
    out.dq.assign(s.q_size(), 0.0);
    out.dk.assign(s.k_size(), 0.0);
    out.dv.assign(s.v_size(), 0.0);
  }
  gpu::attention_f64_problem p;
  p.problem = opt.problem_for(s);
  p.q = in.q.data(), p.k = in.k.data(), p.v = in.v.data();
  p.o = out.o.data(), p.lse = out.lse.data();
  if (backward) {
    p.d_o = in.d_o.data();
    p.delta = out.delta.data(), p.dq = out.dq.data(), p.dk = out.dk.data(), p.dv = out.dv.data();
  }
  if (ties) {
    ties->exact.assign(s.lse_size(), -1);
    ties->near.assign(s.lse_size(), -1);
    p.tie_tolerance = ties->tie_tolerance;
    p.tie_exact = ties->exact.data();
    p.tie_near = ties->near.data();
  }
  const gpu::attention_f64_timing t = gpu::attention_f64(p);
  if (timing) *timing = {t.upload, t.kernels, t.download};
  return out;
#else
  (void)opt, (void)ties, (void)timing;
  throw device_unavailable(device_unavailable_reason());
#endif
}

}  // namespace tiebreak::reference
