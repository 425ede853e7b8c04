// SPDX-License-Identifier: Apache-2.0
/// @file f32 -> bf16 bulk conversion throughput, every mode and every compiled instruction-set
/// variant, one thread (elements per second).
///
/// The input is a fixed pseudo-random array of finite f32 values spread over many binades (no NaN,
/// so the comparison with numpy + ml_dtypes in compare_convert.py uses the same kind of data).
/// Sizes: 2^16 (in cache) and 2^24 (memory bound), set by --benchmark_filter if needed.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/host/bulk_convert.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::host;

/// Finite f32 inputs: random sign and fraction, exponent field in [64, 190] (magnitudes 2^-63..2^63).
std::vector<std::uint32_t> make_input(std::size_t n) {
  std::vector<std::uint32_t> v(n);
  std::uint64_t s = 0x243f6a8885a308d3ull;
  for (auto& x : v) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    const auto r = static_cast<std::uint32_t>(s >> 16);
    x = (r & 0x807fffffu) | ((64u + (r >> 23) % 127u) << 23);
  }
  return v;
}

void bm_convert(benchmark::State& st, round_mode m) {
  const std::size_t n = static_cast<std::size_t>(st.range(0));
  const auto in = make_input(n);
  std::vector<std::uint32_t> rnd(n);
  for (std::size_t i = 0; i < n; ++i) rnd[i] = in[i] * 2654435761u;
  std::vector<std::uint16_t> out(n);
  for (auto _ : st) {
    if (m == round_mode::sr) convert_f32_to_bf16_sr(in.data(), rnd.data(), out.data(), n);
    else convert_f32_to_bf16(in.data(), out.data(), n, m);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations()) * static_cast<std::int64_t>(n));
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) * static_cast<std::int64_t>(n) * 6);
}

/// rne with each compiled variant of the bulk loop (bulk_convert.hpp bulk_isa): what the run-time choice
/// buys. Skipped when the CPU lacks the instruction set.
void bm_convert_isa(benchmark::State& st, bulk_isa isa) {
  if (!bulk_isa_supported(isa)) {
    st.SkipWithError("instruction set not supported by this CPU");
    return;
  }
  const std::size_t n = static_cast<std::size_t>(st.range(0));
  const auto in = make_input(n);
  std::vector<std::uint16_t> out(n);
  for (auto _ : st) {
    convert_f32_to_bf16_with(isa, in.data(), nullptr, out.data(), n, round_mode::rne);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations()) * static_cast<std::int64_t>(n));
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) * static_cast<std::int64_t>(n) * 6);
}

/// The generic path for comparison: round_pack through f32_bits_to (not a bulk API).
void bm_round_pack(benchmark::State& st, round_mode m) {
  const std::size_t n = static_cast<std::size_t>(st.range(0));
  const auto in = make_input(n);
  std::vector<std::uint16_t> out(n);
  for (auto _ : st) {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = static_cast<std::uint16_t>(f32_bits_to(formats::bf16, in[i], rounding{m, in[i]}).bits);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations()) * static_cast<std::int64_t>(n));
}

void sizes(benchmark::internal::Benchmark* b) { b->Arg(1 << 16)->Arg(1 << 24); }

// bm_convert/<mode>/<size> for every mode of the core's table (compare_convert.py reads the names).
[[maybe_unused]] const bool every_mode_registered = [] {
  for (round_mode m : all_round_modes)
    benchmark::RegisterBenchmark(("bm_convert/" + std::string(to_string(m))).c_str(), bm_convert, m)->Apply(sizes);
  return true;
}();
BENCHMARK_CAPTURE(bm_convert_isa, rne_generic, bulk_isa::generic)->Apply(sizes);
BENCHMARK_CAPTURE(bm_convert_isa, rne_avx2, bulk_isa::avx2)->Apply(sizes);
BENCHMARK_CAPTURE(bm_convert_isa, rne_avx512, bulk_isa::avx512)->Apply(sizes);
BENCHMARK_CAPTURE(bm_round_pack, rne, round_mode::rne)->Arg(1 << 16);

}  // namespace

BENCHMARK_MAIN();
