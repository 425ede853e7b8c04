// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak demo`: the tie-breaking demonstration over all same-binade bf16 pairs, then the
/// attention kernels (or their host twin) in every output mode on a workload with repeated maxima, audited.

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attention_run.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "tiebreak/host/tie_demo.hpp"
#include "tiebreak/io/json.hpp"

#ifdef TIEBREAK_HAVE_ANALYSIS
#include <tiebreak/audit/audit.hpp>
#endif

namespace tiebreak::cli {

namespace {

struct demo_options {
  std::uint64_t seed = 1;
  bool json = false;
};

double share(std::uint64_t part, std::uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

const host::demo_cell& cell(const host::demo_table& t, host::demo_accum ac, host::demo_tail tail, round_mode m) {
  for (const host::demo_cell& c : t.cells) {
    if (c.accum == ac && c.tail == tail && c.mode == m) return c;
  }
  throw std::logic_error("demo: missing cell");
}

#ifdef TIEBREAK_HAVE_ANALYSIS
/// The attention part: the kernels (the host twin without a GPU) in every output mode on one embedded
/// workload with repeated maxima, each audited against the f64 reference (docs/cli.md, `tiebreak demo`).
/// One key tile (seq_k 64): a row's P-bar = 1 events are then exactly its maximum's occurrences.
struct attention_mode_result {
  attn::out_mode mode{};
  audit::audit_report report;
  std::vector<probe::head_counters> counters;
  double seconds = 0;
};
struct attention_demo {
  attention::backend backend = attention::backend::twin;
  attention::inputs inputs;
  std::vector<attention_mode_result> modes;
};

attention_demo run_attention_demo(std::uint64_t seed) {
  attention_demo d;
  d.backend = attention::gpu_unavailable_reason().empty() ? attention::backend::gpu : attention::backend::twin;
  // Two blocks of the kernels (64 query rows each): 0.15 s for the four modes in a Release build, 12 s
  // under ASan + UBSan at -O1 (measured on 2 busy cores; the CLI tests run the demo twice there).
  const attn::shape s{1, 2, 2, 64, 64, 64, 64};
  d.inputs = attention::draw(attention::workload{s, false, seed, 0.5});
  reference::attention_options ro;
  const attn::problem prob = ro.problem_for(s);
  for (attn::out_mode m : attn::all_out_modes) {
    attn::flash_options fo;
    fo.mode = m;
    fo.seed = seed;
    const auto t0 = std::chrono::steady_clock::now();
    const attention::outputs out = attention::run(d.inputs, prob, fo, d.backend, 0);
    attention_mode_result r;
    r.mode = m;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Every mode's O on the bf16 scale of its row (fp32's error is then visibly ~0, not f32 ulps).
    r.report = audit::run_audit(attention::to_dump(d.inputs, out, m, formats::bf16), audit::audit_options{});
    r.counters = out.counters;
    d.modes.push_back(std::move(r));
  }
  return d;
}

nlohmann::json attention_json(const attention_demo& d) {
  const attn::shape& s = d.inputs.shape;
  nlohmann::json j;
  j["backend"] = attention::to_string(d.backend);
  j["shape"] = {{"batch", s.batch}, {"heads", s.heads}, {"kv_heads", s.kv_heads}, {"seq_q", s.seq_q},
                {"seq_k", s.seq_k}, {"dim", s.dim}, {"dim_v", s.dim_v}, {"causal", false}};
  j["planted_rows"] = d.inputs.planted_rows;
  j["modes"] = nlohmann::json::array();
  for (const attention_mode_result& r : d.modes) {
    nlohmann::json heads = nlohmann::json::array();
    for (const audit::head_report& h : r.report.heads) {
      const probe::head_counters& c = r.counters[h.batch * s.heads + h.head];
      heads.push_back({{"batch", h.batch},
                       {"head", h.head},
                       {"rows", h.o.rows},
                       {"o_mean_ulps", io::json_number(h.o.signed_error.t.mean)},
                       {"o_t", io::json_number(h.o.signed_error.t.t)},
                       {"o_biased", h.biased},
                       {"delta_mean_ulps", io::json_number(h.delta ? h.delta->t.mean : 0.0)},
                       {"delta_t", io::json_number(h.delta ? h.delta->t.t : 0.0)},
                       {"tie_rows", h.tie_rows},
                       {"repeated_max_exact", c.repeated_max_exact},
                       {"repeated_max_near", c.repeated_max_near},
                       {"p_one", c.p_one},
                       {"probe_output_error", attention::moments_json(c.output_error)},
                       {"probe_delta_error", attention::moments_json(c.delta_error)}});
    }
    j["modes"].push_back({{"mode", attn::to_string(r.mode)},
                          {"heads_biased", r.report.heads_biased},
                          {"heads_delta_biased", r.report.heads_delta_biased},
                          {"seconds", r.seconds},
                          {"heads", std::move(heads)}});
  }
  return j;
}

void print_attention(const attention_demo& d) {
  const attn::shape& s = d.inputs.shape;
  std::cout << fmt::format(
      "\nFlash attention, forward and backward, on the {} in its four output modes: batch {}, heads {}, {} queries x {}\n"
      "keys, dim {}; {} of the {} query rows drawn with a repeated score maximum (two identical keys with small V);\n"
      "each mode's O and delta audited against the f64 reference (ulps of bf16 at the row's scale; t: the t statistic\n"
      "over rows), with the kernel's own probe counters (rows whose maximum repeats, P-bar == 1 events):\n\n",
      attention::to_string(d.backend), s.batch, s.heads, s.seq_q, s.seq_k, s.dim, d.inputs.planted_rows,
      s.batch * s.heads * s.seq_q);
  std::cout << fmt::format("{:>4}  {:<10} {:>12} {:>8} {:>13} {:>6} {:>16} {:>8}  {}\n", "head", "mode", "O err (ulp)", "t",
                           "rep-max rows", "p==1", "delta err (ulp)", "t", "biased");
  for (std::size_t hi = 0; hi < s.batch * s.heads; ++hi) {
    for (const attention_mode_result& r : d.modes) {
      const audit::head_report& h = r.report.heads[hi];
      const probe::head_counters& c = r.counters[hi];
      std::cout << fmt::format("{:>4}  {:<10} {:>+12.4f} {:>+8.2f} {:>13} {:>6} {:>+16.4f} {:>+8.2f}  {}\n",
                               r.mode == d.modes.front().mode ? std::to_string(h.head) : "", attn::to_string(r.mode),
                               h.o.signed_error.t.mean, h.o.signed_error.t.t, c.repeated_max_exact, c.p_one,
                               h.delta ? h.delta->t.mean : 0.0, h.delta ? h.delta->t.t : 0.0, h.biased ? "yes" : "no");
    }
  }
  std::cout << '\n';
  for (const attention_mode_result& r : d.modes)
    std::cout << fmt::format("{:<10} {} of {} heads biased in O, {} in delta ({:.2f} s)\n", attn::to_string(r.mode),
                             r.report.heads_biased, r.report.heads.size(), r.report.heads_delta_biased, r.seconds);
}
#endif

void run_demo(const demo_options& opt) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const bool tty = isatty(STDERR_FILENO) != 0;
  int last_decile = -1;
  bool printed = false;
  const host::demo_table t = host::run_tie_demo(opt.seed, [&](std::uint64_t done, std::uint64_t total) {
    const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
    const int decile = static_cast<int>(10 * done / total);
    if (elapsed > 1.0 && decile != last_decile) {
      std::cerr << fmt::format("tiebreak demo: {:3d}% of the binades{}", 10 * decile, tty ? "\r" : "\n") << std::flush;
      last_decile = decile;
      printed = true;
    }
  });
  if (printed && tty) std::cerr << '\n';
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
#ifdef TIEBREAK_HAVE_ANALYSIS
  const auto attention_start = clock::now();
  const attention_demo att = run_attention_demo(opt.seed);
  const double attention_seconds = std::chrono::duration<double>(clock::now() - attention_start).count();
#endif

  if (opt.json) {
    nlohmann::json j;
    j["domain"] = {{"format", std::string(formats::bf16.name)},
                   {"exp_field_min", host::demo_exp_lo},
                   {"exp_field_max", host::demo_exp_hi},
                   {"signs", 2},
                   {"tail_scale_log2", -host::demo_tail_shift}};
    j["seed"] = t.seed;
    j["pairs"] = t.pairs;
    j["ties"] = t.ties;
    j["rows"] = nlohmann::json::array();
    for (const host::demo_cell& c : t.cells) {
      j["rows"].push_back({{"accumulate", host::to_string(c.accum)},
                           {"tail", host::to_string(c.tail)},
                           {"mode", std::string(to_string(c.mode))},
                           {"pairs", c.pairs},
                           {"ties", c.ties},
                           {"ties_away", c.ties_away},
                           {"ties_toward", c.ties_toward},
                           {"share_away", share(c.ties_away, c.ties)},
                           {"share_toward", share(c.ties_toward, c.ties)},
                           {"mean_error_ulps_ties", c.mean_error_ties()},
                           {"mean_error_ulps_all", c.mean_error_all()}});
    }
    j["seconds"] = seconds;
#ifdef TIEBREAK_HAVE_ANALYSIS
    j["attention"] = attention_json(att);
    j["attention"]["seconds"] = attention_seconds;
#endif
    std::cout << j.dump() << '\n';
    std::cout.flush();
    return;
  }

  std::cout << fmt::format(
      "Tie breaking in bf16 sums: all {} ordered pairs (a, b) of bf16 values with equal sign and exponent field\n"
      "{}..{} (both signs). a + b needs 9 bits; {} pairs (odd fraction sum) make it an exact round-to-nearest tie.\n"
      "Tail t = a * 2^-{} (none, same sign as a, opposite sign): far below half an ulp, yet it survives f32.\n\n",
      t.pairs, host::demo_exp_lo, host::demo_exp_hi, t.ties, host::demo_tail_shift);
  std::cout << fmt::format("{:<11} {:<14} {:<5} {:>9} {:>9} {:>9} {:>15} {:>15}\n", "accumulate", "tail", "mode", "ties",
                           "away", "toward", "mean err ties", "mean err all");
  std::cout << fmt::format("{:<11} {:<14} {:<5} {:>9} {:>9} {:>9} {:>15} {:>15}\n", "", "", "", "", "", "",
                           "(ulp, +=away)", "(ulp, +=away)");
  for (const host::demo_cell& c : t.cells) {
    std::cout << fmt::format("{:<11} {:<14} {:<5} {:>9} {:>8.2f}% {:>8.2f}% {:>+15.4f} {:>+15.4f}\n",
                             c.accum == host::demo_accum::f32 ? "f32 -> bf16" : "bf16 seq.", host::to_string(c.tail),
                             to_string(c.mode), c.ties, 100 * share(c.ties_away, c.ties),
                             100 * share(c.ties_toward, c.ties), c.mean_error_ties(), c.mean_error_all());
  }
  const host::demo_cell& same = cell(t, host::demo_accum::f32, host::demo_tail::same_sign, round_mode::rne);
  const host::demo_cell& none = cell(t, host::demo_accum::f32, host::demo_tail::none, round_mode::rne);
  const host::demo_cell& sr = cell(t, host::demo_accum::f32, host::demo_tail::same_sign, round_mode::sr);
  std::cout << fmt::format(
      "\nIn flash attention, a row whose score maximum repeats has several P-bar = 1 terms: their products with V\n"
      "are exact bf16 values, and two of one binade sum to such a tie. The tiny same-sign terms of the other keys,\n"
      "accumulated in f32, are the tail: under rne they send {:.2f}% of the ties away from zero (mean {:+.4f} ulp per\n"
      "tie, against {:+.4f} without a tail), always in the direction of V's sign; stochastic rounding gives {:+.4f}.\n",
      100 * share(same.ties_away, same.ties), same.mean_error_ties(), none.mean_error_ties(), sr.mean_error_ties());
  std::cout << fmt::format("(seed {}, {:.2f} s)\n", t.seed, seconds);
#ifdef TIEBREAK_HAVE_ANALYSIS
  print_attention(att);
  std::cout << fmt::format("(seed {}, {:.2f} s)\n", opt.seed, attention_seconds);
#endif
  std::cout.flush();
}

}  // namespace

void register_demo(CLI::App& app) {
  auto opt = std::make_shared<demo_options>();
  CLI::App* cmd = app.add_subcommand("demo", "Tie-breaking demonstration: how a tiny tail decides bf16 ties");
  cmd->add_option("--seed", opt->seed, "Seed of the random bits of sr (counter-based splitmix64 per pair)")->capture_default_str()->check(CLI::Validator([](std::string& s) { return unsigned_number_error(s); }, "UINT"));
  cmd->add_flag("--json", opt->json, "The table as one JSON object");
  cmd->callback([opt] { run_demo(*opt); });
}

}  // namespace tiebreak::cli
