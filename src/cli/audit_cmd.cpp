// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak audit`: per-head signed error of an attention kernel's dump against the f64 reference.
#ifdef TIEBREAK_HAVE_ANALYSIS
#include <tiebreak/audit/audit.hpp>
#include <tiebreak/audit/inputs.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"
#include "common.hpp"

namespace tiebreak::cli {
namespace {

struct audit_args {
  std::string input;
  std::string layout = "bhsd";
  bool causal = false;
  std::optional<double> scale;
  std::string device = "cpu";
  std::string output;
  std::string value_format = "auto";
  double alpha = 1e-3;
  double min_effect = 0.05;
  double tie_tolerance = 1e-3;
  unsigned threads = 0;
  bool certify = false;
  bool json_stdout = false;
  bool quiet = false;
};

/// What --out-format accepts: "auto" and these formats, named by the core's table.
constexpr format_id out_formats[] = {format_id::bf16, format_id::f16, format_id::f32, format_id::tf32, format_id::f64};

std::vector<std::string> out_format_choices() {
  std::vector<std::string> names{"auto"};
  for (format_id id : out_formats) names.emplace_back(desc_of(id).name);
  return names;
}

/// Progress on stderr, at most one line a second, and only once a stage has run for a second.
class progress_printer {
 public:
  explicit progress_printer(bool enabled) : enabled_(enabled), start_(clock::now()), last_(start_) {}
  void operator()(std::string_view stage, std::size_t done, std::size_t total) {
    if (!enabled_) return;
    const auto now = clock::now();
    if (now - last_ < std::chrono::seconds(1) && done != total) return;
    if (now - start_ < std::chrono::seconds(1)) return;
    last_ = now;
    std::cerr << fmt::format("tiebreak audit: {} {}/{} heads ({:.1f} s)\n", stage, done, total,
                             std::chrono::duration<double>(now - start_).count());
  }

 private:
  using clock = std::chrono::steady_clock;
  bool enabled_;
  clock::time_point start_, last_;
};

void run(const audit_args& a) {
  if (a.device == "cuda") {  // checked before the input is read: no GPU answers at once, exit code 2
    if (const std::string why = reference::device_unavailable_reason(); !why.empty())
      throw std::runtime_error("--device cuda: " + why + "; use --device cpu");
  }
  audit::load_options lo;
  lo.tensor_layout = a.layout == "bshd" ? audit::layout::bshd : audit::layout::bhsd;
  if (a.value_format != "auto") {
    format_id id{};
    if (!parse_format(a.value_format, id)) throw std::invalid_argument("--out-format: unknown format '" + a.value_format + "'");
    lo.value_format = desc_of(id);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const audit::kernel_dump dump = audit::load_kernel_dump(a.input, lo);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  audit::audit_options o;
  o.causal = a.causal;
  o.scale = a.scale;
  o.threads = a.threads;
  o.alpha = a.alpha;
  o.min_effect_ulps = a.min_effect;
  o.tie_tolerance = a.tie_tolerance;
  o.certify = a.certify;
  o.device = a.device == "cuda" ? audit::audit_options::device_kind::cuda : audit::audit_options::device_kind::cpu;
  auto printer = std::make_shared<progress_printer>(!a.quiet);
  o.progress = [printer](std::string_view st, std::size_t d, std::size_t t) { (*printer)(st, d, t); };
  const audit::audit_report r = audit::run_audit(dump, o);
  nlohmann::json j = audit::to_json(r);
  j["timing_s"]["load"] = load_s;
  // Provenance for `tiebreak report` (docs/report.md), as the attention probe JSON records it.
  j["tool"] = {{"name", "tiebreak"}, {"version", TIEBREAK_VERSION}};
  j["command_line"] = nlohmann::json::array();
  for (const std::string& arg : command_line()) j["command_line"].push_back(audit::json_safe_text(arg));
  if (!a.output.empty()) {
    std::ofstream out(a.output, std::ios::trunc);
    if (!out) throw std::runtime_error(a.output + ": cannot open for writing");
    out << j.dump(2) << '\n';
    out.close();
    if (!out) throw std::runtime_error(a.output + ": write error");
  }
  if (a.json_stdout) std::cout << j.dump() << '\n';
  else std::cout << audit::markdown_summary(r);
  if (r.certificate)
    std::cerr << fmt::format("tiebreak audit: f64 reference certified to {:.3g} of each row's magnitude ({} digits)\n",
                             r.certificate->max_rel_row(), r.certificate->digits10);
}

}  // namespace

void register_audit(CLI::App& app) {
  // CLI11's Range and NonNegativeNumber let NaN through: NaN or Inf here would poison every verdict.
  const CLI::Validator finite([](std::string& s) { return finite_number_error(s); }, "FINITE");
  auto a = std::make_shared<audit_args>();
  CLI::App* cmd = app.add_subcommand("audit", "Per-head signed rounding error of an attention kernel against an f64 reference");
  cmd->add_option("input", a->input, "safetensors file, or folder of q.npy k.npy v.npy o.npy [do dq dk dv lse]")->required();
  cmd->add_option("--layout", a->layout, "Tensor layout")->capture_default_str()->check(CLI::IsMember({"bhsd", "bshd"}));
  cmd->add_flag("--causal", a->causal, "Causal mask (bottom-right aligned when seq_q != seq_k)");
  cmd->add_option("--scale", a->scale, "Softmax scale (default 1/sqrt(dim))")->check(finite);
  cmd->add_option("--device", a->device, "Where the reference runs")->capture_default_str()->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("-o,--output", a->output, "Write the JSON report (schema tiebreak.audit/2, docs/audit.md) here");
  cmd->add_flag("--json", a->json_stdout, "Print the JSON report on stdout instead of the Markdown table");
  cmd->add_option("--out-format", a->value_format, "Format of the kernel's outputs for the ulp scale: auto, bf16, f16, f32")
      ->capture_default_str()->check(CLI::IsMember(out_format_choices()));
  cmd->add_option("--alpha", a->alpha, "Significance level of a head's verdict")->capture_default_str()->check(finite)->check(CLI::Range(1e-300, 0.5));
  cmd->add_option("--min-effect", a->min_effect, "Smallest mean error (ulps of the row scale) called a bias")->capture_default_str()->check(finite)->check(CLI::NonNegativeNumber);
  cmd->add_option("--tie-tolerance", a->tie_tolerance, "Near tie: scaled score within this of the row maximum")->capture_default_str()->check(finite)->check(CLI::NonNegativeNumber);
  cmd->add_option("--threads", a->threads, "Worker threads (0: all cores)")->capture_default_str()->check(CLI::Validator([](std::string& s) { return unsigned_number_error(s); }, "UINT"));
  cmd->add_flag("--certify", a->certify, "Also check the f64 reference against a 60-digit recomputation (small problems)");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress on stderr");
  cmd->callback([a] { run_command([&] { run(*a); }); });
}

}  // namespace tiebreak::cli
#endif
