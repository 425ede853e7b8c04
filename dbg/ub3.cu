#include <cstdint>
#include "tiebreak/fp/round.hpp"
using namespace tiebreak;
#define G (format_desc{8, 52, 100, special_style::ieee, 0, std::string_view("grid", 4)})
__global__ void h1(const std::uint64_t* in, std::uint64_t* out) {
  exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]); convert_options o;
  out[0] = detail::round_finite<std::uint64_t>(G, x, rounding{round_mode::rz, 0}, o).bits;
}
__global__ void h2(const std::uint64_t* in, std::uint64_t* out) { out[0] = G.pack(in[0]&1, in[1], in[2]); }
__global__ void h3(const std::uint64_t* in, std::uint64_t* out) { out[0] = G.max_finite(in[0]&1); }
__global__ void h4(const std::uint64_t* in, std::uint64_t* out) { out[0] = G.inf(in[0]&1); }
__global__ void h5(const std::uint64_t* in, std::uint64_t* out) { out[0] = G.emax() + G.emin() + G.max_frac() + G.frac_mask(); }
__global__ void h6(const std::uint64_t* in, std::uint64_t* out) { exact_value x = make_exact(in[0] & 1, in[1], (int)in[2]); out[0] = detail::nan_bits(G, x, nan_policy::canonical); }
__global__ void h7(const std::uint64_t* in, std::uint64_t* out) { out[0] = G.exp_field_max() + G.sign_mask(); }
