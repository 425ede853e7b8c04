// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak experiment causal|bisect`: the causal experiment of issue 19 (docs/experiment.md).
#include <tiebreak/experiment/causal.hpp>

#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "commands.hpp"
#include "common.hpp"

namespace tiebreak::cli {

namespace {

namespace ex = tiebreak::experiment;

struct experiment_options {
  std::string preset = "smoke";
  std::string device = "cpu";
  std::string output;
  std::string html;
  std::string checkpoint_dir;
  std::string exp = "software";
  bool fresh = false;
  bool quiet = false;
  unsigned threads = 0;
  std::size_t steps = 0;
  std::size_t stop_after_steps = 0;
  std::vector<std::string> modes, data;
  std::vector<std::uint64_t> seeds;
  // bisect
  std::string bisect_data = "lowrank";
  std::uint64_t bisect_seed = 1;
  std::string remedy = "fp32";
};

ex::preset resolve_preset(const experiment_options& o) {
  ex::preset p;
  if (!ex::find_preset(o.preset, p)) {
    std::string names;
    for (const auto& n : ex::preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw std::runtime_error(fmt::format("experiment: unknown preset '{}' (known: {})", o.preset, names));
  }
  if (o.steps) {
    p.cfg.steps = o.steps;
    if (p.cfg.log_every > o.steps / 2) p.cfg.log_every = std::max<std::size_t>(1, o.steps / 2);
  }
  if (!o.modes.empty()) {
    p.modes.clear();
    for (const std::string& m : o.modes) {
      attn::out_mode x;
      if (!attn::parse_out_mode(m, x)) throw std::runtime_error(fmt::format("experiment: unknown mode '{}' (bf16, fp32, debias, stochastic)", m));
      p.modes.push_back(x);
    }
  }
  if (!o.data.empty()) {
    p.data.clear();
    for (const std::string& d : o.data) {
      ex::data_kind x;
      if (!ex::parse_data_kind(d, x)) throw std::runtime_error(fmt::format("experiment: unknown data '{}' (lowrank, isotropic)", d));
      p.data.push_back(x);
    }
  }
  if (!o.seeds.empty()) p.seeds = o.seeds;
  if (!attn::parse_exp2_policy(o.exp, p.cfg.exp))
    throw std::runtime_error(fmt::format("experiment: unknown exponential '{}' (software, sfu)", o.exp));
  if (const std::string e = p.cfg.validate(); !e.empty()) throw std::runtime_error("experiment: " + e);
  return p;
}

ex::run_options run_opts(const experiment_options& o, std::shared_ptr<std::mutex> mu) {
  ex::run_options ro;
  if (o.device == "gpu") ro.device = ex::device_kind::gpu;
  else if (o.device != "cpu") throw std::runtime_error("experiment: --device must be cpu or gpu");
  ro.threads = o.threads;
  ro.stop_after_steps = o.stop_after_steps;
  ro.checkpoint_dir = o.checkpoint_dir.empty() ? o.output + ".ckpt" : o.checkpoint_dir;
  if (o.fresh) {
    std::error_code ec;
    std::filesystem::remove_all(ro.checkpoint_dir, ec);
  }
  if (!o.quiet)
    ro.progress = [mu](const std::string& line) {
      const std::lock_guard lock(*mu);
      std::cerr << "tiebreak experiment: " << line << '\n';
    };
  return ro;
}

void write_json(nlohmann::json& j, const experiment_options& o) {
  j["tiebreak_version"] = TIEBREAK_VERSION;
  std::string cl;
  for (const std::string& a : command_line()) cl += (cl.empty() ? "" : " ") + a;
  j["command_line"] = cl;
  const std::string tmp = o.output + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw std::runtime_error(fmt::format("experiment: cannot write {}", o.output));
    f << j.dump(1) << '\n';
    if (!f) throw std::runtime_error(fmt::format("experiment: cannot write {}", o.output));
  }
  std::filesystem::rename(tmp, o.output);
}

void check_output(const experiment_options& o) {
  const std::filesystem::path p(o.output);
  std::error_code ec;
  if (p.has_parent_path() && !std::filesystem::is_directory(p.parent_path(), ec))
    throw std::runtime_error(fmt::format("experiment: the folder of {} does not exist", o.output));
}

void print_groups(const nlohmann::json& j);

void run_causal(const experiment_options& o) {
  check_output(o);
  const ex::preset p = resolve_preset(o);
  auto mu = std::make_shared<std::mutex>();
  const ex::run_options ro = run_opts(o, mu);
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.quiet)
    std::cerr << fmt::format("tiebreak experiment: causal, preset {}, {} cells on the {} ({} steps each); checkpoints in {}\n",
                             o.preset, p.modes.size() * p.data.size() * p.seeds.size(),
                             ro.device == ex::device_kind::cpu ? "host twin" : "GPU", p.cfg.steps, ro.checkpoint_dir);
  ex::grid_result g = ex::run_grid(p, ro);
  nlohmann::json j = ex::to_json(g, o.preset, ro.device);
  j["wall_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_json(j, o);
  if (!o.quiet) print_groups(j);
  if (!o.html.empty()) render_html_report({o.output}, o.html);  // after the table: a renderer failure loses nothing
  if (!o.quiet)
    std::cerr << fmt::format("tiebreak experiment: wrote {}{} in {:.1f} s\n", o.output, o.html.empty() ? "" : " and " + o.html,
                             j["wall_seconds"].get<double>());
}

void print_groups(const nlohmann::json& j) {
  std::cout << fmt::format("{:<11} {:<10} {:>3} {:>14} {:>26} {:>13} {:>7} {:>7} {:>9}\n", "mode", "data", "n", "growth/step",
                           "excess log sigma (95% CI)", "cum delta err", "growth", "stable", "diverged");
  for (const auto& gr : j["groups"]) {
    const auto ci = gr["excess_log_sigma_ci"];
    const std::string ex = gr["excess_log_sigma_mean"].is_null()
                               ? std::string("reference")
                               : fmt::format("{:+.4f} [{:+.3f},{:+.3f}]", io::number_from_json(gr["excess_log_sigma_mean"]),
                                             io::number_from_json(ci[0]), io::number_from_json(ci[1]));
    std::cout << fmt::format("{:<11} {:<10} {:>3} {:>14.3e} {:>26} {:>13.3e} {:>7} {:>7} {:>9}\n", gr["mode"].get<std::string>(),
                             gr["data"].get<std::string>(), gr["n"].get<int>(), io::number_from_json(gr["growth_rate_mean"]), ex,
                             io::number_from_json(gr["delta_error_cum_mean"]),
                             gr["verdicts"]["growth"].get<int>(), gr["verdicts"]["stable"].get<int>(),
                             gr["verdicts"]["diverged"].get<int>());
  }
  std::cout << j["conclusion"]["text"].get<std::string>() << '\n';
}

void run_bisect_cmd(const experiment_options& o) {
  check_output(o);
  const ex::preset p = resolve_preset(o);
  ex::bisect_spec b;
  if (!ex::parse_data_kind(o.bisect_data, b.data)) throw std::runtime_error("experiment bisect: --data must be lowrank or isotropic");
  b.seed = o.bisect_seed;
  if (!attn::parse_out_mode(o.remedy, b.remedy) || b.remedy == attn::out_mode::bf16)
    throw std::runtime_error("experiment bisect: --remedy must be fp32, debias or stochastic");
  auto mu = std::make_shared<std::mutex>();
  const ex::run_options ro = run_opts(o, mu);
  nlohmann::json j = ex::run_bisect(p, b, ro, o.preset);
  write_json(j, o);
  if (!o.quiet) std::cout << j["result"]["text"].get<std::string>() << '\n';
  if (!o.html.empty()) render_html_report({o.output}, o.html);
}

void add_common(CLI::App* cmd, experiment_options& o) {
  cmd->add_option("--preset", o.preset, "smoke (the CI grid, host twin, ~1 min on 2 cores), full (the device grid), tiny (tests)")
      ->capture_default_str();
  cmd->add_option("--device", o.device, "cpu: the bit-exact host twin; gpu: the H200 kernels")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", o.output, "the JSON file to write (docs/experiment.md)")->required();
  cmd->add_option("--html", o.html, "also write the HTML report (tiebreak report) here");
  cmd->add_option("--steps", o.steps, "training steps per run (default: the preset's)")->check(CLI::Range(2, 10000000));
  cmd->add_option("--threads", o.threads, "runs in parallel (0: all cores)")->capture_default_str();
  cmd->add_option("--exp", o.exp, "the attention kernels' exponential: software (exp2_sw) or sfu (the SFU's ex2.approx.ftz, "
                                  "one instruction, modelled bit for bit on the H200)")->capture_default_str();
  cmd->add_option("--checkpoint-dir", o.checkpoint_dir, "where runs checkpoint and resume from (default OUTPUT.ckpt)");
  cmd->add_flag("--fresh", o.fresh, "delete the checkpoints first instead of resuming from them");
  cmd->add_option("--stop-after-steps", o.stop_after_steps, "stop every run after this many steps of this invocation "
                                                            "(checkpointed; run again to resume)")
      ->group("");  // for the resume tests
  cmd->add_flag("-q,--quiet", o.quiet, "no progress on stderr and no table");
}

}  // namespace

void register_experiment(CLI::App& app) {
  auto o = std::make_shared<experiment_options>();
  CLI::App* ex_cmd = app.add_subcommand(
      "experiment", "The causal experiment: biased rounding x repeated low-rank updates -> spectral growth (docs/experiment.md)");
  ex_cmd->require_subcommand(1);
  CLI::App* causal = ex_cmd->add_subcommand(
      "causal", "Train the attention-only model over {modes} x {lowrank, isotropic} x seeds and judge spectral growth");
  add_common(causal, *o);
  causal->add_option("--modes", o->modes, "output modes (default: the preset's; fp32 is the reference every cell is paired with)");
  causal->add_option("--data", o->data, "lowrank, isotropic (default: both)");
  causal->add_option("--seeds", o->seeds, "seeds (default: the preset's)");
  causal->callback([o] { run_command([&] { run_causal(*o); }); });

  CLI::App* bisect = ex_cmd->add_subcommand(
      "bisect", "Find the smallest set of heads whose remedy removes the spectral growth (layers first, then heads)");
  add_common(bisect, *o);
  bisect->add_option("--data", o->bisect_data, "lowrank or isotropic")->capture_default_str();
  bisect->add_option("--seed", o->bisect_seed, "the seed of the runs")->capture_default_str();
  bisect->add_option("--remedy", o->remedy, "the mode given to the chosen heads: fp32, debias, stochastic")->capture_default_str();
  bisect->callback([o] { run_command([&] { run_bisect_cmd(*o); }); });
}

}  // namespace tiebreak::cli
