// SPDX-License-Identifier: Apache-2.0
/// @file GoogleTest matchers: IsBitExact, IsRoundedFrom, IsRoundingOf (for Pointwise), HasUnbiasedError.
///
/// The matched value of the bit matchers is a result's bit pattern: any trivially copyable type of
/// 1, 2, 4 or 8 bytes, read by its object representation (uint16_t for 16-bit formats, uint32_t or
/// float for f32, __nv_bfloat16 or c10::BFloat16 work as they are). Failure messages show both
/// encodings in hex and as sign|exponent|fraction fields, their decimal values, the M/R/S bits of the
/// rounding and the distance in ulps.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"
#include "tiebreak/testing/describe.hpp"
#include "tiebreak/testing/exact.hpp"
#include "tiebreak/testing/stats.hpp"

namespace tiebreak::testing {

namespace detail {

template <class T>
inline constexpr bool is_bit_pattern_v = std::is_trivially_copyable_v<T> && !std::is_same_v<T, bool> &&
                                         (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

/// The object representation of `v` as an unsigned integer (little- or big-endian alike).
template <class T>
std::uint64_t bits_of(const T& v) noexcept {
  static_assert(is_bit_pattern_v<T>, "tiebreak::testing: the matched value must be a 1/2/4/8-byte bit pattern");
  if constexpr (sizeof(T) == 1) { std::uint8_t u; std::memcpy(&u, &v, 1); return u; }
  else if constexpr (sizeof(T) == 2) { std::uint16_t u; std::memcpy(&u, &v, 2); return u; }
  else if constexpr (sizeof(T) == 4) { std::uint32_t u; std::memcpy(&u, &v, 4); return u; }
  else { std::uint64_t u; std::memcpy(&u, &v, 8); return u; }
}

/// The format a bit pattern is read as when none is given: float/double are f32/f64; otherwise by
/// width (8 bytes f64, 4 bytes f32, 2 bytes bf16, 1 byte e4m3).
template <class T>
format_desc default_format_for() noexcept {
  if constexpr (sizeof(T) == 8) return formats::f64;
  else if constexpr (sizeof(T) == 4) return formats::f32;
  else if constexpr (sizeof(T) == 2) return formats::bf16;
  else return formats::e4m3;
}

template <class T>
bool check_width(const format_desc& f, std::uint64_t got, ::testing::MatchResultListener* l) {
  if (static_cast<int>(sizeof(T) * 8) < f.storage_bits()) {
    *l << "a " << sizeof(T) * 8 << "-bit value cannot hold a " << f.storage_bits() << "-bit " << f.name
       << " encoding";
    return false;
  }
  if ((got & ~f.encoding_mask()) != 0) {
    *l << "the value has bits set above the " << f.storage_bits() << "-bit " << f.name << " encoding";
    return false;
  }
  return true;
}

/// IsRoundedFrom's implementation (a gmock polymorphic matcher).
class rounded_from_matcher {
 public:
  rounded_from_matcher(const exact_value& x, const format_desc& f, const mode_spec& m,
                       const convert_options& o)
      : exact_(x), f_(f), mode_(m), opts_(o) {
    res_ = round_pack(f_, exact_, mode_.r, opts_);
    if (mode_.sr_any) {
      // Every random word gives one of these two: 0 never carries, 0xffffffff carries whenever any of
      // the first 32 discarded bits is set (round_pack's sr rule).
      alt_ = round_pack(f_, exact_, rounding{round_mode::sr, 0xffffffffu}, opts_);
    } else {
      alt_ = res_;
    }
  }

  template <class T>
  bool MatchAndExplain(const T& value, ::testing::MatchResultListener* l) const {
    const std::uint64_t got = bits_of(value);
    if (!check_width<T>(f_, got, l)) return false;
    const bool ok = got == res_.bits || got == alt_.bits;
    if (!l->IsInterested()) return ok;
    if (ok) {
      *l << "which is " << describe_bits(f_, got);
      return true;
    }
    *l << "\n  got      " << describe_bits(f_, got) << "\n  expected " << describe_bits(f_, res_.bits);
    if (alt_.bits != res_.bits) *l << "\n        or " << describe_bits(f_, alt_.bits) << " (sr: either neighbour)";
    *l << "\n  exact    " << describe_exact(exact_) << "\n  " << describe_rounding(f_, exact_, res_, mode_.r)
       << "\n  " << ulp_distance_text(f_, got, res_.bits);
    return false;
  }

  void DescribeTo(std::ostream* os) const { describe(os, "is the "); }
  void DescribeNegationTo(std::ostream* os) const { describe(os, "is not the "); }

 private:
  void describe(std::ostream* os, const char* lead) const {
    *os << lead << f_.name << " encoding " << describe_bits(f_, res_.bits);
    if (alt_.bits != res_.bits) *os << " or " << describe_bits(f_, alt_.bits);
    *os << ", " << to_string(mode_.r.mode) << "-rounded from " << describe_exact(exact_);
  }

  exact_value exact_;
  format_desc f_;
  mode_spec mode_;
  convert_options opts_;
  round_result res_, alt_;
};

class bit_exact_matcher {
 public:
  bit_exact_matcher(std::uint64_t bits, bool has_format, const format_desc& f)
      : bits_(bits), has_format_(has_format), f_(f) {}

  template <class T>
  bool MatchAndExplain(const T& value, ::testing::MatchResultListener* l) const {
    const format_desc f = has_format_ ? f_ : default_format_for<T>();
    const std::uint64_t got = bits_of(value);
    if (!check_width<T>(f, got, l)) return false;
    const bool ok = got == bits_;
    if (!l->IsInterested()) return ok;
    if (ok) {
      *l << "which is " << describe_bits(f, got);
      return true;
    }
    *l << "\n  got      " << describe_bits(f, got) << "\n  expected " << describe_bits(f, bits_)
       << "\n  differing bits " << field_bits(f, got ^ bits_) << "\n  " << ulp_distance_text(f, got, bits_);
    return false;
  }
  void DescribeTo(std::ostream* os) const {
    if (has_format_) {
      *os << "has the bits " << describe_bits(f_, bits_);
    } else {
      std::ostringstream hex;
      hex << std::hex << "0x" << bits_;
      *os << "has the bits " << hex.str();
    }
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have ";
    std::ostringstream s;
    DescribeTo(&s);
    *os << s.str().substr(9);  // drop "has "
  }

 private:
  std::uint64_t bits_;
  bool has_format_;
  format_desc f_;
};

class unbiased_error_matcher {
 public:
  unbiased_error_matcher(double alpha, double min_effect, effect_measure m)
      : alpha_(alpha), min_effect_(min_effect), measure_(m) {}

  template <class Range>
  bool MatchAndExplain(const Range& samples, ::testing::MatchResultListener* l) const {
    const bias_test_result r = test_bias(samples, alpha_, min_effect_, measure_);
    *l << r.summary();
    return !r.biased;
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has an unbiased mean error (two-sided t test at alpha=" << alpha_ << " does not reject 0, or effect "
        << (measure_ == effect_measure::standardized ? "|mean|/sd" : "|mean|") << " <= " << min_effect_ << ")";
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "has a biased mean error (p < " << alpha_ << " and effect > " << min_effect_ << ")";
  }

 private:
  double alpha_, min_effect_;
  effect_measure measure_;
};

class rounding_of_matcher {
 public:
  rounding_of_matcher(const format_desc& f, const mode_spec& m, const convert_options& o)
      : f_(f), mode_(m), opts_(o) {}
  template <class Tuple>
  bool MatchAndExplain(const Tuple& t, ::testing::MatchResultListener* l) const {
    const rounded_from_matcher m(to_exact(std::get<1>(t)), f_, mode_, opts_);
    return m.MatchAndExplain(std::get<0>(t), l);
  }
  void DescribeTo(std::ostream* os) const {
    *os << "is the " << f_.name << " encoding " << to_string(mode_.r.mode) << "-rounded from the second value";
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "is not the " << f_.name << " encoding " << to_string(mode_.r.mode) << "-rounded from the second value";
  }

 private:
  format_desc f_;
  mode_spec mode_;
  convert_options opts_;
};

}  // namespace detail

/// Matches a bit pattern equal to `expected`'s (compared by object representation: -0 != +0, a NaN
/// matches only the same NaN encoding). `format` selects how failures print the fields; without it
/// the matched type decides (float f32, double f64; 8/4/2/1-byte integers f64/f32/bf16/e4m3).
/// An integer `expected` is the encoding itself (IsBitExact(0x3f80)); float/double their bits.
template <class E>
auto IsBitExact(const E& expected) {
  static_assert(detail::is_bit_pattern_v<E>, "IsBitExact: expected must be an integer, float or double bit pattern");
  return ::testing::MakePolymorphicMatcher(
      detail::bit_exact_matcher(detail::bits_of(expected), false, formats::f64));
}
template <class E>
auto IsBitExact(const E& expected, format_spec format) {
  static_assert(detail::is_bit_pattern_v<E>, "IsBitExact: expected must be an integer, float or double bit pattern");
  return ::testing::MakePolymorphicMatcher(detail::bit_exact_matcher(detail::bits_of(expected), true, format.desc));
}

/// Matches the encoding that round_pack gives for `exact` in `format` under `mode` (the single
/// source of truth of every rounding decision).
///
/// `exact`: a double or float (its exact value), an integer, a tiebreak::exact_value, or a
/// Boost.Multiprecision floating-point number when Boost is available. `format`: "bf16", format_id
/// or format_desc; `mode`: "rne", round_mode, rounding or a policy (rne_t{}). Options default to
/// subnormals kept, no saturation and NVIDIA's canonical NaN (0x7fff for bf16); NaN is compared
/// bit-exactly under `options.nan`. Mode "sr" (by name or enum) accepts either stochastic outcome,
/// i.e. round_pack with random word 0 or 0xffffffff; `rounding{round_mode::sr, r}` pins one.
template <class Exact>
auto IsRoundedFrom(const Exact& exact, format_spec format, mode_spec mode, const convert_options& options = {}) {
  return ::testing::MakePolymorphicMatcher(detail::rounded_from_matcher(to_exact(exact), format.desc, mode, options));
}

/// Pointwise form: matches a tuple (result bits, exact input), for
/// `EXPECT_THAT(results, ::testing::Pointwise(IsRoundingOf("bf16", "rne"), inputs))`.
inline auto IsRoundingOf(format_spec format, mode_spec mode, const convert_options& options = {}) {
  return ::testing::MakePolymorphicMatcher(detail::rounding_of_matcher(format.desc, mode, options));
}

/// Matches a container of signed errors whose mean is not detectably biased: it fails iff the
/// two-sided one-sample t test rejects mean 0 at level `alpha` AND the effect size exceeds
/// `min_effect` (|mean|/sd by default, |mean| in the samples' units with effect_measure::absolute).
/// False-failure rate <= alpha for independent samples (see test_bias). Fewer than two samples or a
/// non-finite sample fail. The message gives n, mean, sd, t, p and the effect.
inline auto HasUnbiasedError(double alpha, double min_effect, effect_measure measure = effect_measure::standardized) {
  return ::testing::MakePolymorphicMatcher(detail::unbiased_error_matcher(alpha, min_effect, measure));
}

/// Predicate form for EXPECT_TRUE / ASSERT_TRUE: `EXPECT_TRUE(HasUnbiasedError(errors, 1e-3, 0.05))`.
template <class Range, class = decltype(std::begin(std::declval<const Range&>()))>
::testing::AssertionResult HasUnbiasedError(const Range& samples, double alpha, double min_effect,
                                            effect_measure measure = effect_measure::standardized) {
  const bias_test_result r = test_bias(samples, alpha, min_effect, measure);
  if (r.biased) return ::testing::AssertionFailure() << "biased error: " << r.summary();
  return ::testing::AssertionSuccess() << r.summary();
}

}  // namespace tiebreak::testing
