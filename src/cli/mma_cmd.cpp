// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak mma`: one output element of a tensor-core instruction, as its model computes it.

#include <cstdint>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "tiebreak/emu/mma.hpp"

namespace tiebreak::cli {

/// `tiebreak mma` (declared here; main.cpp registers it).
void register_mma(CLI::App& app);

namespace {

/// "mma.m16n8k16.bf16 ... wgmma.k32.e5m2", from the model table.
constexpr const auto& instr_names = joined_names<emu::all_mma_instrs, emu::mma_instr_name>;

struct mma_options {
  std::string instr;
  std::string arch = "sm90";
  std::string c = "0";
  std::vector<std::string> a, b;
  bool json = false;
  bool list = false;
};

std::string params_text(const emu::mma_model& m) {
  return fmt::format(
      "k={} group={} grouping={} c_order={} exp_ref={} align_bits={} align_round={} step_round={} acc={} "
      "out_round={} daz={} ftz={} overflow_to_inf={}",
      m.k, m.group, emu::to_string(m.grouping), emu::to_string(m.c_order), emu::to_string(m.exp_ref),
      m.align_bits >= emu::mma_align_exact ? std::string("exact") : std::to_string(m.align_bits),
      to_string(m.align_round), to_string(m.step_round), m.acc_fmt.name, to_string(m.out_round), m.daz, m.ftz,
      m.overflow_to_inf);
}

std::vector<std::string> param_names(std::uint32_t mask) {
  std::vector<std::string> out;
  for (int bit = 0; bit < emu::mma_param_count; ++bit)
    if (mask & (1u << bit)) out.emplace_back(emu::mma_param_name(bit));
  return out;
}

/// The parameters of the row's model that no input can tell apart (emu::mma_observable).
std::vector<std::string> no_effect_names(const emu::mma_model_entry& e) {
  return param_names(emu::mma_param_all & ~emu::mma_observable(e.model));
}

nlohmann::json model_json(const emu::mma_model_entry& e) {
  const emu::mma_model& m = e.model;
  nlohmann::json j;
  j["name"] = std::string(emu::mma_instr_name(e.id));
  j["ptx"] = std::string(e.ptx);
  j["a"] = std::string(m.a_fmt.name);
  j["b"] = std::string(m.b_fmt.name);
  j["c"] = std::string(m.c_fmt.name);
  j["acc"] = std::string(m.acc_fmt.name);
  j["shape"] = {m.m, m.n, m.k};
  j["group"] = m.group;
  j["grouping"] = std::string(emu::to_string(m.grouping));
  j["c_order"] = std::string(emu::to_string(m.c_order));
  j["exp_ref"] = std::string(emu::to_string(m.exp_ref));
  j["align_bits"] = m.align_bits >= emu::mma_align_exact ? nlohmann::json("exact") : nlohmann::json(m.align_bits);
  j["align_round"] = std::string(to_string(m.align_round));
  j["step_round"] = std::string(to_string(m.step_round));
  j["out_round"] = std::string(to_string(m.out_round));
  j["daz"] = m.daz;
  j["ftz"] = m.ftz;
  j["overflow_to_inf"] = m.overflow_to_inf;
  j["unverified"] = param_names(emu::mma_unverified(e));
  j["no_observable_effect"] = no_effect_names(e);
  j["evidence"] = std::string(e.evidence);
  return j;
}

void run_list(const mma_options& opt) {
  if (opt.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : emu::mma_models) arr.push_back(model_json(e));
    std::cout << arr.dump() << '\n';
    return;
  }
  for (const auto& e : emu::mma_models) {
    std::cout << fmt::format("{:<26} {}\n", emu::mma_instr_name(e.id), e.ptx);
    std::cout << fmt::format("  {} x {} -> {} (accumulator {}), m{}n{}k{}\n", e.model.a_fmt.name, e.model.b_fmt.name,
                             e.model.c_fmt.name, e.model.acc_fmt.name, e.model.m, e.model.n, e.model.k);
    std::cout << "  " << params_text(e.model) << '\n';
    // Unverified: what could change a result and was not pinned; a parameter without observable
    // effect is named as such, never as unverified.
    const auto unk = param_names(emu::mma_unverified(e));
    const auto none = no_effect_names(e);
    const std::string no_effect = none.empty() ? "" : fmt::format(" (no observable effect: {})", fmt::join(none, " "));
    if (e.unknown == emu::mma_param_all) std::cout << "  status: unverified (every parameter); " << e.evidence << '\n';
    else if (unk.empty()) std::cout << fmt::format("  status: verified on hardware{}; {}\n", no_effect, e.evidence);
    else std::cout << fmt::format("  status: unverified: {}{}; {}\n", fmt::join(unk, " "), no_effect, e.evidence);
  }
}

/// Splits "v1,v2,..." (each element may itself be a value of `tiebreak round`).
std::vector<std::string> split_list(const std::vector<std::string>& parts) {
  std::vector<std::string> out;
  for (const std::string& p : parts) {
    std::stringstream ss(p);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (!item.empty()) out.push_back(item);
    }
  }
  return out;
}

/// Rounds a parsed value into f (rne), as `tiebreak round --to f` would; returns the encoding.
std::uint64_t to_format(const format_desc& f, const host::exact_number& x) {
  return round_pack(f, x.window, rounding{round_mode::rne, 0}).bits;
}

void run_mma(const mma_options& opt) {
  if (opt.arch != "sm90") throw std::invalid_argument(fmt::format("--arch: unknown architecture '{}' (only sm90)", opt.arch));
  emu::mma_instr id{};
  if (!emu::parse_mma_instr(opt.instr, id)) {
    throw std::invalid_argument(fmt::format("--instr: unknown instruction '{}' (expected one of {})", opt.instr, instr_names.view()));
  }
  const emu::mma_model_entry& entry = emu::mma_entry(id);
  const emu::mma_model& m = entry.model;
  const std::vector<std::string> as = split_list(opt.a), bs = split_list(opt.b);
  if (as.size() > static_cast<std::size_t>(m.k) || bs.size() > static_cast<std::size_t>(m.k))
    throw std::invalid_argument(fmt::format("--a/--b: at most {} values for {}", m.k, opt.instr));

  // Inputs: every value rounded (rne) into its operand format; missing entries are +0.
  std::vector<std::uint64_t> a(static_cast<std::size_t>(m.k), 0), b(static_cast<std::size_t>(m.k), 0);
  std::vector<std::string> notes;
  const auto load = [&](const std::string& text, const format_desc& f, const std::string& label) {
    const host::exact_number x = parse_value(text, f);
    const std::uint64_t bits = to_format(f, x);
    if (x.cls == value_class::finite && (host::from_bits(f, bits).cls != value_class::finite || host::value_of(f, bits) != x.value))
      notes.push_back(fmt::format("{} {} is not exact in {}: rounded (rne) to {} = {}", label, text, f.name,
                                  host::bits_to_string(f, bits), value_text(f, bits)));
    return bits;
  };
  for (std::size_t i = 0; i < as.size(); ++i) a[i] = load(as[i], m.a_fmt, fmt::format("a[{}]", i));
  for (std::size_t i = 0; i < bs.size(); ++i) b[i] = load(bs[i], m.b_fmt, fmt::format("b[{}]", i));
  const std::uint64_t c = load(opt.c, m.c_fmt, "c");

  const emu::mma_result r = emu::mma_dot(m, c, a.data(), 1, b.data(), 1);

  // The exact value c + sum a_i b_i, when every input is finite.
  bool exact_known = true;
  host::rational exact = 0;
  const auto add_exact = [&](const format_desc& f, std::uint64_t bits, const host::rational& factor) {
    const host::exact_number x = host::from_bits(f, bits);
    if (x.cls == value_class::nan || x.cls == value_class::inf) { exact_known = false; return; }
    if (x.cls == value_class::finite) exact += x.value * factor;
  };
  add_exact(m.c_fmt, c, 1);
  for (int i = 0; i < m.k; ++i) {
    const host::exact_number y = host::from_bits(m.b_fmt, b[static_cast<std::size_t>(i)]);
    if (y.cls == value_class::nan || y.cls == value_class::inf) { exact_known = false; continue; }
    add_exact(m.a_fmt, a[static_cast<std::size_t>(i)], y.cls == value_class::finite ? y.value : host::rational(0));
  }
  const host::exact_number res = host::from_bits(m.c_fmt, r.bits);
  const bool result_finite = res.cls == value_class::finite || res.cls == value_class::zero;
  const bool have_error = exact_known && result_finite;
  host::rational error = 0;
  if (have_error) error = (res.cls == value_class::finite ? res.value : host::rational(0)) - exact;
  const std::string exact_text = exact_known ? host::to_decimal_string(exact) : std::string("undefined (NaN or Inf input)");
  const std::string error_text_s = have_error ? host::to_decimal_string(error) : std::string("undefined");
  const bool unverified = emu::mma_unverified(entry) != 0;

  if (opt.json) {
    nlohmann::json j;
    j["instr"] = opt.instr;
    j["arch"] = opt.arch;
    j["c"] = host::bits_to_string(m.c_fmt, c);
    nlohmann::json ja = nlohmann::json::array(), jb = nlohmann::json::array();
    for (auto x : a) ja.push_back(host::bits_to_string(m.a_fmt, x));
    for (auto x : b) jb.push_back(host::bits_to_string(m.b_fmt, x));
    j["a"] = ja;
    j["b"] = jb;
    j["bits"] = host::bits_to_string(m.c_fmt, r.bits);
    j["value"] = json_number(to_double(m.c_fmt, r.bits));
    j["value_exact"] = value_text(m.c_fmt, r.bits);
    j["exact"] = exact_known ? nlohmann::json(host::to_decimal_string(exact)) : nlohmann::json(nullptr);
    j["error"] = have_error ? nlohmann::json(host::to_decimal_string(error)) : nlohmann::json(nullptr);
    j["align_inexact"] = r.align_inexact;
    j["steps"] = r.steps;
    j["flags"] = flag_names(r.flags);
    j["model"] = model_json(entry);
    j["notes"] = notes;
    std::cout << j.dump() << '\n';
    return;
  }
  std::cout << fmt::format("{}  ({})\n", opt.instr, entry.ptx);
  std::cout << fmt::format("  model   {}{}\n", params_text(m), unverified ? "  [UNVERIFIED on hardware]" : "");
  for (const std::string& n : notes) std::cout << "  note    " << n << '\n';
  std::cout << fmt::format("  c       {} = {}\n", host::bits_to_string(m.c_fmt, c), value_text(m.c_fmt, c));
  for (int i = 0; i < m.k; ++i) {
    if (a[static_cast<std::size_t>(i)] == 0 && b[static_cast<std::size_t>(i)] == 0 && i >= static_cast<int>(std::max(as.size(), bs.size()))) continue;
    std::cout << fmt::format("  a[{:>2}]  {} = {}   b[{:>2}] {} = {}\n", i, host::bits_to_string(m.a_fmt, a[static_cast<std::size_t>(i)]),
                             value_text(m.a_fmt, a[static_cast<std::size_t>(i)]), i, host::bits_to_string(m.b_fmt, b[static_cast<std::size_t>(i)]),
                             value_text(m.b_fmt, b[static_cast<std::size_t>(i)]));
  }
  std::cout << fmt::format("  result  {} = {}\n", host::bits_to_string(m.c_fmt, r.bits), value_text_with_hex(m.c_fmt, r.bits));
  std::cout << fmt::format("  exact   {}\n", exact_text);
  std::cout << fmt::format("  error   {}{}\n", error_text_s, r.align_inexact ? "  (bits lost at alignment)" : "");
  std::cout.flush();
}

}  // namespace

void register_mma(CLI::App& app) {
  auto opt = std::make_shared<mma_options>();
  CLI::App* cmd = app.add_subcommand(
      "mma", "One output element of a tensor-core instruction (C + row of A . column of B), as the hardware computes it");
  cmd->add_option("--instr", opt->instr,
                  fmt::format("Instruction: {}", instr_names.view()));
  cmd->add_option("--arch", opt->arch, "Architecture whose model to use (sm90)")->capture_default_str();
  cmd->add_option("--c", opt->c, "C: a value as in `tiebreak round` (bits: are encodings of C's format)")->capture_default_str();
  cmd->add_option("--a", opt->a, "Row of A: V1,V2,... (missing entries are zero); rounded (rne) into A's format");
  cmd->add_option("--b", opt->b, "Column of B: W1,W2,... (missing entries are zero); rounded (rne) into B's format");
  cmd->add_flag("--json", opt->json, "One JSON object (with --list: an array of the models)");
  cmd->add_flag("--list", opt->list, "List the instructions and their model parameters");
  cmd->callback([opt] {
    if (opt->list) { run_list(*opt); return; }
    if (opt->instr.empty()) throw std::invalid_argument("--instr is required (or --list)");
    // main() shields "-inf"/"-nan" from CLI11 with a leading space; --a, --b and --c take them too.
    restore_negative_specials(opt->a);
    restore_negative_specials(opt->b);
    restore_negative_special(opt->c);
    run_mma(*opt);
  });
}

}  // namespace tiebreak::cli
