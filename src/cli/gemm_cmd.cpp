// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak audit-gemm`: signed error of a GEMM kernel's D against the exact product, and
/// which accumulation scheme reproduces D (docs/gemm-audit.md).
#ifdef TIEBREAK_HAVE_ANALYSIS
#include <tiebreak/audit/gemm.hpp>

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

#include "commands.hpp"
#include "common.hpp"

namespace tiebreak::cli {
namespace {

struct gemm_args {
  std::string input;
  std::string a_layout = "row", b_layout = "row";
  std::string output;
  bool json_stdout = false;
  bool identify = false;
  std::size_t tiles = 16;
  std::uint64_t seed = 1;
  double alpha = 1e-3;
  double min_effect = 0.05;
  std::size_t block = 256;
  unsigned threads = 0;
  bool quiet = false;
  std::size_t scale_block = 128;
  std::size_t k_block = 128;
  std::string scheme;
};

void run(const gemm_args& a) {
  using clock = std::chrono::steady_clock;
  audit::gemm_load_options lo;
  lo.a_col_major = a.a_layout == "col";
  lo.b_col_major = a.b_layout == "col";
  lo.scale_block = a.scale_block;
  const auto t0 = clock::now();
  const audit::gemm_dump dump = audit::load_gemm_dump(a.input, lo);
  const double load_s = std::chrono::duration<double>(clock::now() - t0).count();
  audit::gemm_audit_options o;
  o.threads = a.threads;
  o.alpha = a.alpha;
  o.min_effect_ulps = a.min_effect;
  o.block = a.block;
  // A chosen scheme must be one of the candidates: checked before the expensive reference.
  std::optional<audit::gemm_scheme> chosen;
  if (!a.scheme.empty()) {
    for (const audit::gemm_scheme& s : audit::gemm_candidates(dump))
      if (s.name() == a.scheme) chosen = s;
    if (!chosen)
      throw std::runtime_error("--scheme '" + a.scheme + "' is not a candidate for this dump (the names are those of the --identify table)");
  }
  audit::gemm_report r = audit::run_gemm_audit(dump, o);
  if (!a.quiet)
    std::cerr << fmt::format("tiebreak audit-gemm: exact reference {:.2f} s, statistics {:.2f} s\n", r.seconds_reference,
                             r.seconds_statistics);
  if (a.identify) {
    audit::gemm_identify_options io;
    io.tiles = a.tiles;
    io.seed = a.seed;
    io.threads = a.threads;
    const auto t1 = clock::now();
    r.identification = audit::identify_gemm(dump, io);
    r.seconds_identify = std::chrono::duration<double>(clock::now() - t1).count();
  }
  // Along K: the chosen scheme, else the first that reproduces D (its running sums are the kernel's).
  if (!chosen && r.identification) {
    if (r.identification->explained()) chosen = r.identification->candidates.front().scheme;
    else r.along_k_note = "not reported: no candidate reproduces D (choose one with --scheme for modelled running sums)";
  }
  if (chosen) {
    audit::gemm_along_k_options ko;
    ko.k_block = a.k_block;
    ko.tiles = a.tiles;
    ko.seed = a.seed;
    ko.alpha = a.alpha;
    ko.min_effect_ulps = a.min_effect;
    ko.threads = a.threads;
    const auto t2 = clock::now();
    r.along_k = audit::gemm_along_k_stats(dump, *chosen, ko);
    r.seconds_along_k = std::chrono::duration<double>(clock::now() - t2).count();
  }
  nlohmann::json j = audit::to_json(r);
  j["timing_s"]["load"] = load_s;
  if (!a.output.empty()) {
    std::ofstream out(a.output, std::ios::trunc);
    if (!out) throw std::runtime_error(a.output + ": cannot open for writing");
    out << j.dump(2) << '\n';
    out.close();
    if (!out) throw std::runtime_error(a.output + ": write error");
  }
  if (a.json_stdout) std::cout << j.dump() << '\n';
  else std::cout << audit::markdown_summary(r);
}

}  // namespace

void register_audit_gemm(CLI::App& app) {
  const CLI::Validator finite([](std::string& s) { return finite_number_error(s); }, "FINITE");
  const CLI::Validator uint([](std::string& s) { return unsigned_number_error(s); }, "UINT");
  auto a = std::make_shared<gemm_args>();
  CLI::App* cmd = app.add_subcommand("audit-gemm", "Signed rounding error of a GEMM kernel against the exact product; --identify its accumulation scheme");
  cmd->add_option("input", a->input, "safetensors file with a, b, d [c, scale_a, scale_b], or a folder of a.npy b.npy d.npy ...")->required();
  cmd->add_option("--a-layout", a->a_layout, "a stored row-major [M, K] or col-major [K, M]")->capture_default_str()->check(CLI::IsMember({"row", "col"}));
  cmd->add_option("--b-layout", a->b_layout, "b stored row-major [K, N] or col-major [N, K]")->capture_default_str()->check(CLI::IsMember({"row", "col"}));
  cmd->add_option("-o,--output", a->output, "Write the JSON report (schema tiebreak.audit-gemm/1, docs/gemm-audit.md) here");
  cmd->add_flag("--json", a->json_stdout, "Print the JSON report on stdout instead of the Markdown tables");
  cmd->add_flag("--identify", a->identify, "Also find which accumulation schemes reproduce D bit for bit (sampled tiles)");
  cmd->add_option("--tiles", a->tiles, "Output tiles of 16 x 8 sampled by --identify")->capture_default_str()->check(uint)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  cmd->add_option("--seed", a->seed, "Seed of the tile sample")->capture_default_str()->check(uint);
  cmd->add_option("--alpha", a->alpha, "Significance level of the verdict")->capture_default_str()->check(finite)->check(CLI::Range(1e-300, 0.5));
  cmd->add_option("--min-effect", a->min_effect, "Smallest mean row error (ulps of the row scale) called a bias")->capture_default_str()->check(finite)->check(CLI::NonNegativeNumber);
  cmd->add_option("--block", a->block, "Side of the output blocks of the per-block table")->capture_default_str()->check(uint)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 31));
  cmd->add_option("--scale-block", a->scale_block, "K (and N) extent of one block of block scales (scale_a [M, K/B], scale_b [K/B, N/B])")->capture_default_str()->check(uint)->check(CLI::Range(std::size_t{1}, std::size_t{8192}));
  cmd->add_option("--k-block", a->k_block, "Along K: report the running sum every this many K (rounded up to the scheme's step)")->capture_default_str()->check(uint)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 16));
  cmd->add_option("--scheme", a->scheme, "Along K for this candidate (its name as in the --identify table), labelled modelled unless it reproduces D");
  cmd->add_option("--threads", a->threads, "Worker threads (0: all cores)")->capture_default_str()->check(uint);
  cmd->add_flag("-q,--quiet", a->quiet, "No timing line on stderr");
  cmd->callback([a] { run_command([&] { run(*a); }); });
}

}  // namespace tiebreak::cli
#endif
