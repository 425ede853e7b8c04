// SPDX-License-Identifier: Apache-2.0
/// @file Binary floating-point format descriptors: fp64, fp32, tf32, bf16, fp16, OCP fp8, and others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tiebreak/fp/config.hpp"

namespace tiebreak {

/// How a format spends its all-ones exponent field.
enum class special_style : std::uint8_t {
  ieee,     ///< IEEE 754: all-ones exponent is Inf (zero fraction) or NaN (non-zero fraction).
  fn_nan,   ///< OCP e4m3 ("fn"): no Inf; only S.1111.111 is NaN, S.1111.000-110 are finite.
  finite,   ///< No Inf and no NaN at all (integer-like formats; generic descriptors only).
};

/// A binary floating-point format. Values are (-1)^s * 2^(E - bias) * 1.f, with subnormals
/// 2^(1 - bias) * 0.f when the exponent field is zero.
///
/// Encodings live in the low `storage_bits` bits of a std::uint64_t; `pad` low bits of the container
/// are always zero (tf32 lives in a 32-bit f32 container whose low 13 bits are zero, as
/// `cvt.rna.tf32.f32` produces it).
/// A string_view of a string literal, its length taken from the array type. Use it wherever a
/// string_view may be built at run time in device code: the `const char*` constructor measures the
/// string with char_traits::length, a host strlen, and nvcc compiles that call in a kernel to
/// undefined behaviour, so the optimiser deletes the rest of the kernel without any error (this
/// silently emptied the device build of emu::mma_dot's alignment step; docs/tensor-cores.md).
template <std::size_t N>
TIEBREAK_HDC std::string_view literal(const char (&s)[N]) noexcept {
  return std::string_view(s, N - 1);
}

struct format_desc {
  int exp_bits;        ///< width of the exponent field
  int man_bits;        ///< width of the stored fraction (precision - 1)
  int bias;            ///< exponent bias
  special_style special;
  int pad = 0;         ///< zero bits below the fraction inside the container
  std::string_view name = literal("custom");  ///< literal(): see above, safe in kernels

  TIEBREAK_HDI int precision() const noexcept { return man_bits + 1; }
  TIEBREAK_HDI int storage_bits() const noexcept { return 1 + exp_bits + man_bits + pad; }
  TIEBREAK_HDI std::uint64_t sign_mask() const noexcept {
    return std::uint64_t{1} << (exp_bits + man_bits + pad);
  }
  TIEBREAK_HDI std::uint64_t exp_field_max() const noexcept {
    return (std::uint64_t{1} << exp_bits) - 1;
  }
  TIEBREAK_HDI std::uint64_t frac_mask() const noexcept {
    return (std::uint64_t{1} << man_bits) - 1;
  }
  /// Smallest normal exponent (unbiased).
  TIEBREAK_HDI int emin() const noexcept { return 1 - bias; }
  /// Largest finite exponent (unbiased).
  TIEBREAK_HDI int emax() const noexcept {
    return static_cast<int>(special == special_style::ieee ? exp_field_max() - 1 : exp_field_max()) - bias;
  }
  /// Largest finite fraction field in the top binade.
  TIEBREAK_HDI std::uint64_t max_frac() const noexcept {
    return special == special_style::fn_nan ? frac_mask() - 1 : frac_mask();
  }
  TIEBREAK_HDI bool has_inf() const noexcept { return special == special_style::ieee; }
  TIEBREAK_HDI bool has_nan() const noexcept { return special != special_style::finite; }

  /// Packs sign, biased exponent field and fraction field into an encoding.
  TIEBREAK_HDI std::uint64_t pack(bool sign, std::uint64_t exp_field, std::uint64_t frac) const noexcept {
    return ((sign ? sign_mask() : 0) | (exp_field << (man_bits + pad)) | (frac << pad));
  }
  TIEBREAK_HDI bool sign_of(std::uint64_t bits) const noexcept { return (bits & sign_mask()) != 0; }
  TIEBREAK_HDI std::uint64_t exp_field_of(std::uint64_t bits) const noexcept {
    return (bits >> (man_bits + pad)) & exp_field_max();
  }
  TIEBREAK_HDI std::uint64_t frac_of(std::uint64_t bits) const noexcept {
    return (bits >> pad) & frac_mask();
  }
  TIEBREAK_HDI std::uint64_t max_finite(bool sign) const noexcept {
    return pack(sign, special == special_style::ieee ? exp_field_max() - 1 : exp_field_max(), max_frac());
  }
  TIEBREAK_HDI std::uint64_t inf(bool sign) const noexcept { return pack(sign, exp_field_max(), 0); }
  TIEBREAK_HDI bool is_nan(std::uint64_t bits) const noexcept {
    switch (special) {
      case special_style::ieee: return exp_field_of(bits) == exp_field_max() && frac_of(bits) != 0;
      case special_style::fn_nan: return exp_field_of(bits) == exp_field_max() && frac_of(bits) == frac_mask();
      default: return false;
    }
  }
  TIEBREAK_HDI bool is_inf(std::uint64_t bits) const noexcept {
    return special == special_style::ieee && exp_field_of(bits) == exp_field_max() && frac_of(bits) == 0;
  }
  /// Every encoding of the format has its bits inside this mask.
  TIEBREAK_HDI std::uint64_t encoding_mask() const noexcept {
    return storage_bits() >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << storage_bits()) - 1;
  }
};

namespace formats {
inline constexpr format_desc f64{11, 52, 1023, special_style::ieee, 0, "f64"};
inline constexpr format_desc f32{8, 23, 127, special_style::ieee, 0, "f32"};
/// TensorFloat-32: f32 range, 10 fraction bits, stored in an f32 container (low 13 bits zero).
inline constexpr format_desc tf32{8, 10, 127, special_style::ieee, 13, "tf32"};
inline constexpr format_desc bf16{8, 7, 127, special_style::ieee, 0, "bf16"};
inline constexpr format_desc f16{5, 10, 15, special_style::ieee, 0, "f16"};
/// OCP 8-bit e4m3 ("e4m3fn"): bias 7, no Inf, NaN = S.1111.111, largest finite 448.
inline constexpr format_desc e4m3{4, 3, 7, special_style::fn_nan, 0, "e4m3"};
/// OCP 8-bit e5m2: IEEE-like, bias 15, Inf and NaN, largest finite 57344.
inline constexpr format_desc e5m2{5, 2, 15, special_style::ieee, 0, "e5m2"};
}  // namespace formats

/// Identifiers of the named formats, the names used by the CLI, JSON and Python.
enum class format_id : std::uint8_t { f64, f32, tf32, bf16, f16, e4m3, e5m2 };

TIEBREAK_HDI format_desc desc_of(format_id id) noexcept {
  switch (id) {
    case format_id::f64: return formats::f64;
    case format_id::f32: return formats::f32;
    case format_id::tf32: return formats::tf32;
    case format_id::bf16: return formats::bf16;
    case format_id::f16: return formats::f16;
    case format_id::e4m3: return formats::e4m3;
    default: return formats::e5m2;
  }
}

inline constexpr format_id all_format_ids[] = {format_id::f64, format_id::f32, format_id::tf32,
                                                format_id::bf16, format_id::f16, format_id::e4m3,
                                                format_id::e5m2};

/// Parses a format name ("bf16", ...). Returns false for an unknown name.
constexpr bool parse_format(std::string_view name, format_id& out) noexcept {
  for (format_id id : all_format_ids) {
    if (desc_of(id).name == name) { out = id; return true; }
  }
  return false;
}

static_assert(formats::bf16.storage_bits() == 16 && formats::tf32.storage_bits() == 32);
static_assert(formats::e4m3.max_finite(false) == 0x7e && formats::e5m2.max_finite(false) == 0x7b);
static_assert(formats::bf16.max_finite(true) == 0xff7f && formats::f16.inf(false) == 0x7c00);

}  // namespace tiebreak
