// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak audit`: per-head signed error of an attention kernel against the f64 reference.
///
/// Normalisation (docs/audit.md): the error of element (i, j) of a row-structured tensor (O, dQ,
/// dK, dV, LSE) is divided by the row scale u_i = ulp, in the kernel's output format, of the row's
/// largest |reference| value rounded to nearest-even into that format (the ulp of the smallest
/// subnormal for an all-zero row). Never by the ulp of the element itself: near-zero outputs from
/// cancellation would make element-relative errors explode. Each row then contributes one sample,
/// the mean of its normalised errors, so the tests below count rows, not correlated elements:
///   signed:   mean_j (X_kernel − X_ref)_ij / u_i                     (> 0: kernel above reference)
///   directed: mean_j sign(X_ref_ij) (X_kernel − X_ref)_ij / u_i      (> 0: away from zero)
/// The directed statistic exposes magnitude bias (round toward zero, ties broken away from zero)
/// whatever the sign pattern of V; the signed one is what enters delta and the gradients.
/// delta error per row: e_δ = Σ_j dO_ij (O_kernel − O_ref)_ij, normalised by u_i Σ_j |dO_ij|.
/// Verdict: a head is biased when, for the signed or the directed statistic, the two-sided t test
/// has p < alpha / 2 (Bonferroni over the two) AND |mean| ≥ min_effect_ulps.
#pragma once

#include <tiebreak/analysis/bias.hpp>
#include <tiebreak/audit/inputs.hpp>
#include <tiebreak/reference/attention.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tiebreak::audit {

/// Version of the JSON report's schema (docs/audit.md); bumped on any incompatible change.
inline constexpr std::string_view report_schema = "tiebreak.audit/2";

struct audit_options {
  bool causal = false;
  std::optional<double> scale;       ///< default 1/sqrt(dim)
  unsigned threads = 0;              ///< 0: hardware concurrency
  double alpha = 1e-3;               ///< family significance level of a head's verdict
  double min_effect_ulps = 0.05;     ///< smallest |mean row error| (ulps of the row scale) called a bias
  double tie_tolerance = 1e-3;       ///< near tie: scaled score within this of the row maximum
  bool certify = false;              ///< also run reference::certify (small problems only)
  /// Where the f64 reference runs: the host (attention_f64) or the GPU (attention_f64_device,
  /// which also returns the tie statistics' per-row counts, so no host Q Kᵀ is formed). "cuda"
  /// throws reference::device_unavailable without a usable GPU.
  enum class device_kind { cpu, cuda } device = device_kind::cpu;
  /// Progress: (stage, done, total), stage "reference" or "statistics". May be empty.
  std::function<void(std::string_view, std::size_t, std::size_t)> progress;
};

/// One statistic's test over rows (samples: one per valid row, in ulps of the row scale).
struct error_test {
  analysis::running_moments moments;
  analysis::t_test_result t;
  analysis::sign_test_result sign;
  bool significant = false;  ///< t test p < alpha / 2
  bool biased = false;       ///< significant and |mean| ≥ min_effect_ulps
};

/// Signed and directed tests of one tensor in one head, plus the largest element error.
struct tensor_error {
  std::size_t rows = 0;           ///< rows tested
  std::size_t excluded_rows = 0;  ///< rows with a NaN/Inf in the kernel's or the reference's row
  error_test signed_error;
  error_test directed_error;
  double max_abs_error_ulps = 0;
  [[nodiscard]] bool biased() const noexcept { return signed_error.biased || directed_error.biased; }
};

struct head_report {
  std::size_t batch = 0, head = 0, kv_head = 0;
  tensor_error o;
  std::optional<tensor_error> lse, dq;
  /// delta: `signed_error` of e_δ / (u Σ|dO|); `delta_error_sum` = Σ_rows e_δ (the paper's per-step sum).
  std::optional<error_test> delta;
  double delta_error_sum = 0;
  std::size_t delta_excluded_rows = 0;  ///< rows whose O or dO row holds NaN/Inf
  // trigger statistics
  std::size_t tie_rows = 0;       ///< rows whose score maximum repeats exactly (f64 dot products)
  std::size_t near_tie_rows = 0;  ///< rows with ≥ 2 scaled scores within tie_tolerance of the maximum
  std::size_t score_rows = 0;     ///< rows with at least one visible key and finite scores
  double tie_row_share = 0, near_tie_row_share = 0;
  error_test o_tie_signed, o_tie_directed;    ///< O row errors over tie rows (exact repeats)
  error_test o_rest_signed, o_rest_directed;  ///< O row errors over the other rows
  std::vector<double> v_sign_skew;            ///< per feature of V (this head's kv head): (pos − neg)/(pos + neg)
  double v_mean_abs_skew = 0;
  bool biased = false;                        ///< verdict on O (see file comment)
  bool delta_biased = false;                  ///< the same rule applied to the delta error
};

struct kv_head_report {
  std::size_t batch = 0, kv_head = 0;
  std::optional<tensor_error> dk, dv;
};

struct audit_report {
  reference::attention_shape shape;
  audit_options options;
  double scale = 0;
  std::string source, container, layout;
  std::map<std::string, tensor_info> tensors;
  std::vector<head_report> heads;
  std::vector<kv_head_report> kv_heads;
  std::optional<reference::certificate> certificate;
  // summary
  analysis::running_moments o_signed_all, o_directed_all;  ///< row samples pooled over heads
  std::size_t heads_biased = 0, heads_delta_biased = 0;
  std::size_t excluded_rows = 0;
  double seconds_reference = 0, seconds_statistics = 0;
  std::optional<reference::device_timing> device_timing;  ///< the GPU pass's split (device cuda only)
};

/// The verdict rule of one statistic (shared with audit-gemm): t test against 0 and sign test;
/// significant when p < alpha / 2, biased when also |mean| >= min_effect_ulps.
[[nodiscard]] error_test make_error_test(const analysis::running_moments& m, double alpha, double min_effect_ulps);

/// The row scale: ulp in `f` of max_abs rounded to nearest-even into `f` (the smallest subnormal's
/// ulp for 0; the largest finite value's ulp on overflow).
[[nodiscard]] double row_ulp(const format_desc& f, double max_abs);

/// Audits a decoded dump: computes the reference and every statistic above. Throws
/// reference::reference_error for inconsistent sizes (load_kernel_dump never produces them).
[[nodiscard]] audit_report run_audit(const kernel_dump& dump, const audit_options& options = {});

/// `s` with every byte that is not part of a well-formed UTF-8 sequence written as the four
/// characters `\xhh` (as Python's "backslashreplace"): file paths are bytes, JSON text is UTF-8.
[[nodiscard]] std::string json_safe_text(std::string_view s);

/// The report as JSON (schema report_schema, documented in docs/audit.md). Non-finite numbers → the
/// strings "inf", "-inf", "nan" (io::json_number, docs/json.md); `source` through json_safe_text.
[[nodiscard]] nlohmann::json to_json(const audit_report& r);

/// A Markdown summary: one table row per head, then the verdict line.
[[nodiscard]] std::string markdown_summary(const audit_report& r);

}  // namespace tiebreak::audit
