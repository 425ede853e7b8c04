#include <cstdint>
#include "tiebreak/fp/round.hpp"
using namespace tiebreak;
__global__ void g1(const std::uint64_t* in, std::uint64_t* out) {  // local grid format with name literal
  const format_desc grid{8, 52, 1 - ((int)in[3] + 52), special_style::ieee, 0, "grid"};
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = round_pack(grid, x, rounding{round_mode::rz, 0}).bits;
}
__global__ void g2(const std::uint64_t* in, std::uint64_t* out) {  // local grid format no name
  const format_desc grid{8, 52, 1 - ((int)in[3] + 52), special_style::ieee, 0};
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = round_pack(grid, x, rounding{round_mode::rz, 0}).bits;
}
__global__ void g3(const std::uint64_t* in, std::uint64_t* out) {  // constant bias
  const format_desc grid{8, 52, 100, special_style::ieee, 0, "grid"};
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = round_pack(grid, x, rounding{round_mode::rz, 0}).bits;
}
__global__ void g4(const std::uint64_t* in, std::uint64_t* out, format_desc acc) {  // param format
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = round_pack(acc, x, rounding{round_mode::rz, 0}).bits;
}
__global__ void g5(const std::uint64_t* in, std::uint64_t* out) {  // runtime mode
  constexpr format_desc f = formats::f32;
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  out[0] = round_pack(f, x, rounding{static_cast<round_mode>(in[4]), 0}).bits;
}
__global__ void g6(const std::uint64_t* in, std::uint64_t* out) {  // runtime mode, 52-bit format const bias
  const format_desc grid{8, 52, 100, special_style::ieee, 0, "grid"};
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]);
  round_result r = round_pack(grid, x, rounding{static_cast<round_mode>(in[4]), 0});
  out[0] = r.bits; out[1] = r.flags; out[2] = r.step;
}
