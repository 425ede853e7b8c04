#include <cstdint>
#include "tiebreak/fp/round.hpp"
using namespace tiebreak;
__global__ void k1(const std::uint64_t* in, std::uint64_t* out) {  // make_exact only
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]); out[0] = (std::uint64_t)x.sig; out[1] = (int)x.cls;
}
__global__ void k2(const std::uint64_t* in, std::uint64_t* out) {  // round_finite<u64> explicit o
  constexpr format_desc f = formats::f32; convert_options o;
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = detail::round_finite<std::uint64_t>(f, x, rounding{round_mode::rz, 0}, o).bits;
}
__global__ void k3(const std::uint64_t* in, std::uint64_t* out) {  // round_pack explicit o
  constexpr format_desc f = formats::f32; convert_options o;
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = round_pack(f, x, rounding{round_mode::rz, 0}, o).bits;
}
__global__ void k4(const std::uint64_t* in, std::uint64_t* out) {  // round_pack default o
  constexpr format_desc f = formats::f32;
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = round_pack(f, x, rounding{round_mode::rz, 0}).bits;
}
__global__ void k5(const std::uint64_t* in, std::uint64_t* out) {  // round_finite<u128>
  constexpr format_desc f = formats::f32; convert_options o;
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = detail::round_finite<u128>(f, x, rounding{round_mode::rz, 0}, o).bits;
}
__global__ void k6(const std::uint64_t* in, std::uint64_t* out) {  // convert f32->bf16 like the sweeps
  constexpr format_desc f = formats::bf16; constexpr format_desc g = formats::f32;
  out[0] = convert(f, g, in[0], rounding{round_mode::rz, 0}).bits;
}
