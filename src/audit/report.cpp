// SPDX-License-Identifier: Apache-2.0
/// @file JSON (schema tiebreak.audit/2) and Markdown forms of an audit report.
#include <tiebreak/audit/audit.hpp>

#include <tiebreak/analysis/json.hpp>

#include <fmt/format.h>

#include <cmath>

namespace tiebreak::audit {
namespace {

using nlohmann::json;
using analysis::json_number;

json test_json(const error_test& e) {
  return {{"n", e.moments.n},
          {"mean_ulps", json_number(e.t.mean)},
          {"sd_ulps", json_number(e.t.sd)},
          {"se_ulps", json_number(e.t.se)},
          {"t", json_number(e.t.t)},
          {"p_value", json_number(e.t.p_value)},
          {"ci_low", json_number(e.t.ci_low)},
          {"ci_high", json_number(e.t.ci_high)},
          {"cohen_d", json_number(e.t.cohen_d)},
          {"sign_positive", e.sign.positive},
          {"sign_negative", e.sign.negative},
          {"sign_zero", e.sign.zero},
          {"sign_p_value", json_number(e.sign.p_value)},
          {"significant", e.significant},
          {"biased", e.biased}};
}

json tensor_json(const tensor_error& t) {
  return {{"rows", t.rows},
          {"excluded_rows", t.excluded_rows},
          {"max_abs_error_ulps", json_number(t.max_abs_error_ulps)},
          {"signed", test_json(t.signed_error)},
          {"directed", test_json(t.directed_error)},
          {"biased", t.biased()}};
}

/// Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most
/// U+10FFFF) starting at s[i], or 0 when the bytes there are not one.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = at(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) { n = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
  else if (c >= 0xf0 && c <= 0xf4) { n = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
  else return 0;
  if (i + n > s.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  }
  return n;
}

}  // namespace

std::string json_safe_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (const std::size_t n = utf8_sequence(s, i); n != 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
    }
  }
  return out;
}

nlohmann::json to_json(const audit_report& r) {
  json j;
  j["schema"] = std::string(report_schema);
  j["source"] = json_safe_text(r.source);  // a path need not be UTF-8; JSON text must be
  j["container"] = r.container;
  j["layout"] = r.layout;
  const auto& s = r.shape;
  j["shape"] = {{"batch", s.batch}, {"heads", s.heads}, {"kv_heads", s.kv_heads}, {"seq_q", s.seq_q},
                {"seq_k", s.seq_k}, {"dim", s.dim},     {"dim_v", s.dim_v}};
  j["causal"] = r.options.causal;
  j["scale"] = json_number(r.scale);
  j["options"] = {{"alpha", r.options.alpha},
                  {"min_effect_ulps", r.options.min_effect_ulps},
                  {"tie_tolerance", r.options.tie_tolerance},
                  {"confidence", 0.95},
                  {"row_scale", "ulp_of_row_max_abs_reference"},
                  {"verdict_rule", "t-test p < alpha/2 and |mean| >= min_effect_ulps, for the signed or the directed row error"}};
  json tensors = json::object();
  for (const auto& [name, t] : r.tensors)
    tensors[name] = {{"dtype", t.dtype}, {"value_format", t.format.name}, {"shape", t.shape},
                     {"elements", t.elements}, {"nonfinite", t.nonfinite}};
  j["tensors"] = tensors;

  json heads = json::array();
  std::size_t tie_rows = 0, near_rows = 0, score_rows = 0;
  double delta_sum = 0;
  bool have_delta = false;
  json biased_heads = json::array(), delta_biased_heads = json::array();
  for (const head_report& h : r.heads) {
    json e = {{"batch", h.batch},
              {"head", h.head},
              {"kv_head", h.kv_head},
              {"rows", h.o.rows},
              {"excluded_rows", h.o.excluded_rows},
              {"o_mean_error_ulps", json_number(h.o.signed_error.t.mean)},
              {"o_t", json_number(h.o.signed_error.t.t)},
              {"o_p_value", json_number(h.o.signed_error.t.p_value)},
              {"o_ci_ulps", {json_number(h.o.signed_error.t.ci_low), json_number(h.o.signed_error.t.ci_high)}},
              {"o_cohen_d", json_number(h.o.signed_error.t.cohen_d)},
              {"o_directed_mean_error_ulps", json_number(h.o.directed_error.t.mean)},
              {"o_directed_t", json_number(h.o.directed_error.t.t)},
              {"o", tensor_json(h.o)},
              {"tie_rows", h.tie_rows},
              {"near_tie_rows", h.near_tie_rows},
              {"scored_rows", h.score_rows},
              {"tie_row_share", json_number(h.tie_row_share)},
              {"near_tie_row_share", json_number(h.near_tie_row_share)},
              {"o_given_tie", {{"signed", test_json(h.o_tie_signed)}, {"directed", test_json(h.o_tie_directed)}}},
              {"o_given_no_tie", {{"signed", test_json(h.o_rest_signed)}, {"directed", test_json(h.o_rest_directed)}}},
              {"v_mean_abs_sign_skew", json_number(h.v_mean_abs_skew)},
              {"biased", h.biased}};
    json skew = json::array();
    for (double x : h.v_sign_skew) skew.push_back(json_number(x));
    e["v_sign_skew"] = skew;
    if (h.delta) {
      have_delta = true;
      e["delta"] = test_json(*h.delta);
      e["delta_error_sum"] = json_number(h.delta_error_sum);
      e["delta_excluded_rows"] = h.delta_excluded_rows;
      e["delta_biased"] = h.delta_biased;
      delta_sum += h.delta_error_sum;
      if (h.delta_biased) delta_biased_heads.push_back({h.batch, h.head});
    }
    if (h.dq) e["dq"] = tensor_json(*h.dq);
    if (h.lse) e["lse"] = tensor_json(*h.lse);
    if (h.biased) biased_heads.push_back({h.batch, h.head});
    tie_rows += h.tie_rows;
    near_rows += h.near_tie_rows;
    score_rows += h.score_rows;
    heads.push_back(e);
  }
  j["heads"] = heads;
  json kv = json::array();
  for (const kv_head_report& k : r.kv_heads) {
    if (!k.dk && !k.dv) continue;
    json e = {{"batch", k.batch}, {"kv_head", k.kv_head}};
    if (k.dk) e["dk"] = tensor_json(*k.dk);
    if (k.dv) e["dv"] = tensor_json(*k.dv);
    kv.push_back(e);
  }
  j["kv_heads"] = kv;

  const auto ts = analysis::t_test(r.o_signed_all), td = analysis::t_test(r.o_directed_all);
  json nonfinite = json::object();
  for (const auto& [name, t] : r.tensors) nonfinite[name] = t.nonfinite;
  json summary = {{"heads", r.heads.size()},
                  {"heads_biased", r.heads_biased},
                  {"biased_heads", biased_heads},
                  {"verdict", r.heads_biased ? "biased" : "unbiased"},
                  {"rows", r.o_signed_all.n},
                  {"excluded_rows", r.excluded_rows},
                  {"nonfinite", nonfinite},
                  {"o_mean_error_ulps", json_number(ts.mean)},
                  {"o_t", json_number(ts.t)},
                  {"o_directed_mean_error_ulps", json_number(td.mean)},
                  {"o_directed_t", json_number(td.t)},
                  {"tie_rows", tie_rows},
                  {"tie_row_share", json_number(score_rows ? static_cast<double>(tie_rows) / static_cast<double>(score_rows) : 0.0)},
                  {"near_tie_row_share", json_number(score_rows ? static_cast<double>(near_rows) / static_cast<double>(score_rows) : 0.0)}};
  if (have_delta) {
    summary["delta_error_sum"] = json_number(delta_sum);
    summary["heads_delta_biased"] = r.heads_delta_biased;
    summary["delta_biased_heads"] = delta_biased_heads;
  }
  j["summary"] = summary;
  if (r.certificate) {
    json c = {{"digits10", r.certificate->digits10}, {"max_rel_row", json_number(r.certificate->max_rel_row())}};
    json entries = json::array();
    for (const auto& e : r.certificate->entries)
      entries.push_back({{"tensor", e.tensor}, {"count", e.count}, {"max_abs", json_number(e.max_abs)},
                         {"max_rel_row", json_number(e.max_rel_row)}, {"bound", json_number(e.bound)}});
    c["entries"] = entries;
    j["certificate"] = c;
  }
  j["timing_s"] = {{"reference", r.seconds_reference}, {"statistics", r.seconds_statistics}};
  j["device"] = r.options.device == audit_options::device_kind::cuda ? "cuda" : "cpu";
  if (r.device_timing)
    j["timing_s"]["reference_device"] = {{"upload", r.device_timing->upload},
                                         {"kernels", r.device_timing->kernels},
                                         {"download", r.device_timing->download}};
  return j;
}

std::string markdown_summary(const audit_report& r) {
  auto num = [](double x, const char* f) { return std::isfinite(x) ? fmt::format(fmt::runtime(f), x) : std::string("nan"); };
  const bool delta = !r.heads.empty() && r.heads.front().delta.has_value();
  std::string out = fmt::format("{} ({}, {}): batch {}, heads {} (kv {}), seq {}x{}, dim {}/{}, {}scale {:.6g}, O as {}\n\n",
                                r.source, r.container, r.layout, r.shape.batch, r.shape.heads, r.shape.kv_heads,
                                r.shape.seq_q, r.shape.seq_k, r.shape.dim, r.shape.dim_v, r.options.causal ? "causal, " : "",
                                r.scale, r.tensors.count("o") ? r.tensors.at("o").format.name : "?");
  out += "| batch | head | rows | O mean (ulp) | O t | O directed (ulp) | directed t | tie rows | tie share |";
  out += delta ? " delta mean (ulp) | delta t |" : "";
  out += " biased |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  out += delta ? "---:|---:|" : "";
  out += ":---:|\n";
  for (const head_report& h : r.heads) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |", h.batch, h.head, h.o.rows,
                       num(h.o.signed_error.t.mean, "{:+.4f}"), num(h.o.signed_error.t.t, "{:+.2f}"),
                       num(h.o.directed_error.t.mean, "{:+.4f}"), num(h.o.directed_error.t.t, "{:+.2f}"), h.tie_rows,
                       num(h.tie_row_share, "{:.3f}"));
    if (delta) out += fmt::format(" {} | {} |", num(h.delta->t.mean, "{:+.4f}"), num(h.delta->t.t, "{:+.2f}"));
    out += h.biased ? " **yes** |\n" : " no |\n";
  }
  std::size_t nonfinite = 0;
  for (const auto& [name, t] : r.tensors) nonfinite += t.nonfinite;
  out += fmt::format("\nverdict: {} of {} heads biased (alpha {}, min effect {} ulp); {} rows excluded; {} NaN/Inf values in the inputs\n",
                     r.heads_biased, r.heads.size(), r.options.alpha, r.options.min_effect_ulps, r.excluded_rows, nonfinite);
  return out;
}

}  // namespace tiebreak::audit
