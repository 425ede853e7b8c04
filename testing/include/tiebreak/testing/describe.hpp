// SPDX-License-Identifier: Apache-2.0
/// @file Names of formats and modes for test code, and human-readable dumps of encodings and roundings.
///
/// No GoogleTest dependency: the matchers (matchers.hpp), sweeps and generators share these.
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/names.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::testing {

/// A format named the way the CLI, JSON and Python name it ("bf16"), or by its enum or descriptor.
/// Precondition: a name is one of tiebreak::format_names (all_format_ids); anything else throws
/// std::invalid_argument (inside a test, GoogleTest reports the exception as a failure).
struct format_spec {
  format_desc desc;
  format_spec(const format_desc& d) : desc(d) {}  // NOLINT(google-explicit-constructor)
  format_spec(format_id id) : desc(desc_of(id)) {}  // NOLINT(google-explicit-constructor)
  format_spec(std::string_view name) : desc(parse(name)) {}  // NOLINT(google-explicit-constructor)
  format_spec(const char* name) : desc(parse(name)) {}  // NOLINT(google-explicit-constructor)
  format_spec(const std::string& name) : desc(parse(name)) {}  // NOLINT(google-explicit-constructor)

 private:
  static format_desc parse(std::string_view name) {
    format_id id{};
    if (!parse_format(name, id)) {
      throw std::invalid_argument("tiebreak::testing: unknown format \"" + std::string(name) +
                                  "\" (known: " + std::string(format_names.view()) + ")");
    }
    return desc_of(id);
  }
};

/// A rounding named "rne" (etc.), or given as round_mode, a `rounding` or a policy type (rne_t{}).
/// "sr" by name or enum carries no random bits: matchers then accept either stochastic outcome
/// (see IsRoundedFrom); pass `rounding{round_mode::sr, random}` to pin one. Unknown names throw
/// std::invalid_argument.
struct mode_spec {
  rounding r;
  bool sr_any = false;  ///< "sr" without random bits: both neighbours are legal results
  mode_spec(round_mode m) : r{m, 0}, sr_any(m == round_mode::sr) {}  // NOLINT
  mode_spec(rounding rr) : r(rr) {}  // NOLINT
  mode_spec(std::string_view name) : mode_spec(parse(name)) {}  // NOLINT
  mode_spec(const char* name) : mode_spec(parse(name)) {}  // NOLINT
  mode_spec(const std::string& name) : mode_spec(parse(name)) {}  // NOLINT
  template <class Policy, class = std::enable_if_t<std::is_convertible_v<Policy, rounding> &&
                                                   !std::is_same_v<Policy, rounding>>>
  mode_spec(const Policy& p) : r(static_cast<rounding>(p)) {}  // NOLINT

 private:
  static round_mode parse(std::string_view name) {
    round_mode m{};
    if (!parse_round_mode(name, m)) {
      throw std::invalid_argument("tiebreak::testing: unknown rounding mode \"" + std::string(name) +
                                  "\" (known: " + std::string(round_mode_names.view()) + ")");
    }
    return m;
  }
};

/// "0x3f81" with as many hex digits as the format's container needs.
inline std::string hex_bits(const format_desc& f, std::uint64_t bits) {
  const int digits = (f.storage_bits() + 3) / 4;
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(bits));
  return buf;
}

/// The binary fields "s|exponent|fraction" of an encoding; tf32's zero padding is shown after a
/// second bar ("0|01111111|0000000000|0000000000000").
inline std::string field_bits(const format_desc& f, std::uint64_t bits) {
  std::string s;
  const int total = f.storage_bits();
  for (int i = total - 1; i >= 0; --i) {
    s += ((bits >> i) & 1) ? '1' : '0';
    if (i == total - 1 || i == f.man_bits + f.pad || (f.pad > 0 && i == f.pad)) s += '|';
  }
  return s;
}

/// A double printed exactly enough to round-trip, plus its hex-float form: "1.0078125 (0x1.02p+0)".
inline std::string decimal(double x) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.17g (%a)", x, x);
  return buf;
}

/// "0x3f81 = 0|01111111|0000001 = 1.0078125 (0x1.02p+0)".
inline std::string describe_bits(const format_desc& f, std::uint64_t bits) {
  return hex_bits(f, bits) + " = " + field_bits(f, bits) + " = " + decimal(to_double(f, bits));
}

/// Position of an encoding on the format's number line, in ulps from +0 (sign-magnitude order).
/// -0 and +0 are both 0. Precondition: `bits` is not a NaN.
inline std::int64_t ordinal(const format_desc& f, std::uint64_t bits) {
  const auto mag = static_cast<std::int64_t>((bits & ~f.sign_mask() & f.encoding_mask()) >> f.pad);
  return f.sign_of(bits) ? -mag : mag;
}

/// "got - expected = -1 ulp", or why no distance exists (NaN, infinities count as one step past max).
inline std::string ulp_distance_text(const format_desc& f, std::uint64_t got, std::uint64_t expected) {
  if (f.is_nan(got) || f.is_nan(expected)) return "distance: n/a (NaN involved)";
  const std::int64_t d = ordinal(f, got) - ordinal(f, expected);
  std::string s = "distance: got - expected = " + std::to_string(d) + (d == 1 || d == -1 ? " ulp" : " ulps");
  if (d == 0 && got != expected) s += " (zeros of opposite sign)";
  return s;
}

/// Exact value as text: exact decimal when it is a double, else "~" and the nearest double.
inline std::string describe_exact(const exact_value& x) {
  switch (x.cls) {
    case value_class::nan: return x.sign ? "-NaN" : "NaN";
    case value_class::inf: return x.sign ? "-Inf" : "+Inf";
    case value_class::zero: return x.sign ? "-0" : "+0";
    default: break;
  }
  const round_result d = round_pack(formats::f64, x, rne_t{});
  return std::string(d.inexact() ? "~" : "") + decimal(to_double(formats::f64, d.bits));
}

/// The M/R/S bits of one rounding (CUTLASS's notation) and what the mode did with them:
/// "M/R/S = lsb 0, guard 1, round 0, sticky 1 -> +1 ulp (rne)". M is the last kept bit before
/// rounding, R the guard (first discarded) bit, S the OR of everything below it (round | sticky).
inline std::string describe_rounding(const format_desc& f, const exact_value& x, const round_result& r,
                                     rounding mode) {
  if (x.cls != value_class::finite) return "no rounding step (special or zero input)";
  const round_result t = round_pack(f, x, rz_t{});
  const int lsb = static_cast<int>(f.frac_of(t.bits) & 1);
  std::string s = "M/R/S: lsb(M)=" + std::to_string(lsb) + " guard(R)=" + std::to_string(r.guard) +
                  " round=" + std::to_string(r.round_bit) + " sticky=" + std::to_string(r.sticky) +
                  " (S=" + std::to_string(r.round_bit || r.sticky) + ")";
  if (!r.inexact()) {
    s += ", exact";
  } else {
    s += r.guard && !r.round_bit && !r.sticky ? ", exact tie" : "";
    s += ", " + std::string(to_string(mode.mode)) + " step " + std::to_string(r.step) + " ulp";
  }
  if (r.overflow()) s += ", overflow";
  if (r.underflow()) s += ", underflow";
  return s;
}

}  // namespace tiebreak::testing
