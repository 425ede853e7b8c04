// SPDX-License-Identifier: Apache-2.0
/// @file JSON serialisation of the analysis results.
#include <tiebreak/analysis/json.hpp>

#include <cmath>
#include <numbers>

namespace tiebreak::analysis {

using nlohmann::json;

namespace {
json numbers(const Eigen::VectorXd& v, double scale = 1) {
  json a = json::array();
  for (index i = 0; i < v.size(); ++i) a.push_back(json_number(v[i] * scale));
  return a;
}
constexpr double deg = 180.0 / std::numbers::pi;
}  // namespace

void to_json(json& j, const running_moments& m) {
  j = {{"n", m.n},
       {"mean", json_number(m.mean)},
       {"sd", json_number(m.sd())},
       {"sum", json_number(m.sum())},
       {"sum_abs", json_number(m.sum_abs)},
       {"min", json_number(m.min)},
       {"max", json_number(m.max)},
       {"positive", m.positive},
       {"negative", m.negative},
       {"zero", m.zero},
       {"nonfinite", m.nonfinite}};
}

void to_json(json& j, const t_test_result& r) {
  j = {{"n", r.n},           {"mean", json_number(r.mean)},   {"sd", json_number(r.sd)},
       {"se", json_number(r.se)}, {"t", json_number(r.t)},     {"df", json_number(r.df)},
       {"p_value", json_number(r.p_value)}, {"cohen_d", json_number(r.cohen_d)},
       {"hedges_g", json_number(r.hedges_g)}, {"ci_low", json_number(r.ci_low)},
       {"ci_high", json_number(r.ci_high)}, {"confidence", r.confidence}};
}

void to_json(json& j, const sign_test_result& r) {
  j = {{"positive", r.positive},          {"negative", r.negative},
       {"zero", r.zero},                  {"share_positive", json_number(r.share_positive)},
       {"sign_skew", json_number(r.sign_skew)}, {"p_value", json_number(r.p_value)}};
}

void to_json(json& j, const bootstrap_result& r) {
  j = {{"n", r.n},
       {"mean", json_number(r.mean)},
       {"se", json_number(r.se)},
       {"ci_low", json_number(r.ci_low)},
       {"ci_high", json_number(r.ci_high)},
       {"p_value", json_number(r.p_value)},
       {"block_length", r.block_length},
       {"resamples", r.resamples},
       {"seed", r.seed}};
}

void to_json(json& j, const bias_summary& r) {
  j = {{"moments", r.moments}, {"t_test", r.t}, {"sign_test", r.sign}};
}

void to_json(json& j, const drift_step& r) {
  j = {{"step", r.step},
       {"value", json_number(r.value)},
       {"cumulative_sum", json_number(r.cumulative_sum)},
       {"s_pos", json_number(r.s_pos)},
       {"s_neg", json_number(r.s_neg)},
       {"calibrating", r.calibrating},
       {"alarm", r.alarm}};
}

void to_json(json& j, const spectral_norm_result& r) {
  j = {{"spectral_norm", json_number(r.sigma)},
       {"error_estimate", json_number(r.error_estimate)},
       {"residual", json_number(r.residual)},
       {"iterations", r.iterations},
       {"converged", r.converged}};
}

void to_json(json& j, const spectral_batch_result& r) {
  json s = json::array(), e = json::array();
  for (double x : r.sigma) s.push_back(json_number(x));
  for (double x : r.error_estimate) e.push_back(json_number(x));
  j = {{"spectral_norms", s},
       {"error_estimates", e},
       {"iterations", r.iterations},
       {"converged", r.all_converged()},
       {"total_passes", r.total_passes}};
}

void to_json(json& j, const spectrum_summary& r) {
  j = {{"spectral_norm", json_number(r.spectral_norm)},
       {"frobenius_norm", json_number(r.frobenius_norm)},
       {"stable_rank", json_number(r.stable_rank)},
       {"effective_rank", json_number(r.effective_rank)},
       {"singular_values", numbers(r.singular_values)}};
}

void to_json(json& j, const spectral_check& r) {
  j = {{"estimate", json_number(r.estimate)},
       {"exact", json_number(r.exact)},
       {"rel_error", json_number(r.rel_error)}};
}

void to_json(json& j, const growth_fit& r) {
  j = {{"n", r.n},
       {"slope", json_number(r.slope)},
       {"intercept", json_number(r.intercept)},
       {"slope_se", json_number(r.slope_se)},
       {"residual_sd", json_number(r.residual_sd)}};
}

void to_json(json& j, const growth_step& r) {
  j = {{"step", json_number(r.step)},
       {"sigma", json_number(r.sigma)},
       {"log_sigma", json_number(r.log_sigma)},
       {"in_baseline", r.in_baseline},
       {"predicted_log_sigma", json_number(r.predicted_log_sigma)},
       {"z", json_number(r.z)},
       {"cusum_pos", json_number(r.cusum.s_pos)},
       {"cusum_neg", json_number(r.cusum.s_neg)},
       {"alarm", r.alarm}};
}

void to_json(json& j, const principal_angles_result& r) {
  j = {{"principal_angles_deg", numbers(r.angles, deg)},
       {"largest_angle_deg", json_number(r.largest() * deg)},
       {"overlap", json_number(r.overlap)}};
}

void to_json(json& j, const subspace_overlap_result& r) {
  j = {{"k", r.k}, {"left", r.left}, {"right", r.right}};
}

void to_json(json& j, const coherence_result& r) {
  j = {{"terms", r.terms},
       {"coherence", json_number(r.coherence)},
       {"norm_of_sum", json_number(r.norm_of_sum)},
       {"sum_of_norms", json_number(r.sum_of_norms)},
       {"weight_sum", json_number(r.weight_sum)},
       {"dominant_share", json_number(r.dominant_share)}};
}

void to_json(json& j, const gradient_alignment_result& r) {
  j = {{"k", r.k},
       {"cosine", json_number(r.cosine)},
       {"two_sided", json_number(r.two_sided)},
       {"left", json_number(r.left)},
       {"right", json_number(r.right)},
       {"per_direction", numbers(r.per_direction)}};
}

void to_json(json& j, const update_step& r) {
  j = {{"step", r.step}, {"ranks", r.ranks}};
  j["cosine_with_previous"] = r.cosine_with_previous ? json_number(*r.cosine_with_previous) : json(nullptr);
  j["overlap_with_previous"] = r.overlap_with_previous ? json(*r.overlap_with_previous) : json(nullptr);
}

}  // namespace tiebreak::analysis
