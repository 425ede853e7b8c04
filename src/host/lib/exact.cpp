// SPDX-License-Identifier: Apache-2.0
/// @file Exact parsing, exact values and errors as rationals, exact decimal and hex text.

#include "tiebreak/host/exact.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace tiebreak::host {

namespace {

namespace mp = boost::multiprecision;

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

[[noreturn]] void fail(std::string_view text, std::string_view why) {
  throw parse_error(fmt::format("invalid number '{}': {}", text, why));
}

integer from_u128(u128 v) {
  integer r = static_cast<std::uint64_t>(v >> 64);
  r <<= 64;
  r |= static_cast<std::uint64_t>(v);
  return r;
}

u128 to_u128(const integer& v) {
  const auto lo = static_cast<std::uint64_t>(v & integer(~std::uint64_t{0}));
  const auto hi = static_cast<std::uint64_t>(v >> 64);
  return (u128{hi} << 64) | lo;
}

long msb_of(const integer& v) { return static_cast<long>(mp::msb(v)); }

/// Reads an optional sign; returns the rest.
std::string_view take_sign(std::string_view s, bool& neg) noexcept {
  neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  return s;
}

/// nan / inf / infinity (case-insensitive); false when `body` is none of them.
bool parse_special(std::string_view body, bool neg, exact_number& out) {
  if (iequals(body, "nan")) {
    out.cls = value_class::nan;
    out.sign = neg;
    out.window = make_nan(neg);
    return true;
  }
  if (iequals(body, "inf") || iequals(body, "infinity")) {
    out.cls = value_class::inf;
    out.sign = neg;
    out.window = make_inf(neg);
    return true;
  }
  return false;
}

/// A decimal exponent after 'e': digits only; saturates at a value far beyond any accepted one.
long parse_exponent(std::string_view text, std::string_view digits) {
  bool neg = false;
  digits = take_sign(digits, neg);
  if (digits.empty()) fail(text, "exponent has no digits");
  long e = 0;
  for (char c : digits) {
    if (!is_digit(c)) fail(text, fmt::format("unexpected character '{}' in the exponent", c));
    if (e < 100'000'000) e = e * 10 + (c - '0');
  }
  return neg ? -e : e;
}

/// Removes every factor `f` from q > 0 and returns how many there were. Dividing by f, f^2, f^4, ...
/// while they divide, then by the same powers from the largest down, takes O(log count) big
/// divisions; dividing by f once per factor took count of them (37 s for 1e-100000, found by
/// tests/fuzz).
long remove_factor(integer& q, unsigned f) {
  std::vector<integer> powers{integer(f)};
  long count = 0;
  integer quot, rem;
  for (;;) {
    mp::divide_qr(q, powers.back(), quot, rem);
    if (rem != 0) break;
    q = quot;
    count += 1L << (powers.size() - 1);
    powers.push_back(powers.back() * powers.back());
  }
  for (std::size_t j = powers.size(); j-- > 0;) {  // what remains is below f^(2^(powers.size()-1))
    mp::divide_qr(q, powers[j], quot, rem);
    if (rem == 0) {
      q = quot;
      count += 1L << j;
    }
  }
  return count;
}

exact_number signed_zero(bool neg) {
  exact_number z;
  z.cls = value_class::zero;
  z.sign = neg;
  z.value = 0;
  z.window = make_zero(neg);
  return z;
}

}  // namespace

rational pow2(long e) {
  if (e >= 0) return rational(integer(1) << e);
  return rational(integer(1), integer(1) << -e);
}

exact_number from_rational(const rational& r) {
  if (r == 0) return signed_zero(false);
  exact_number out;
  out.cls = value_class::finite;
  out.sign = r < 0;
  out.value = r;
  const integer p = abs(mp::numerator(r));
  const integer q = mp::denominator(r);
  // quot = floor(p * 2^s / q) lands in [2^126, 2^128) for s = 127 - msb(p) + msb(q); one more bit
  // of shift when it is below 2^127. The remainder is exactly the sticky bit.
  long s = 127 - msb_of(p) + msb_of(q);
  integer quot, rem;
  for (;;) {
    if (s >= 0) mp::divide_qr(integer(p << s), q, quot, rem);
    else mp::divide_qr(p, integer(q << -s), quot, rem);
    if (msb_of(quot) >= 127) break;
    ++s;
  }
  bool sticky = rem != 0;
  int exp = static_cast<int>(-s);
  if (!sticky) {  // drop trailing zero bits: the window is then the shortest exact one
    const auto tz = static_cast<long>(mp::lsb(quot));
    quot >>= tz;
    exp += static_cast<int>(tz);
  }
  out.window = make_exact(out.sign, to_u128(quot), exp, sticky);
  return out;
}

exact_number parse_decimal(std::string_view text) {
  bool neg = false;
  std::string_view s = take_sign(text, neg);
  exact_number special;
  if (parse_special(s, neg, special)) return special;
  std::string digits;
  long frac_digits = 0;
  bool seen_point = false, any_digit = false;
  std::size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (is_digit(c)) {
      any_digit = true;
      if (!(digits.empty() && c == '0')) digits.push_back(c);
      if (seen_point) ++frac_digits;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!any_digit) fail(text, "expected a decimal, a hex float (0x1.8p+0), nan or inf");
  long e10 = 0;
  if (i < s.size()) {
    if (s[i] != 'e' && s[i] != 'E') fail(text, fmt::format("unexpected character '{}'", s[i]));
    e10 = parse_exponent(text, s.substr(i + 1));
  }
  if (digits.empty()) return signed_zero(neg);
  long exp10 = e10 - frac_digits;  // value = N * 10^exp10
  while (digits.size() > 1 && digits.back() == '0') {  // trailing zeros only scale the value
    digits.pop_back();
    ++exp10;
  }
  if (static_cast<long>(digits.size()) > max_significant_digits) {
    fail(text, fmt::format("more than {} significant digits are not supported", max_significant_digits));
  }
  const long lead = exp10 + static_cast<long>(digits.size()) - 1;
  if (lead > max_decimal_exponent || lead < -max_decimal_exponent) {
    fail(text, fmt::format("decimal exponent beyond +-{} is not supported", max_decimal_exponent));
  }
  const integer n(digits);
  const integer p10 = mp::pow(integer(10), static_cast<unsigned>(exp10 >= 0 ? exp10 : -exp10));
  rational v = exp10 >= 0 ? rational(n * p10) : rational(n, p10);
  if (neg) v = -v;
  return from_rational(v);
}

exact_number parse_hex(std::string_view text) {
  bool neg = false;
  std::string_view s = take_sign(text, neg);
  if (s.size() < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) fail(text, "a hex float starts with 0x");
  s.remove_prefix(2);
  integer h = 0;
  long frac_digits = 0, sig_digits = 0;
  bool seen_point = false, any_digit = false;
  std::size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    const int d = hex_digit(c);
    if (d >= 0) {
      any_digit = true;
      if (h != 0 || d != 0) ++sig_digits;
      if (sig_digits > max_significant_digits) {
        fail(text, fmt::format("more than {} significant hex digits are not supported", max_significant_digits));
      }
      h = (h << 4) | d;
      if (seen_point) ++frac_digits;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!any_digit) fail(text, "no hex digits after 0x");
  long e2 = 0;
  if (i < s.size()) {
    if (s[i] != 'p' && s[i] != 'P') fail(text, fmt::format("unexpected character '{}' in a hex float", s[i]));
    e2 = parse_exponent(text, s.substr(i + 1));
  }
  if (h == 0) return signed_zero(neg);
  const long exp2 = e2 - 4 * frac_digits;
  const long lead = exp2 + msb_of(h);
  if (lead > max_binary_exponent || lead < -max_binary_exponent) {
    fail(text, fmt::format("binary exponent beyond +-{} is not supported", max_binary_exponent));
  }
  rational v = rational(h) * pow2(exp2);
  if (neg) v = -v;
  return from_rational(v);
}

exact_number parse_real(std::string_view text) {
  bool neg = false;
  const std::string_view s = take_sign(text, neg);
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) return parse_hex(text);
  return parse_decimal(text);
}

std::uint64_t parse_bits(const format_desc& f, std::string_view text) {
  std::string_view s = text;
  int base = 10;
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty()) throw parse_error(fmt::format("invalid encoding '{}': no digits", text));
  std::uint64_t v = 0;
  for (char c : s) {
    const int d = base == 16 ? hex_digit(c) : (is_digit(c) ? c - '0' : -1);
    if (d < 0) throw parse_error(fmt::format("invalid encoding '{}': unexpected character '{}'", text, c));
    if (v > (~std::uint64_t{0} - static_cast<std::uint64_t>(d)) / static_cast<std::uint64_t>(base)) {
      throw parse_error(fmt::format("invalid encoding '{}': more than 64 bits", text));
    }
    v = v * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(d);
  }
  if ((v & ~f.encoding_mask()) != 0) {
    throw parse_error(fmt::format("invalid encoding '{}': wider than the {} bits of {}", text, f.storage_bits(), f.name));
  }
  return v;
}

rational to_rational(const exact_value& x) {
  if (x.cls == value_class::zero) return 0;
  if (x.cls != value_class::finite) throw std::domain_error("to_rational: not a finite value");
  if (x.sticky) throw std::domain_error("to_rational: value with sticky bits is not exactly known");
  rational v = rational(from_u128(x.sig)) * pow2(x.exp);
  if (x.tail_sig != 0) {
    const rational t = rational(from_u128(x.tail_sig)) * pow2(x.tail_exp);
    if (x.tail_neg) v -= t;
    else v += t;
  }
  if (x.sign) v = -v;
  return v;
}

exact_number from_bits(const format_desc& f, std::uint64_t bits) {
  exact_number out;
  out.window = unpack(f, bits);
  out.cls = out.window.cls;
  out.sign = out.window.sign;
  if (out.cls == value_class::finite) out.value = to_rational(out.window);
  return out;
}

rational value_of(const format_desc& f, std::uint64_t bits) {
  const exact_value v = unpack(f, bits);
  if (v.cls == value_class::nan || v.cls == value_class::inf) {
    throw std::domain_error(fmt::format("value_of: {} encoding {} is not finite", f.name, bits_to_string(f, bits)));
  }
  return to_rational(v);
}

rational result_ulp(const format_desc& f, const round_result& r) {
  return r.overflow() ? pow2(f.emax() - f.man_bits) : pow2(r.lsb_exp);
}

rational rounding_error(const format_desc& f, const round_result& r, const rational& exact) {
  return value_of(f, r.bits) - exact;
}

double to_double(const rational& r) {
  if (r == 0) return 0.0;
  const exact_number x = from_rational(r);
  return bits_to_f64(round_pack(formats::f64, x.window, rne_t{}).bits);
}

bool has_finite_decimal(const rational& r) {
  integer q = mp::denominator(r);
  q >>= static_cast<unsigned>(mp::lsb(q));
  remove_factor(q, 5);
  return q == 1;
}

bool is_dyadic(const rational& r) {
  const integer q = mp::denominator(r);
  return (q >> static_cast<unsigned>(mp::lsb(q))) == 1;
}

std::string to_decimal_string(const rational& r) {
  if (r == 0) return "0";
  if (!has_finite_decimal(r)) throw std::domain_error("to_decimal_string: no finite decimal expansion");
  const bool neg = r < 0;
  integer p = abs(mp::numerator(r));
  integer q = mp::denominator(r);
  long a = static_cast<long>(mp::lsb(q));
  q >>= a;
  const long b = remove_factor(q, 5);
  const long k = std::max(a, b);
  // value = p / (2^a 5^b) = p * 2^(k-a) * 5^(k-b) / 10^k.
  p *= mp::pow(integer(5), static_cast<unsigned>(k - b));
  p <<= (k - a);
  std::string digits = p.str();
  long exp10 = -k;  // value = digits * 10^exp10
  while (digits.size() > 1 && digits.back() == '0') {
    digits.pop_back();
    ++exp10;
  }
  const long n = static_cast<long>(digits.size());
  const long lead = exp10 + n - 1;
  std::string out = neg ? "-" : "";
  if (lead >= -6 && lead <= 20) {
    if (exp10 >= 0) {
      out += digits + std::string(static_cast<std::size_t>(exp10), '0');
    } else if (lead >= 0) {
      out += digits.substr(0, static_cast<std::size_t>(lead + 1)) + "." + digits.substr(static_cast<std::size_t>(lead + 1));
    } else {
      out += "0." + std::string(static_cast<std::size_t>(-lead - 1), '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{}", lead < 0 ? "-" : "+", lead < 0 ? -lead : lead);
  }
  return out;
}

std::string to_hex_string(const rational& r) {
  if (r == 0) return "0x0p+0";
  const bool neg = r < 0;
  const integer p = abs(mp::numerator(r));
  const integer q = mp::denominator(r);
  const long a = static_cast<long>(mp::lsb(q));
  if ((q >> a) != 1) throw std::domain_error("to_hex_string: not a dyadic rational");
  const long m = msb_of(p);
  const long e = m - a;
  integer frac = p - (integer(1) << m);
  std::string out = neg ? "-0x1" : "0x1";
  if (frac != 0) {
    const long nd = (m + 3) / 4;  // hex digits for m fraction bits
    frac <<= (4 * nd - m);
    std::string h = fmt::format("{:0>{}}", frac.str(0, std::ios_base::hex), static_cast<std::size_t>(nd));
    while (!h.empty() && h.back() == '0') h.pop_back();
    out += "." + h;
  }
  out += fmt::format("p{}{}", e < 0 ? "-" : "+", e < 0 ? -e : e);
  return out;
}

std::string bits_to_string(const format_desc& f, std::uint64_t bits) {
  return fmt::format("0x{:0{}x}", bits, static_cast<std::size_t>((f.storage_bits() + 3) / 4));
}

std::string to_decimal_string(const exact_number& x) {
  switch (x.cls) {
    case value_class::nan: return x.sign ? "-nan" : "nan";
    case value_class::inf: return x.sign ? "-inf" : "inf";
    case value_class::zero: return x.sign ? "-0" : "0";
    default: return to_decimal_string(x.value);
  }
}

}  // namespace tiebreak::host
