// SPDX-License-Identifier: Apache-2.0
/// @file Exact reference values for test expectations: doubles, floats, integers, exact_value and
/// (when Boost is available) Boost.Multiprecision floating-point numbers.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/value.hpp"

#if !defined(TIEBREAK_TESTING_NO_BOOST) && __has_include(<boost/multiprecision/number.hpp>)
#include <boost/multiprecision/number.hpp>
/// 1 when to_exact accepts Boost.Multiprecision numbers. Define TIEBREAK_TESTING_NO_BOOST to opt out.
#define TIEBREAK_TESTING_HAVE_BOOST 1
#else
#define TIEBREAK_TESTING_HAVE_BOOST 0
#endif

namespace tiebreak::testing {

/// The exact value of a double (its f64 encoding decoded; NaN keeps sign and payload, -0 its sign).
inline exact_value to_exact(double x) noexcept { return unpack(formats::f64, f64_to_bits(x)); }
/// The exact value of a float.
inline exact_value to_exact(float x) noexcept { return unpack(formats::f32, f32_to_bits(x)); }
/// Already exact.
inline exact_value to_exact(const exact_value& x) noexcept { return x; }
/// An integer, exactly (every 64-bit integer fits the 128-bit window).
template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
exact_value to_exact(I x) noexcept {
  if (x == 0) return make_zero(false);
  const bool neg = x < 0;
  const auto mag = neg ? std::uint64_t{0} - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x);
  return make_exact(neg, mag, 0);
}
/// long double is not portable (x87 80-bit, binary128 or double): convert explicitly.
exact_value to_exact(long double) = delete;

#if TIEBREAK_TESTING_HAVE_BOOST
/// A Boost.Multiprecision floating-point number (cpp_bin_float, mpfr_float, float128, cpp_dec_float).
/// The leading 125 bits become the window and anything below them the sticky bit, so rounding to
/// any tiebreak format (<= 53 bits) is decided exactly. Binary backends convert exactly; decimal
/// backends (cpp_dec_float) hold >= 50 digits, and the scaling by 2^125 is exact unless the value
/// lies within one decimal ulp of a rounding boundary.
template <class Backend, boost::multiprecision::expression_template_option ET>
exact_value to_exact(const boost::multiprecision::number<Backend, ET>& v) {
  using num = boost::multiprecision::number<Backend, ET>;
  static_assert(boost::multiprecision::number_category<num>::value ==
                    boost::multiprecision::number_kind_floating_point,
                "to_exact: only floating-point Boost.Multiprecision types are supported");
  using boost::multiprecision::frexp;
  using boost::multiprecision::ldexp;
  using boost::multiprecision::trunc;
  if ((boost::multiprecision::isnan)(v)) return make_nan(false);
  const bool sign = (boost::multiprecision::signbit)(v) != 0;
  if ((boost::multiprecision::isinf)(v)) return make_inf(sign);
  if (v == 0) return make_zero(sign);
  const num a = sign ? num(-v) : v;
  int e = 0;
  const num m = frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const num scaled = ldexp(m, 125);
  const num ip = trunc(scaled);
  const bool sticky = scaled != ip;
  const num hi = trunc(ldexp(ip, -64));
  const num lo = ip - ldexp(hi, 64);
  const u128 sig = (static_cast<u128>(hi.template convert_to<std::uint64_t>()) << 64) |
                   lo.template convert_to<std::uint64_t>();
  return make_exact(sign, sig, e - 125, sticky);
}
#endif

}  // namespace tiebreak::testing
