// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak round`: rounds exact values (decimal, hex float, raw bits) into a format.

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"

namespace tiebreak::cli {

namespace {

struct round_options {
  std::string to;
  std::string from = "f32";
  std::string mode = "rne";
  bool saturate = false;
  std::uint64_t seed = 0;
  bool json = false;
  std::vector<std::string> values;
};

void run_round(const round_options& opt) {
  const format_desc to = format_by_name("--to", opt.to);
  const format_desc from = format_by_name("--from", opt.from);
  const round_mode mode = mode_by_name("--mode", opt.mode);
  convert_options conv;
  conv.saturate = opt.saturate;
  // Parse every value first: a bad one fails the command before anything is printed.
  std::vector<host::exact_number> inputs;
  inputs.reserve(opt.values.size());
  for (const std::string& v : opt.values) inputs.push_back(parse_value(v, from));

  random_source rnd(mode, opt.seed);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const host::exact_number& x = inputs[i];
    // The one rounding decision: the core rounds the exact window (sticky bit exact) once.
    const round_result r = round_pack(to, x.window, rnd.next(), conv);
    const error_report err = compare(to, r, x);
    if (opt.json) {
      nlohmann::json j;
      j["input"] = opt.values[i];
      j["to"] = std::string(to.name);
      j["mode"] = std::string(to_string(mode));
      j["saturate"] = opt.saturate;
      j["exact"] = host::to_decimal_string(x);
      if (x.cls == value_class::finite && host::is_dyadic(x.value)) {
        j["exact_hex"] = host::to_hex_string(x.value);
      }
      j["bits"] = host::bits_to_string(to, r.bits);
      j["value"] = json_number(to_double(to, r.bits));
      j["value_exact"] = value_text(to, r.bits);
      put_error(j, err);
      j["flags"] = flag_names(r.flags);
      std::cout << j.dump() << '\n';
    } else {
      std::string exact = host::to_decimal_string(x);
      if (x.cls == value_class::finite && host::is_dyadic(x.value)) {
        exact += fmt::format(" ({})", host::to_hex_string(x.value));
      }
      std::cout << fmt::format("{} -> {} ({}{})\n", opt.values[i], to.name, to_string(mode),
                               opt.saturate ? ", saturating" : "");
      std::cout << fmt::format("  exact   {}\n", exact);
      std::cout << fmt::format("  result  {} = {}\n", host::bits_to_string(to, r.bits), value_text_with_hex(to, r.bits));
      std::cout << fmt::format("  error   {}\n", error_text(err));
      std::cout << fmt::format("  flags   {}\n", flags_text(r.flags));
    }
  }
  std::cout.flush();
}

}  // namespace

void register_round(CLI::App& app) {
  auto opt = std::make_shared<round_options>();
  CLI::App* cmd = app.add_subcommand("round", "Round values into a format, once, from their exact value");
  cmd->add_option("--to", opt->to, fmt::format("Target format: {}", format_names.view()))->required();
  cmd->add_option("--mode", opt->mode, fmt::format("Rounding mode: {}", round_mode_names.view()))->capture_default_str();
  cmd->add_option("--from", opt->from, "Format of bits:ENCODING values")->capture_default_str();
  cmd->add_flag("--saturate", opt->saturate, "Saturating conversion: overflow and Inf go to the largest finite value");
  cmd->add_option("--seed", opt->seed, "Seed of the random bits of sr (Philox4x32-10, one word per rounding)")->capture_default_str()->check(CLI::Validator([](std::string& s) { return unsigned_number_error(s); }, "UINT"));
  cmd->add_flag("--json", opt->json, "One JSON object per value, one per line");
  cmd->add_option("values", opt->values,
                  "Decimal (0.1, 1e-3), C99 hex float (0x1.02p+0), bits:0x3f808000 (an encoding of --from), nan, inf")
      ->required();
  cmd->callback([opt] {
    restore_negative_specials(opt->values);
    run_round(*opt);
  });
}

}  // namespace tiebreak::cli
