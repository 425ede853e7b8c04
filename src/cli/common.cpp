// SPDX-License-Identifier: Apache-2.0
/// @file Helpers shared by the CLI subcommands.

#include "common.hpp"
#include "commands.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace tiebreak::cli {

format_desc format_by_name(std::string_view option, std::string_view name) {
  format_id id{};
  if (!parse_format(name, id)) {
    throw std::invalid_argument(
        fmt::format("{}: unknown format '{}' (expected one of {})", option, name, format_names.view()));
  }
  return desc_of(id);
}

round_mode mode_by_name(std::string_view option, std::string_view name) {
  round_mode m{};
  if (!parse_round_mode(name, m)) {
    throw std::invalid_argument(
        fmt::format("{}: unknown rounding mode '{}' (expected one of {})", option, name, round_mode_names.view()));
  }
  return m;
}

std::string finite_number_error(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) return "'" + text + "' is not a number";
  if (!std::isfinite(v)) return "'" + text + "' is not a finite number";
  return {};
}

std::string unsigned_number_error(const std::string& text) {
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const std::string digits = hex ? text.substr(2) : text;
  const bool well_formed = !digits.empty() && std::all_of(digits.begin(), digits.end(), [&](char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    return hex ? std::isxdigit(u) != 0 : std::isdigit(u) != 0;
  });
  if (!well_formed) return "'" + text + "' is not a non-negative integer";
  errno = 0;
  (void)std::strtoull(digits.c_str(), nullptr, hex ? 16 : 10);
  if (errno == ERANGE) return "'" + text + "' is beyond 2^64 - 1";
  return {};
}

host::exact_number parse_value(std::string_view text, const format_desc& from) {
  constexpr std::string_view prefix = "bits:";
  if (text.substr(0, prefix.size()) == prefix) {
    return host::from_bits(from, host::parse_bits(from, text.substr(prefix.size())));
  }
  return host::parse_real(text);
}

namespace {
std::vector<std::string>& stored_command_line() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

void set_command_line(int argc, const char* const* argv) { stored_command_line().assign(argv, argv + argc); }
const std::vector<std::string>& command_line() { return stored_command_line(); }

void restore_negative_special(std::string& value) {
  if (value.size() > 1 && value[0] == ' ' && value[1] == '-') value.erase(value.begin());
}

void restore_negative_specials(std::vector<std::string>& values) {
  for (std::string& v : values) restore_negative_special(v);
}

std::vector<std::string> flag_names(std::uint8_t flags) {
  std::vector<std::string> out;
  if (flags & flag_inexact) out.emplace_back("inexact");
  if (flags & flag_underflow) out.emplace_back("underflow");
  if (flags & flag_overflow) out.emplace_back("overflow");
  if (flags & flag_invalid) out.emplace_back("invalid");
  return out;
}

std::string flags_text(std::uint8_t flags) {
  const auto names = flag_names(flags);
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, " "));
}

std::string value_text(const format_desc& f, std::uint64_t bits) {
  return host::to_decimal_string(host::from_bits(f, bits));
}

std::string value_text_with_hex(const format_desc& f, std::uint64_t bits) {
  const host::exact_number x = host::from_bits(f, bits);
  if (x.cls != value_class::finite) return host::to_decimal_string(x);
  return fmt::format("{} ({})", host::to_decimal_string(x.value), host::to_hex_string(x.value));
}

error_report compare(const format_desc& f, const round_result& r, const host::exact_number& exact) {
  error_report e;
  const bool result_nan = f.is_nan(r.bits);
  const bool result_inf = f.is_inf(r.bits);
  if (exact.cls == value_class::nan || result_nan) return e;  // no error is defined
  if (exact.cls == value_class::inf) {
    e.known = true;
    if (result_inf) {
      e.direction = "exact";
      return e;
    }
    // Saturated: a finite result for an infinite input is infinitely far toward zero.
    e.infinite = true;
    e.sign = exact.sign ? 1 : -1;
    e.direction = "toward";
    return e;
  }
  e.known = true;
  if (result_inf) {
    e.infinite = true;
    e.sign = f.sign_of(r.bits) ? -1 : 1;
    e.direction = "away";
    return e;
  }
  e.error = host::rounding_error(f, r, exact.value);
  e.sign = e.error > 0 ? 1 : (e.error < 0 ? -1 : 0);
  // The ulp of an exact zero is the subnormal grid 2^(emin - man_bits).
  e.ulps = e.error / (exact.cls == value_class::finite ? host::result_ulp(f, r) : host::pow2(f.emin() - f.man_bits));
  if (e.sign == 0) e.direction = "exact";
  else e.direction = ((e.sign > 0) == !exact.sign) ? "away" : "toward";
  return e;
}

void put_error(nlohmann::json& j, const error_report& e) {
  // "error" and "error_ulps_exact" are exact decimal texts (host::to_decimal_string spells the
  // non-finite ones "nan", "inf", "-inf" too); "error_ulps" is a double.
  if (!e.known) {
    j["error"] = "nan";
    j["error_ulps"] = json_number(std::numeric_limits<double>::quiet_NaN());
    j["error_ulps_exact"] = "nan";
    j["direction"] = nullptr;
    return;
  }
  if (e.infinite) {
    const char* s = e.sign > 0 ? "inf" : "-inf";
    j["error"] = s;
    j["error_ulps"] = json_number(e.sign > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity());
    j["error_ulps_exact"] = s;
  } else {
    j["error"] = host::to_decimal_string(e.error);
    j["error_ulps"] = json_number(host::to_double(e.ulps));
    j["error_ulps_exact"] = host::to_decimal_string(e.ulps);
  }
  j["direction"] = e.direction;
}

std::string error_text(const error_report& e) {
  if (!e.known) return "undefined (NaN)";
  if (e.infinite) return fmt::format("{}inf ({})", e.sign > 0 ? "+" : "-", e.direction == "away" ? "away from zero" : "toward zero");
  if (e.sign == 0) return "0 (exact)";
  return fmt::format("{} = {} ulp ({})", host::to_decimal_string(e.error), host::to_decimal_string(e.ulps),
                     e.direction == "away" ? "away from zero" : "toward zero");
}

void run_command(const std::function<void()>& body) {
  try {
    body();
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    std::fflush(stdout);
    throw std::runtime_error(msg);  // main() prints it on one line and exits with code 2
  }
}

}  // namespace tiebreak::cli
