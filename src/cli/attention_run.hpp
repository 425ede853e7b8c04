// SPDX-License-Identifier: Apache-2.0
/// @file What `tiebreak attention` and `tiebreak demo` share: the seeded workload, one forward +
/// backward call on the host twin or the GPU kernels, and its results as safetensors, audit input and JSON.
#pragma once
#ifdef TIEBREAK_HAVE_ANALYSIS

#include <tiebreak/audit/inputs.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tiebreak/attn/flash.hpp"
#include "tiebreak/io/safetensors.hpp"
#include "tiebreak/probe/probe.hpp"

namespace tiebreak::cli::attention {

/// The bf16 inputs of one call: dense bhsd encodings (attn/problem.hpp).
struct inputs {
  attn::shape shape;
  std::vector<std::uint16_t> q, k, v, dout;
  std::size_t planted_rows = 0;  ///< drawn workloads: query rows given a repeated maximum (all heads)
  std::size_t planted_pairs = 0; ///< drawn workloads: duplicated key pairs (all key/value heads)
  bool do_drawn = false;         ///< dO came from the seed (always for drawn workloads)
};

/// The default workload (docs/attention.md, "Command line"), every value a bf16 (rne from the draw):
///   q, k ~ N(0, 1); v ~ N(1, 0.5) (anisotropic: 98 % positive); dO ~ N(0.5, 1);
///   per (batch, key/value head), pairs of identical keys ("sink-like" pairs: key a copied to key
///   a + 8 in each block of 16 keys), whose V rows are small, uniform over the bf16 values of
///   [0.25, 0.5); a share `tie_share` of the query rows is set to q = 2 k_a + N(0, 0.5) for one pair
///   (a, b) that the row sees: the row's score maximum then repeats exactly (k_b = k_a), far (≈ 10 in
///   the scaled score at D = 64) above its other scores, so P-bar = 1 twice and the row's O is
///   (v_a + v_b) / 2, often a bf16 rounding tie, plus a tiny tail.
/// "N(m, s)" is m + s · z with z the sum of four 24-bit uniforms, centred and scaled to unit
/// variance (Irwin-Hall; exact arithmetic, no libm: the same bits on every platform). Streams:
/// splitmix64 keyed by the seed and the tensor.
struct workload {
  attn::shape shape;
  bool causal = false;
  std::uint64_t seed = 1;
  double tie_share = 0.25;
};
[[nodiscard]] inputs draw(const workload& w);

/// dO drawn from the seed as in draw() (for inputs that lack it).
void draw_do(inputs& in, std::uint64_t seed);

/// Reads q, k, v and (optionally) do from a file the audit reads (safetensors or .npy folder, any
/// layout). Every value must be a bf16 value (stored as BF16, or exactly representable in it);
/// NaN and Inf are kept (counted by nonfinite()). dO is drawn from `seed` when absent. Throws
/// audit::input_error naming the file and tensor.
[[nodiscard]] inputs read(const std::string& path, audit::layout layout, std::uint64_t seed);

/// NaN and ±Inf encodings among `x`.
[[nodiscard]] std::size_t nonfinite(const std::vector<std::uint16_t>& x);

/// Where the kernels run.
enum class backend { twin, gpu };
/// "host twin" or "gpu".
[[nodiscard]] const char* to_string(backend b);
/// Empty when this build has the GPU kernels and a GPU that runs them; else one line saying why not.
[[nodiscard]] std::string gpu_unavailable_reason();

/// The outputs of one forward + backward call.
struct outputs {
  std::vector<std::uint16_t> o_bf16;  ///< modes bf16, debias, stochastic
  std::vector<float> o_f32;           ///< every mode: the f32 O (mode fp32's output; the others' O before rounding)
  std::vector<float> lse, delta;
  std::vector<std::uint16_t> dq, dk, dv;
  std::vector<probe::head_counters> counters;  ///< batch · heads, (b, h) at b · heads + h
  double seconds_forward = 0, seconds_backward = 0;
};

/// Throws std::invalid_argument (attn::error_text) when the kernels do not support problem `p` with
/// options `o` (attn::flash_check, asked before any tensor exists).
void check_call(const attn::problem& p, const attn::flash_options& o);

/// Runs the forward and the backward pass (probed) of `p` with options `o`. Throws
/// std::invalid_argument (attn::error_text) for an unsupported call, std::runtime_error when the
/// backend is not available or fails.
[[nodiscard]] outputs run(const inputs& in, const attn::problem& p, const attn::flash_options& o, backend be,
                          unsigned threads);

/// The tensors `tiebreak attention` writes: q, k, v, do, o (bf16, f32 in mode fp32), lse, delta (f32),
/// dq, dk, dv (bf16), bhsd.
[[nodiscard]] std::map<std::string, io::st_tensor_data> to_safetensors(const inputs& in, const outputs& out,
                                                                       attn::out_mode mode);

/// What audit::load_kernel_dump returns for that file, built in memory (`o_format`: the format of
/// O's ulp scale; the loader's choice for a file is bf16, or f32 in mode fp32 unless every value fits bf16).
[[nodiscard]] audit::kernel_dump to_dump(const inputs& in, const outputs& out, attn::out_mode mode,
                                         const format_desc& o_format);

/// A signed_moments as JSON: count, positive, negative, zero, sum, sum_sq, mean, sd (numbers per io::json_number).
[[nodiscard]] nlohmann::json moments_json(const probe::signed_moments& m);
/// The mean (0 for no samples) and the sample standard deviation (0 for fewer than two).
[[nodiscard]] double mean_of(const probe::signed_moments& m);
[[nodiscard]] double sd_of(const probe::signed_moments& m);

}  // namespace tiebreak::cli::attention

#endif
