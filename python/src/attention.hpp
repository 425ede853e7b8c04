// SPDX-License-Identifier: Apache-2.0
/// @file The raw attention bindings shared by `tiebreak._core` (host twin) and `tiebreak._cuda` (GPU kernels).
///
/// Both modules bind the same two functions over attn::flash_args, taking the tensors as integer
/// addresses (numpy's `ctypes.data`, torch's `data_ptr()`): host memory for the twin
/// (tiebreak::host::attention_forward/backward), device memory for the kernels
/// (tiebreak::gpu::attention_forward/backward, on the given CUDA stream). The caller guarantees
/// that every address points to a dense bhsd tensor of the size the shape implies (problem.hpp);
/// python/tiebreak/_attention.py and tiebreak.torch check that before they call. The GIL is
/// released for the call. Bad options raise ValueError with attn::error_text's messages.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "tiebreak/attn/flash.hpp"
#include "tiebreak/probe/probe.hpp"

namespace tiebreak::python {

namespace nb = nanobind;

/// (batch, heads, kv_heads, seq_q, seq_k, dim); dim_v == dim (the kernels' only case).
using attention_dims = std::tuple<std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, std::size_t>;

/// The options of one call from Python.
struct attention_options {
  bool causal = false;
  double scale = 0;
  std::string mode;
  float beta = 2.0f;
  std::uint64_t seed = 0;
  std::string scaling;
  float near_tolerance = 1e-3f;
  bool probe = false;
  std::string exp = "software";  ///< attn::exp2_policy by name
};

/// A call's arguments and, when probed, its host table of counters (one per (batch, head)).
struct attention_call {
  attn::flash_args args;
  std::vector<probe::head_counters> counters;
};

template <class T>
T* address(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);  // NOLINT(performance-no-int-to-ptr): the caller's tensor
}

inline attention_call make_call(const attention_dims& d, const attention_options& o) {
  attention_call c;
  attn::flash_args& a = c.args;
  const auto [batch, heads, kv_heads, seq_q, seq_k, dim] = d;
  a.prob.shape = attn::shape{batch, heads, kv_heads, seq_q, seq_k, dim, dim};
  a.prob.mask = o.causal ? attn::mask_kind::causal : attn::mask_kind::none;
  a.prob.scale = o.scale;
  if (!attn::parse_out_mode(o.mode, a.opt.mode))
    throw std::invalid_argument("mode: unknown mode '" + o.mode + "' (expected one of bf16 fp32 debias stochastic)");
  if (o.scaling == "unfused") a.opt.scaling = attn::score_scaling::unfused;
  else if (o.scaling == "fused") a.opt.scaling = attn::score_scaling::fused;
  else throw std::invalid_argument("scaling: unknown score scaling '" + o.scaling + "' (expected unfused or fused)");
  if (!attn::parse_exp2_policy(o.exp, a.opt.exp))
    throw std::invalid_argument("exp: unknown exponential '" + o.exp + "' (expected software or sfu)");
  a.opt.beta = o.beta;
  a.opt.seed = o.seed;
  a.opt.near_tolerance = o.near_tolerance;
  if (o.probe) {
    // Sizes first: the table must not be sized from an invalid shape.
    if (!a.prob.shape.valid()) throw std::invalid_argument(attn::error_text(attn::flash_error::bad_problem));
    c.counters.assign(batch * heads, probe::head_counters{});
    a.counters = c.counters.data();
  }
  return c;
}

inline void check(const attn::flash_args& a, bool backward) {
  if (const attn::flash_error e = attn::flash_check(a, backward); e != attn::flash_error::ok)
    throw std::invalid_argument(attn::error_text(e));
}

inline nb::dict moments_dict(const probe::signed_moments& m) {
  nb::dict d;
  d["count"] = m.count;
  d["positive"] = m.positive;
  d["negative"] = m.negative;
  d["sum"] = m.sum;
  d["sum_sq"] = m.sum_sq;
  return d;
}

/// The probe's counters as a list of dicts, (b, h) at b · heads + h (`tiebreak attention -o`'s names);
/// None when the call was not probed.
inline nb::object counters_out(const attention_call& c) {
  if (c.counters.empty()) return nb::none();
  nb::list out;
  for (const probe::head_counters& h : c.counters) {
    nb::dict d;
    d["repeated_max_exact"] = h.repeated_max_exact;
    d["repeated_max_near"] = h.repeated_max_near;
    d["p_one"] = h.p_one;
    d["output_error"] = moments_dict(h.output_error);
    d["delta_error"] = moments_dict(h.delta_error);
    out.append(d);
  }
  return out;
}

/// Binds `attention_forward` and `attention_backward` on `m`. `Fwd` and `Bwd` run a checked
/// flash_args with the GIL released; `last` names their last integer argument (threads or stream);
/// the docstrings are string literals (static storage).
template <class Fwd, class Bwd>
void bind_attention(nb::module_& m, const char* last, const char* fwd_doc, const char* bwd_doc, Fwd fwd, Bwd bwd) {
  using namespace nb::literals;
  using P = std::uintptr_t;
  m.def("attention_forward",
        [fwd](P q, P k, P v, P o, P o_f32, P lse, const attention_dims& dims, bool causal, double scale,
              const std::string& mode, float beta, std::uint64_t seed, const std::string& scaling, float near_tolerance,
              bool probe, std::uintptr_t extra, const std::string& exp) {
          attention_call c = make_call(dims, {causal, scale, mode, beta, seed, scaling, near_tolerance, probe, exp});
          attn::flash_tensors& t = c.args.t;
          t.q = address<const std::uint16_t>(q);
          t.k = address<const std::uint16_t>(k);
          t.v = address<const std::uint16_t>(v);
          t.o_bf16 = address<std::uint16_t>(o);
          t.o_f32 = address<float>(o_f32);
          t.lse = address<float>(lse);
          check(c.args, false);
          {
            nb::gil_scoped_release release;
            fwd(c.args, extra);
          }
          return counters_out(c);
        },
        "q"_a, "k"_a, "v"_a, "o"_a, "o_f32"_a, "lse"_a, "dims"_a, "causal"_a, "scale"_a, "mode"_a, "beta"_a = 2.0f,
        "seed"_a = 0, "scaling"_a = "unfused", "near_tolerance"_a = 1e-3f, "probe"_a = false, nb::arg(last) = 0,
        "exp"_a = "software", fwd_doc);
  m.def("attention_backward",
        [bwd](P q, P k, P v, P o, P o_f32, P lse, P dout, P delta, P dq, P dk, P dv, const attention_dims& dims,
              bool causal, double scale, const std::string& mode, float beta, std::uint64_t seed,
              const std::string& scaling, float near_tolerance, bool probe, std::uintptr_t extra, const std::string& exp) {
          attention_call c = make_call(dims, {causal, scale, mode, beta, seed, scaling, near_tolerance, probe, exp});
          attn::flash_tensors& t = c.args.t;
          t.q = address<const std::uint16_t>(q);
          t.k = address<const std::uint16_t>(k);
          t.v = address<const std::uint16_t>(v);
          t.o_bf16 = address<std::uint16_t>(o);
          t.o_f32 = address<float>(o_f32);
          t.lse = address<float>(lse);
          t.dout = address<const std::uint16_t>(dout);
          t.delta = address<float>(delta);
          t.dq = address<std::uint16_t>(dq);
          t.dk = address<std::uint16_t>(dk);
          t.dv = address<std::uint16_t>(dv);
          check(c.args, true);
          {
            nb::gil_scoped_release release;
            bwd(c.args, extra);
          }
          return counters_out(c);
        },
        "q"_a, "k"_a, "v"_a, "o"_a, "o_f32"_a, "lse"_a, "do"_a, "delta"_a, "dq"_a, "dk"_a, "dv"_a, "dims"_a, "causal"_a,
        "scale"_a, "mode"_a, "beta"_a = 2.0f, "seed"_a = 0, "scaling"_a = "unfused", "near_tolerance"_a = 1e-3f,
        "probe"_a = false, nb::arg(last) = 0, "exp"_a = "software", bwd_doc);
}

/// tiebreak._core's part: the host twin (python/src/attention.cpp).
void bind_attention_twin(nb::module_& m);

}  // namespace tiebreak::python
