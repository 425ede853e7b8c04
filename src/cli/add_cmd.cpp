// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak add`: left-to-right sums with every step's exact value, alignment loss and error.

#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "tiebreak/emu/ops.hpp"
#include "tiebreak/emu/sum.hpp"
#include "tiebreak/fp/random.hpp"

namespace tiebreak::cli {

namespace {

namespace mp = boost::multiprecision;

struct add_options {
  std::string format;
  std::string accumulate;
  std::string mode = "rne";
  bool saturate = false;
  std::uint64_t seed = 0;
  bool json = false;
  std::vector<std::string> values;
};

/// Binary text of the low `n` bits of v (n <= 128).
std::string binary(u128 v, int n) {
  std::string s;
  for (int i = n - 1; i >= 0; --i) s.push_back(((v >> i) & 1) != 0 ? '1' : '0');
  return s;
}

/// What alignment shifted out of the smaller addend: the count of its significant bits (from its
/// lowest set bit up) below the result lsb and their exact signed contribution to the error (T(small) - small).
struct alignment {
  bool present = false;
  int exp_diff = 0;
  int lost_bits = 0;            ///< significand bits of the smaller addend below the result lsb
  host::rational lost = 0;      ///< their magnitude
  host::rational error = 0;     ///< T(small) - small = -(signed lost part)
  std::string lost_binary;      ///< the lost bits (when at most 64 of them)
};

alignment alignment_of(const format_desc& f, const emu::op_result& op) {
  alignment al;
  if (!op.has_alignment) return al;
  al.present = true;
  al.exp_diff = op.exp_diff;
  // The smaller addend is the operand of smaller magnitude (b on equal magnitudes, as emu::add).
  const exact_value va = unpack(f, op.a), vb = unpack(f, op.b);
  exact_value small = compare_magnitude(va, vb) < 0 ? va : vb;
  while ((small.sig & 1) == 0) {  // count significant bits only: trailing zeros lose nothing
    small.sig >>= 1;
    ++small.exp;
  }
  const int width = msb128(small.sig) + 1;
  const int below = op.round.lsb_exp - small.exp;
  al.lost_bits = below <= 0 ? 0 : (below < width ? below : width);
  if (al.lost_bits > 0) {
    const u128 bits = al.lost_bits >= 128 ? small.sig : (small.sig & low_mask128(al.lost_bits));
    al.lost = host::to_rational(make_exact(false, bits, small.exp));
    if (al.lost_bits <= 64) al.lost_binary = binary(bits, al.lost_bits);
  }
  al.error = al.lost;
  if (!small.sign) al.error = -al.lost;
  return al;
}

struct step_record {
  std::string kind;       ///< "input", "load", "add", "output"
  std::size_t index = 0;  ///< input index (input, load) or addition number (add)
  const format_desc* fmt = nullptr;
  std::uint64_t a = 0, b = 0;
  const format_desc* operand_fmt = nullptr;
  host::exact_number exact;
  round_result round;
  error_report err;
  alignment align;
};

nlohmann::json step_json(const step_record& s) {
  nlohmann::json j;
  j["kind"] = s.kind;
  j["index"] = s.index;
  j["format"] = std::string(s.fmt->name);
  if (s.kind == "add") {
    j["a"] = host::bits_to_string(*s.operand_fmt, s.a);
    j["b"] = host::bits_to_string(*s.operand_fmt, s.b);
  } else if (s.kind != "input") {
    j["from"] = host::bits_to_string(*s.operand_fmt, s.a);
  }
  j["exact"] = host::to_decimal_string(s.exact);
  j["bits"] = host::bits_to_string(*s.fmt, s.round.bits);
  j["value"] = json_number(to_double(*s.fmt, s.round.bits));
  j["value_exact"] = value_text(*s.fmt, s.round.bits);
  put_error(j, s.err);
  if (s.err.known && !s.err.infinite && s.kind == "add") {
    j["align_exp_diff"] = s.align.exp_diff;
    j["align_lost_bits"] = s.align.lost_bits;
    j["align_error"] = host::to_decimal_string(s.align.error);
    j["round_error"] = host::to_decimal_string(s.err.error - s.align.error);
  }
  j["flags"] = flag_names(s.round.flags);
  return j;
}

void print_step(const step_record& s, std::string_view mode) {
  const format_desc& f = *s.fmt;
  if (s.kind == "input") {
    std::cout << fmt::format("input {}: {} -> {} ({}): {} = {}, error {}\n", s.index, host::to_decimal_string(s.exact),
                             f.name, mode, host::bits_to_string(f, s.round.bits), value_text(f, s.round.bits),
                             error_text(s.err));
    return;
  }
  if (s.kind == "load") {
    std::cout << fmt::format("load {}: {} -> {} ({}): {} = {}, error {}\n", s.index,
                             host::bits_to_string(*s.operand_fmt, s.a), f.name, mode,
                             host::bits_to_string(f, s.round.bits), value_text(f, s.round.bits), error_text(s.err));
    return;
  }
  if (s.kind == "add") {
    std::cout << fmt::format("step {}: {} + {}\n", s.index + 1, value_text(f, s.a), value_text(f, s.b));
  } else {
    std::cout << fmt::format("output: {} {} -> {}\n", s.operand_fmt->name, value_text(*s.operand_fmt, s.a), f.name);
  }
  std::cout << fmt::format("  exact      {}\n", host::to_decimal_string(s.exact));
  if (s.kind == "add" && s.align.present) {
    if (s.align.lost_bits == 0) {
      std::cout << fmt::format("  alignment  exponent difference {}, no bits of the smaller addend below the result lsb\n",
                               s.align.exp_diff);
    } else {
      std::cout << fmt::format("  alignment  exponent difference {}, {} bit{} below the result lsb{} = {}, alignment error {}\n",
                               s.align.exp_diff, s.align.lost_bits, s.align.lost_bits == 1 ? "" : "s",
                               s.align.lost_binary.empty() ? "" : fmt::format(" (0b{})", s.align.lost_binary),
                               host::to_decimal_string(s.align.lost), host::to_decimal_string(s.align.error));
    }
  }
  std::cout << fmt::format("  result     {} = {}  ({}, {})\n", host::bits_to_string(f, s.round.bits),
                           value_text(f, s.round.bits), f.name, mode);
  std::cout << fmt::format("  rounding   error {}\n", error_text(s.err));
  std::cout << fmt::format("  flags      {}\n", flags_text(s.round.flags));
}

/// The exact sum of two operands, when both are finite or zero.
std::optional<host::exact_number> exact_sum(const format_desc& f, std::uint64_t a, std::uint64_t b) {
  const host::exact_number xa = host::from_bits(f, a), xb = host::from_bits(f, b);
  if (xa.cls == value_class::nan || xb.cls == value_class::nan) return host::exact_number{value_class::nan, false, 0, make_nan()};
  if (xa.cls == value_class::inf || xb.cls == value_class::inf) {
    if (xa.cls == value_class::inf && xb.cls == value_class::inf && xa.sign != xb.sign) {
      return host::exact_number{value_class::nan, false, 0, make_nan()};
    }
    const bool s = xa.cls == value_class::inf ? xa.sign : xb.sign;
    return host::exact_number{value_class::inf, s, 0, make_inf(s)};
  }
  host::exact_number r = host::from_rational(xa.value + xb.value);
  if (r.cls == value_class::zero) r.sign = xa.sign && xb.sign;  // sign is cosmetic for the report
  return r;
}

void run_add(const add_options& opt) {
  const format_desc fmt_in = format_by_name("--format", opt.format);
  const format_desc acc = opt.accumulate.empty() ? fmt_in : format_by_name("--accumulate", opt.accumulate);
  const round_mode mode = mode_by_name("--mode", opt.mode);
  if (opt.values.size() < 2) throw std::invalid_argument("add: needs at least two values");
  convert_options conv;
  conv.saturate = opt.saturate;
  const std::string mode_name(to_string(mode));

  std::vector<host::exact_number> parsed;
  for (const std::string& v : opt.values) parsed.push_back(parse_value(v, fmt_in));

  // sr words: the reading of value i draws philox_word(seed, 0, i), the sum's steps draw from
  // stream 1 (emu::sum's step numbers: load i, addition n + j, output 2n - 1).
  random_source rnd(mode, opt.seed, 0);
  std::vector<step_record> steps;
  // 1. Read every value in the input format (rounded once from its exact value when needed).
  std::vector<std::uint64_t> xs;
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    step_record s;
    s.kind = "input";
    s.index = i;
    s.fmt = &fmt_in;
    s.operand_fmt = &fmt_in;
    s.exact = parsed[i];
    s.round = round_pack(fmt_in, parsed[i].window, rnd.next(), conv);
    s.err = compare(fmt_in, s.round, s.exact);
    xs.push_back(s.round.bits);
    steps.push_back(std::move(s));
  }
  // 2. Load into the accumulator format (exact when it is at least as wide), 3. add left to right,
  // 4. round the accumulator to the output format once: emu::sum, recording its steps.
  const bool widen = acc.name != fmt_in.name;
  emu::sum_config cfg;
  cfg.input = fmt_in;
  cfg.accum = acc;
  cfg.output = fmt_in;
  cfg.accum_rounding = rounding{mode};
  cfg.output_rounding = rounding{mode};
  cfg.options = conv;
  cfg.order = emu::sum_order::sequential;
  if (mode == round_mode::sr) cfg.random = sr_source::philox(opt.seed, 1);
  std::uint8_t last_add_flags = 0;
  const emu::sum_result res = emu::sum(cfg, xs.data(), xs.size(), [&](const emu::sum_step& st) {
    // Without a separate accumulator, loads and the output are the identity: no lines for them.
    if (st.kind != emu::step_kind::add && !widen) return;
    step_record s;
    s.index = st.index;
    s.round = st.op.round;
    s.a = st.op.a;
    if (st.kind == emu::step_kind::load) {
      if (st.op.round.flags == 0) return;  // only narrowing loads are worth a line
      s.kind = "load";
      s.fmt = &acc;
      s.operand_fmt = &fmt_in;
      s.exact = host::from_bits(fmt_in, st.op.a);
      s.err = compare(acc, s.round, s.exact);
    } else if (st.kind == emu::step_kind::add) {
      s.kind = "add";
      s.fmt = &acc;
      s.operand_fmt = &acc;
      s.b = st.op.b;
      s.exact = *exact_sum(acc, st.op.a, st.op.b);
      s.err = compare(acc, s.round, s.exact);
      s.align = alignment_of(acc, st.op);
      last_add_flags = st.op.round.flags;
    } else {
      s.kind = "output";
      s.fmt = &fmt_in;
      s.operand_fmt = &acc;
      s.exact = host::from_bits(acc, st.op.a);
      s.err = compare(fmt_in, s.round, s.exact);
    }
    steps.push_back(std::move(s));
  });
  const std::uint64_t result = res.bits;
  const std::uint8_t result_flags = widen ? res.output.flags : last_add_flags;
  // The total error against the exact sum of the values as read in the input format.
  host::exact_number total;
  {
    std::optional<host::exact_number> t = host::from_bits(fmt_in, xs[0]);
    for (std::size_t i = 1; i < xs.size() && t; ++i) {
      const host::exact_number xi = host::from_bits(fmt_in, xs[i]);
      if (t->cls == value_class::nan || xi.cls == value_class::nan) {
        t = host::exact_number{value_class::nan, false, 0, make_nan()};
      } else if (t->cls == value_class::inf || xi.cls == value_class::inf) {
        const bool both = t->cls == value_class::inf && xi.cls == value_class::inf;
        if (both && t->sign != xi.sign) t = host::exact_number{value_class::nan, false, 0, make_nan()};
        else if (t->cls != value_class::inf) t = xi;
      } else {
        t = host::from_rational(t->value + xi.value);
      }
    }
    total = *t;
  }
  // The result grid at the exact total: the lsb_exp round_pack reports for it (its bits are unused).
  const round_result grid = round_pack(fmt_in, total.window, rne_t{}, conv);
  round_result final_r = grid;
  final_r.bits = result;
  error_report total_err = compare(fmt_in, final_r, total);

  if (opt.json) {
    nlohmann::json j;
    j["format"] = std::string(fmt_in.name);
    j["accumulate"] = std::string(acc.name);
    j["mode"] = mode_name;
    j["saturate"] = opt.saturate;
    j["inputs"] = opt.values;
    j["steps"] = nlohmann::json::array();
    for (const step_record& s : steps) j["steps"].push_back(step_json(s));
    j["exact"] = host::to_decimal_string(total);
    j["bits"] = host::bits_to_string(fmt_in, result);
    j["value"] = json_number(to_double(fmt_in, result));
    j["value_exact"] = value_text(fmt_in, result);
    put_error(j, total_err);
    j["flags"] = flag_names(result_flags);
    std::cout << j.dump() << '\n';
  } else {
    std::cout << fmt::format("sum of {} values in {}, accumulated in {}, rounding {}{}\n", xs.size(), fmt_in.name,
                             acc.name, mode_name, opt.saturate ? ", saturating" : "");
    for (const step_record& s : steps) print_step(s, mode_name);
    std::cout << fmt::format("result: {} = {}\n", host::bits_to_string(fmt_in, result), value_text(fmt_in, result));
    std::cout << fmt::format("  exact sum  {}\n", host::to_decimal_string(total));
    std::cout << fmt::format("  error      {}\n", error_text(total_err));
  }
  std::cout.flush();
}

}  // namespace

void register_add(CLI::App& app) {
  auto opt = std::make_shared<add_options>();
  CLI::App* cmd = app.add_subcommand("add", "Sum values left to right, showing every step's exact value and error");
  cmd->add_option("--format", opt->format, "Format of the values and of the result")->required();
  cmd->add_option("--accumulate", opt->accumulate,
                  "Carry the partial sums in this format and round to --format once at the end");
  cmd->add_option("--mode", opt->mode, fmt::format("Rounding mode of every step: {}", round_mode_names.view()))->capture_default_str();
  cmd->add_flag("--saturate", opt->saturate, "Saturating conversion: overflow goes to the largest finite value");
  cmd->add_option("--seed", opt->seed, "Seed of the random bits of sr (Philox4x32-10, one word per rounding step)")->capture_default_str()->check(CLI::Validator([](std::string& s) { return unsigned_number_error(s); }, "UINT"));
  cmd->add_flag("--json", opt->json, "One JSON object with every step and the final result");
  cmd->add_option("values", opt->values,
                  "At least two values: decimal, hex float, bits:ENCODING (of --format), nan, inf")
      ->required();
  cmd->callback([opt] {
    restore_negative_specials(opt->values);
    run_add(*opt);
  });
}

}  // namespace tiebreak::cli
