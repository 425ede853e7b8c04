// SPDX-License-Identifier: Apache-2.0
/// @file ex2.approx.ftz.f32's model on the host, one thread (calls per second): the rule with sm_90's
/// interpolator evaluated per call (fp/sfu.hpp, what the twin runs) against the rule reading the
/// embedded 32 MiB table (tiebreak/host/sfu.hpp, the oracle).
///
/// Inputs: 2^16 fixed pseudo-random x in [-w, 0), the exponentials of softmax. w = 16 spreads F over
/// the whole table (a table lookup then misses the caches); w = 2^-10 keeps F within 2^13 entries (the
/// table's lines stay in L1).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "tiebreak/fp/sfu.hpp"
#include "tiebreak/host/sfu.hpp"

namespace {

using namespace tiebreak;

/// n values of -w u, u uniform on [0, 1) with 24 bits, as f32 bits.
std::vector<std::uint32_t> make_input(std::size_t n, float w) {
  std::vector<std::uint32_t> v(n);
  std::uint64_t s = 0x243f6a8885a308d3ull;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = f32_to_bits(-w * static_cast<float>(s >> 40) * 0x1p-24f);
  }
  return v;
}

template <class Table>
void bm_ex2(benchmark::State& st, const Table& table, float w) {
  const auto in = make_input(std::size_t{1} << 16, w);
  std::vector<std::uint32_t> out(in.size());
  for (auto _ : st) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = sfu::ex2_approx_ftz_bits(in[i], table);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations()) * static_cast<std::int64_t>(in.size()));
}

void bm_interpolator(benchmark::State& st, float w) { bm_ex2(st, sfu::ex2_sm90_interpolator{}, w); }
void bm_table(benchmark::State& st, float w) {
  bm_ex2(st, host::ex2_table_view{host::ex2_approx_sm90_table().data()}, w);
}

BENCHMARK_CAPTURE(bm_interpolator, wide, 16.0f);
BENCHMARK_CAPTURE(bm_table, wide, 16.0f);
BENCHMARK_CAPTURE(bm_interpolator, narrow, 0x1p-10f);
BENCHMARK_CAPTURE(bm_table, narrow, 0x1p-10f);

}  // namespace

BENCHMARK_MAIN();
