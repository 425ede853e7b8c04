// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak audit-gemm`: signed error of a GEMM kernel's D = A·B (+ C) against the exact
/// product, and which accumulation scheme (tensor-core model, promotion, split-K) reproduces D.
///
/// Inputs (docs/gemm-audit.md): tensors `a` [M, K], `b` [K, N], `d` [M, N] required; `c` [M, N],
/// `scale_a`, `scale_b` optional (per tensor, per row of A / column of B, or per block of `scale_block`
/// along K: D = Σ_kb sa(i, kb) sb(kb, j) Σ_{k in kb} a_ik b_kj + C). Element types bf16, f16, e4m3, e5m2, f32
/// (safetensors; .npy: f2, f4, store bf16 as f4). a or b may be stored column-major (layout options).
///
/// The exact reference: every element of A and B is an integer times a power of two. Row i of A is
/// cut into 20-bit fixed-point slices below the row's top bit T_i (slice s holds the bits of weight
/// 2^(T_i - 20(s+1)) .. 2^(T_i - 20 s - 1)), column j of B likewise below U_j. A product of two
/// slices is an integer below 2^40; K ≤ 8192 of them sum below 2^53, so the dense product of the
/// leading slices (which hold every bit of all but a few elements) is computed exactly in f64
/// lanes, used as 53-bit integers (every partial sum is an integer below 2^53: no rounding ever
/// happens; larger K, up to gemm_max_k, is cut into chunks summed in int64). The few elements that reach lower slices
/// add their exact integer products into int64 bins per slice level. The levels are combined in a
/// wide integer (__int128, or Boost.Multiprecision when C, scales or many levels need more) and
/// rounded once, to nearest-even, into f64 for the statistics. The error d − x is then formed in f64
/// from that (off by at most 2^-53 |x|, i.e. ≤ 2^-29 ulps of an f32 row scale).
/// Block scales (changing along K): the dense sums are flushed per scale block and each block sum
/// enters scaled by its sa·sb (an __int128 per element while it provably fits, else cpp_int).
#pragma once

#include <tiebreak/analysis/bias.hpp>
#include <tiebreak/audit/audit.hpp>
#include <tiebreak/audit/inputs.hpp>
#include <tiebreak/emu/mma.hpp>
#include <tiebreak/fp/format.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tiebreak::audit {

/// Version of the audit-gemm JSON schema (docs/gemm-audit.md).
inline constexpr std::string_view gemm_report_schema = "tiebreak.audit-gemm/1";

/// Largest K the exact reference accepts: the int64 bins of one slice level hold at most
/// K · 14 products below 2^40 (< 2^60 for K <= 2^16).
inline constexpr std::size_t gemm_max_k = std::size_t{1} << 16;

/// How an FP8 scale tensor is laid out (docs/gemm-audit.md, "Scales").
enum class gemm_scale_kind : std::uint8_t {
  none,    ///< absent: 1
  tensor,  ///< one value
  outer,   ///< per row of A ([M] or [M, 1]) / per column of B ([N] or [1, N])
  block,   ///< per K block: A [M, ceil(K/B)] (1 x B blocks), B [ceil(K/B), ceil(N/B)] (B x B blocks)
};
std::string_view gemm_scale_kind_name(gemm_scale_kind k) noexcept;

/// One operand's scales as f32 encodings, expanded to a table sa(i, kb) (rows 1 or M, kblocks 1 or
/// ceil(K/B)) or sb(kb, j) (kblocks 1 or ceil(K/B), cols 1 or N; B x B blocks repeated along N).
struct gemm_scale {
  gemm_scale_kind kind = gemm_scale_kind::none;
  std::size_t outer = 1, kblocks = 1;  ///< table extents: outer (M for A, N for B) and K blocks
  std::vector<std::uint32_t> v;        ///< outer-major: v[o * kblocks + kb]; empty when none
  [[nodiscard]] bool present() const { return kind != gemm_scale_kind::none; }
  [[nodiscard]] bool along_k() const { return kblocks > 1; }
  /// f32 encoding for row (A) or column (B) `o`, K block `kb` (1.0 when absent).
  [[nodiscard]] std::uint32_t at(std::size_t o, std::size_t kb) const {
    if (v.empty()) return 0x3f800000u;
    return v[(outer == 1 ? 0 : o) * kblocks + (kblocks == 1 ? 0 : kb)];
  }
};

/// A decoded GEMM dump: encodings (low bits of each uint32) of the stored formats, row-major.
struct gemm_dump {
  std::size_t M = 0, N = 0, K = 0;
  format_desc a_fmt = formats::bf16, b_fmt = formats::bf16, d_fmt = formats::f32, c_fmt = formats::f32;
  std::vector<std::uint32_t> a;  ///< M x K
  std::vector<std::uint32_t> b;  ///< K x N
  std::vector<std::uint32_t> d;  ///< M x N
  std::vector<std::uint32_t> c;  ///< M x N, empty when absent
  gemm_scale scale_a, scale_b;  ///< f32 scales (absent: 1)
  std::size_t scale_block = 128;  ///< B: the K extent of one scale block (block scales)
  [[nodiscard]] bool scaled() const { return scale_a.present() || scale_b.present(); }
  /// Scales that change along K: partial sums per K block are scaled, then added (a scheme).
  [[nodiscard]] bool scaled_along_k() const { return scale_a.along_k() || scale_b.along_k(); }
  std::map<std::string, tensor_info> tensors;
  std::string source, container, a_layout = "row", b_layout = "row";
};

struct gemm_load_options {
  bool a_col_major = false;  ///< `a` stored as [K, M] (A transposed)
  bool b_col_major = false;  ///< `b` stored as [N, K] (B transposed: a weight matrix)
  std::size_t scale_block = 128;  ///< K (and N) extent of a block scale; 1 <= B <= 8192
};

/// Reads a safetensors file or a folder of a.npy, b.npy, d.npy [c.npy, scale_a.npy, scale_b.npy].
/// f32 tensors a/b whose values all fit bf16 (else f16) exactly count as that format. Scales are
/// converted to f32 (exact for every accepted format). Throws input_error (one line) on anything
/// malformed: missing tensor, wrong rank, inner dimensions that disagree, a scale of no accepted
/// shape, unsupported dtype, truncated file, K above gemm_max_k.
[[nodiscard]] gemm_dump load_gemm_dump(const std::filesystem::path& path, const gemm_load_options& o = {});

/// The exact product (see the file comment): x = Σ_k sa(i, k/B) sb(k/B, j) a_ik b_kj + C, rounded
/// once to f64 (RNE), and Σ_k |sa sb a_ik b_kj| (f64, a scale: relative error ≤ K·2^-52). Elements
/// whose row of A or column of B (or one of their scales) holds a NaN or Inf are NaN. `threads` 0:
/// all cores.
struct gemm_exact {
  std::vector<double> x;        ///< M x N
  std::vector<double> abs_sum;  ///< M x N
  std::size_t sparse_terms = 0; ///< elements of A and B that reach below their leading slice
};
[[nodiscard]] gemm_exact gemm_reference(const gemm_dump& d, unsigned threads = 0);

/// One candidate accumulation scheme (docs/gemm-audit.md, "Identification").
struct gemm_scheme {
  emu::mma_instr instr = emu::mma_instr::mma_m16n8k16_bf16;  ///< the tensor-core model per chunk
  int promote = 0;      ///< promote the instruction accumulator to an f32 sum (RNE) every this many K (0: never)
  int split_k = 1;      ///< K cut in this many equal parts, each from zero, partials summed in f32 (RNE)
  bool tree = false;    ///< split-K partials summed pairwise (else in order 0, 1, ...)
  bool c_in_epilogue = false;  ///< C added in f32 after the sum (else C is the first chunk's accumulator)
  bool fma_f32 = false; ///< instead of a tensor core: f32 FMA (RNE) over k in order (a CUDA-core kernel)
  /// Block scales (gemm_dump::scaled_along_k): each promoted partial p of K block kb enters the f32
  /// sum as fma(s, p, acc) with s = RNE(sa·sb) (DeepGEMM's FFMA), or, when false, as
  /// RNE(acc + RNE(s·p)). Unused otherwise.
  bool scale_fma = true;
  bool block_scales = false;  ///< set by gemm_candidates for a dump with block scales (names scale_fma)
  [[nodiscard]] std::string name() const;
};

struct gemm_scheme_result {
  gemm_scheme scheme;
  std::size_t mismatches = 0;  ///< sampled elements whose bits differ from D
};

struct gemm_identification {
  std::size_t tiles = 0, elements = 0;      ///< sampled output tiles (16 x 8) and their elements
  std::vector<std::pair<std::size_t, std::size_t>> tile_origins;  ///< (row, col) of each tile
  std::vector<gemm_scheme_result> candidates;  ///< sorted by mismatches, then by name
  std::vector<std::string> skipped;            ///< why a family was not tried (shape, format)
  [[nodiscard]] bool explained() const { return !candidates.empty() && candidates.front().mismatches == 0; }
};

struct gemm_identify_options {
  std::size_t tiles = 16;      ///< output tiles of 16 x 8 to sample (spread over D, seeded)
  std::uint64_t seed = 1;
  unsigned threads = 0;
};

/// The candidate schemes for this dump's formats and shape (docs/gemm-audit.md, "Identification"),
/// in the order identification tries them; `notes` gets why families were left out.
[[nodiscard]] std::vector<gemm_scheme> gemm_candidates(const gemm_dump& d, std::vector<std::string>* notes = nullptr);

/// The candidates that reproduce D bit for bit on the sampled tiles, and the others' mismatch counts.
[[nodiscard]] gemm_identification identify_gemm(const gemm_dump& d, const gemm_identify_options& o = {});

/// D as one scheme computes it, for element (i, j) (an encoding of d's format). Exposed for tests.
[[nodiscard]] std::uint32_t gemm_scheme_element(const gemm_dump& d, const gemm_scheme& s, std::size_t i, std::size_t j);

/// The running sum of one scheme along K (docs/gemm-audit.md, "Along K"): at every K position that
/// ends a K block (multiples of `k_block`, and the end of each split-K part), the scheme's
/// accumulator (an encoding of its accumulator format: f32, or f16 for an f16-output instruction)
/// against the exact sum of the same terms: [start of the part, position), C when the scheme
/// starts from C, block scales applied as the scheme applies them (K-independent scales are the
/// epilogue's: not in the running sum).
struct gemm_along_k_block {
  std::size_t k_end = 0;                ///< the K position (exclusive end of the prefix)
  std::size_t part_start = 0;           ///< start of the split-K part the running sum began at
  error_test signed_ulps;               ///< per sampled tile row: mean over its columns of (v - y) / u
  error_test directed_ulps;             ///< the same of sign(y)·(v - y) / u (< 0: toward zero)
  error_test relative;                  ///< per tile row: mean of (v - y) / Σ|terms| of the prefix
  error_test increment_ulps;            ///< per tile row: signed_ulps minus the previous block's
  double max_abs_ulps = 0;              ///< largest |v - y| / u over the sampled elements
};
struct gemm_along_k {
  gemm_scheme scheme;
  bool reproduces = false;      ///< the scheme reproduces every sampled D element bit for bit
  std::size_t mismatches = 0;   ///< sampled elements whose D bits differ from the scheme's
  std::size_t k_block = 0;      ///< the effective block (the requested one, rounded up to the scheme's step)
  std::size_t elements = 0, rows = 0, excluded = 0;  ///< sampled elements, tile rows used, elements left out (NaN/Inf)
  format_desc unit_fmt = formats::f32;  ///< u: ulp in this format of the tile row's largest |exact full sum|
  std::vector<gemm_along_k_block> blocks;
};
struct gemm_along_k_options {
  std::size_t k_block = 128;
  std::size_t tiles = 16;
  std::uint64_t seed = 1;
  double alpha = 1e-3;
  double min_effect_ulps = 0.05;
  unsigned threads = 0;
};
/// Along-K statistics of scheme `s` on the sampled tiles of identify_gemm (same tiles for the same
/// options). Precondition: `s` is one of gemm_candidates(d).
[[nodiscard]] gemm_along_k gemm_along_k_stats(const gemm_dump& d, const gemm_scheme& s, const gemm_along_k_options& o = {});

struct gemm_audit_options {
  unsigned threads = 0;
  double alpha = 1e-3;
  double min_effect_ulps = 0.05;
  std::size_t block = 256;  ///< side of the square output blocks of the per-block table
};

struct gemm_block {
  std::size_t row = 0, col = 0, rows = 0, cols = 0;
  analysis::running_moments signed_ulps;  ///< element errors in ulps of their row scale
  double share_positive = 0, share_negative = 0;
};

struct gemm_report {
  std::size_t M = 0, N = 0, K = 0;
  gemm_audit_options options;
  std::string source, container, a_layout, b_layout;
  std::map<std::string, tensor_info> tensors;
  gemm_scale_kind scale_a = gemm_scale_kind::none, scale_b = gemm_scale_kind::none;
  std::size_t scale_block = 128;
  std::size_t elements = 0, excluded = 0, sparse_terms = 0;
  std::size_t positive = 0, negative = 0, exact = 0;  ///< elements above, below and equal to x
  error_test row_signed, row_directed;  ///< rows as samples (mean over j of e_ij / u_i)
  error_test col_signed;                ///< columns as samples (mean over i of e_ij / u_i)
  error_test rel_signed;                ///< rows as samples of mean (d - x) / Σ|ab| (unitless)
  double max_abs_error_ulps = 0, max_abs_rel_error = 0;
  std::vector<gemm_block> blocks;
  bool biased = false;
  std::optional<gemm_identification> identification;
  std::optional<gemm_along_k> along_k;
  std::string along_k_note;  ///< why along_k is absent (when identification ran)
  double seconds_reference = 0, seconds_statistics = 0, seconds_identify = 0, seconds_along_k = 0;
};

/// Reference and statistics (identification is run separately and attached by the caller).
[[nodiscard]] gemm_report run_gemm_audit(const gemm_dump& d, const gemm_audit_options& o = {});

/// JSON (schema gemm_report_schema, docs/gemm-audit.md) and a Markdown summary.
[[nodiscard]] nlohmann::json to_json(const gemm_report& r);
[[nodiscard]] std::string markdown_summary(const gemm_report& r);

}  // namespace tiebreak::audit
