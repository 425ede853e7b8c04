// SPDX-License-Identifier: Apache-2.0
/// @file Exact host arithmetic: parse decimals and hex floats exactly, exact values and errors as rationals.
///
/// Every number here is exact: a decimal such as 0.1 is kept as the rational 1/10, a hex float as a
/// dyadic rational, an encoding as its exact value. Rounding into a format is *not* done here: a
/// parsed number carries an exact_value window (128-bit significand + sticky bit) that is handed to
/// tiebreak::round_pack, so the core makes every rounding decision. What this header adds is the
/// reference side: the exact value, the exact error `result - exact`, and exact decimal/hex text.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <boost/multiprecision/cpp_int.hpp>

#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"

namespace tiebreak::host {

using integer = boost::multiprecision::cpp_int;
using rational = boost::multiprecision::cpp_rational;

/// A text that is not a number of the accepted grammar. what() is one line naming the text.
class parse_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Largest accepted decimal exponent magnitude of a parsed decimal (|leading digit exponent|),
/// largest binary exponent magnitude of a parsed hex float, and most significant digits of either.
/// Every format overflows or underflows long before (f64 spans 10^-324 .. 10^308, 2^-1074 .. 2^1024).
/// The limits keep the exact reference of one value (parse, round, error, exact text) well under a
/// second: at the former limits (10^±100000, 2^±400000) one `tiebreak round` took 4 to 37 s, found
/// by tests/fuzz (docs/fuzzing.md).
inline constexpr long max_decimal_exponent = 10000;
inline constexpr long max_binary_exponent = 40000;
inline constexpr long max_significant_digits = 10000;

/// A number read exactly from text or from an encoding.
///
/// `cls` and `sign` classify it (zero keeps its sign: "-0"); for finite numbers `value` is the
/// exact signed value, and `window` is the same number as a tiebreak::exact_value ready for
/// round_pack: its 128-bit significand holds the leading bits and `window.sticky` is set exactly when
/// the value has more (non-zero) bits below them, so round_pack rounds correctly in every mode.
/// For NaN, `window` is a quiet NaN of that sign.
struct exact_number {
  value_class cls = value_class::zero;
  bool sign = false;
  rational value = 0;
  exact_value window{};
};

/// Parses a decimal: `[+-]digits[.digits][(e|E)[+-]digits]` (at least one digit in the mantissa)
/// or, case-insensitively, `[+-]nan`, `[+-]inf`, `[+-]infinity`. The value N * 10^E is kept exactly.
/// Throws parse_error for anything else, for decimal exponents beyond max_decimal_exponent and for
/// more than max_significant_digits digits (leading and trailing zeros not counted).
[[nodiscard]] exact_number parse_decimal(std::string_view text);

/// Parses a C99 hex float `[+-]0x hexdigits[.hexdigits][(p|P)[+-]digits]` (any number of hex digits;
/// the binary exponent is optional) exactly, never through strtod. Throws parse_error otherwise, and
/// for binary exponents beyond max_binary_exponent or more than max_significant_digits hex digits.
[[nodiscard]] exact_number parse_hex(std::string_view text);

/// Parses a decimal, a hex float or a special (nan, inf): dispatches on the "0x" prefix.
[[nodiscard]] exact_number parse_real(std::string_view text);

/// Parses an unsigned integer encoding: hex with a 0x prefix, else decimal. Throws parse_error for
/// anything else or when a bit outside `f.encoding_mask()` is set.
[[nodiscard]] std::uint64_t parse_bits(const format_desc& f, std::string_view text);

/// The exact number held by an encoding of `f` (NaN and Inf classified, zeros signed).
[[nodiscard]] exact_number from_bits(const format_desc& f, std::uint64_t bits);

/// An exact finite rational as a number with its round_pack window (zero for 0, sign of r).
[[nodiscard]] exact_number from_rational(const rational& r);

/// The exact value of a finite exact_value (window and tail). Precondition: x.cls is zero or finite
/// and x.sticky is false (a sticky value is not exactly known); throws std::domain_error otherwise.
[[nodiscard]] rational to_rational(const exact_value& x);

/// 2^e as a rational.
[[nodiscard]] rational pow2(long e);

/// The exact value of a finite encoding of `f`. Throws std::domain_error for NaN and Inf.
[[nodiscard]] rational value_of(const format_desc& f, std::uint64_t bits);

/// One ulp of a rounding's result grid: 2^lsb_exp, or 2^(emax - man_bits) when it overflowed (the
/// grid of the largest finite value, as round_result::error_ulps uses). Precondition: r describes the
/// rounding of a finite non-zero value (r.finite_input).
[[nodiscard]] rational result_ulp(const format_desc& f, const round_result& r);

/// The exact error `result - exact` of a rounding into `f` whose result is finite. Precondition:
/// `f.is_nan(r.bits)` and `f.is_inf(r.bits)` are false; throws std::domain_error otherwise.
[[nodiscard]] rational rounding_error(const format_desc& f, const round_result& r, const rational& exact);

/// A rational as a double, rounded once to nearest even by tiebreak::round_pack (overflow to +-inf).
[[nodiscard]] double to_double(const rational& r);

/// True when r has a finite decimal expansion (its reduced denominator is 2^a * 5^b).
[[nodiscard]] bool has_finite_decimal(const rational& r);

/// True when r is a dyadic rational (its reduced denominator is a power of two).
[[nodiscard]] bool is_dyadic(const rational& r);

/// Exact decimal text of r. Precondition: has_finite_decimal(r) (throws std::domain_error
/// otherwise). Plain notation ("0.1", "-2.0078125", "448") when the decimal exponent of the leading
/// digit is within [-6, 20], scientific ("1.5e-45", digits all significant) outside; never rounded.
[[nodiscard]] std::string to_decimal_string(const rational& r);

/// Exact C99 hex float text of a dyadic rational: "0x1.02p+0", "-0x1p-149", "0x0p+0".
/// Precondition: the reduced denominator is a power of two (throws std::domain_error otherwise).
[[nodiscard]] std::string to_hex_string(const rational& r);

/// Encoding text as the CLI prints it: "0x" and the hex digits of the format's storage width.
[[nodiscard]] std::string bits_to_string(const format_desc& f, std::uint64_t bits);

/// Text of a special or signed zero for an exact_number's class ("nan", "-inf", "-0"), or the exact
/// decimal of a finite one.
[[nodiscard]] std::string to_decimal_string(const exact_number& x);

}  // namespace tiebreak::host
