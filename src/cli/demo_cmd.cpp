// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak demo`: the tie-breaking demonstration over all same-binade bf16 pairs.

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "tiebreak/host/tie_demo.hpp"

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
