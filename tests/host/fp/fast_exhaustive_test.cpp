// SPDX-License-Identifier: Apache-2.0
/// @file All 2^32 f32 inputs to bf16 in every deterministic mode: fast.hpp == round_pack == the f64
/// oracle.
///
/// One pass over the inputs checks every mode (sr on every 257th block: sampled_block). For every
/// input: the f64 oracle (neighbours and
/// midpoint, support/oracle.hpp) gives the expected bits, flags and trace, once per input; round_pack
/// must match it in every mode (the error fields in rz, and in ru or rd by the input's sign, which
/// cover every trace: see checks_error_fields); f32_bits_to_bf16_<mode> and f32_bits_to_bf16(x, rounding) must equal
/// round_pack's bits; and the bulk loops of tiebreak/host/bulk_convert.hpp, for every instruction set this CPU runs
/// (bulk_isa), must equal round_pack's bits on every block. sr uses a hash of the input as its
/// random bits (a different sample of the random space for every input), so any sweep of it is a
/// sample; it runs on the 16.7 M inputs of the sampled blocks at both test levels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/convert_check.hpp"
#include "support/oracle.hpp"
#include "support/sweep.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/host/bulk_convert.hpp"

namespace tiebreak::test {
namespace {

using namespace tiebreak::host;

constexpr ref_format BF16 = ref_of(formats::bf16);
constexpr round_mode modes[] = {round_mode::rne, round_mode::rna, round_mode::rz, round_mode::ru,
                                round_mode::rd,  round_mode::rto, round_mode::sr};
constexpr int mode_count = 7;
constexpr bulk_isa isas[] = {bulk_isa::generic, bulk_isa::avx2, bulk_isa::avx512};
constexpr const char* isa_names[] = {"generic", "avx2", "avx512"};

template <round_mode M>
std::uint16_t fast_fixed(std::uint32_t x, std::uint32_t random) {
  if constexpr (M == round_mode::rne) return f32_bits_to_bf16_rne(x);
  else if constexpr (M == round_mode::rna) return f32_bits_to_bf16_rna(x);
  else if constexpr (M == round_mode::rz) return f32_bits_to_bf16_rz(x);
  else if constexpr (M == round_mode::ru) return f32_bits_to_bf16_ru(x);
  else if constexpr (M == round_mode::rd) return f32_bits_to_bf16_rd(x);
  else if constexpr (M == round_mode::rto) return f32_bits_to_bf16_rto(x);
  else return f32_bits_to_bf16_sr(x, random);
}

/// Cold path: the full diagnostic of one failing (input, mode).
[[gnu::noinline, gnu::cold]] void report(const f32_case& c, rounding r, mismatch_log& log, std::uint16_t fast,
                                         std::uint16_t dispatched) {
  const round_result got = f32_bits_to(formats::bf16, c.x, r);
  const bool oracle_ok = check_f32_case(formats::bf16, BF16, c, got, r, convert_options{}, log);
  if (fast != got.bits || dispatched != got.bits) {
    log.add("fast " + std::string(to_string(r.mode)) + " x=" + hex(c.x) + ": fast " + hex(fast) + " dispatched " +
            hex(dispatched) + " round_pack " + hex(got.bits));
  } else if (oracle_ok) {
    log.add("bf16 " + std::string(to_string(r.mode)) + " x=" + hex(c.x) + ": fast check failed, full check passed");
  }
}

/// One mode over a batch of cases: round_pack (inlined with a constant mode) against the oracle, and
/// the scalar fast.hpp functions against round_pack, folded into one flag (no branch per input); a
/// failing batch is walked again for the reports. Stores round_pack's bits in `want` for the bulk
/// check. Out of line so that each mode's loop stays small (see round_exhaustive_test.cpp).
template <round_mode M>
[[gnu::noinline, gnu::flatten]] void check_mode(const f32_case* cs, const std::uint32_t* rnd, std::size_t n,
                                                std::uint16_t* want, mismatch_log& log) {
  // One input: every check folded into one flag; reports only on the second walk of a failing batch.
  auto check = [&](std::size_t i, bool report_failure) {
    const std::uint32_t random = M == round_mode::sr ? rnd[i] : 0u;
    const rounding r{M, random};
    const round_result got = f32_bits_to(formats::bf16, cs[i].x, r);
    const std::uint16_t fast = fast_fixed<M>(cs[i].x, random);
    const std::uint16_t dispatched = f32_bits_to_bf16(cs[i].x, r);
    const bool ok = f32_case_matches<M>(BF16, cs[i], got, r) & (fast == got.bits) & (dispatched == got.bits);
    if (report_failure && !ok) report(cs[i], r, log, fast, dispatched);
    want[i] = static_cast<std::uint16_t>(got.bits);
    return ok;
  };
  bool all = true;
  for (std::size_t i = 0; i < n; ++i) all &= check(i, false);
  if (all) [[likely]] return;
  for (std::size_t i = 0; i < n; ++i) check(i, true);
}

[[gnu::noinline, gnu::cold]] void report_bulk(mismatch_log& log, bulk_isa isa, round_mode m, std::uint32_t x,
                                              std::uint16_t bulk, std::uint16_t want) {
  log.add(std::string("bulk ") + isa_names[static_cast<int>(isa)] + " " + std::string(to_string(m)) + " x=" + hex(x) +
          ": " + hex(bulk) + ", round_pack " + hex(want));
}

/// One block of consecutive inputs: the per-input checks in batches (the oracle's cases, then each
/// mode over the batch), then every bulk loop on the whole block against the round_pack bits the
/// per-input pass recorded.
void check_block(std::uint64_t lo, std::uint64_t hi, bool with_sr, mismatch_log& log) {
  const std::size_t n = static_cast<std::size_t>(hi - lo);
  std::vector<std::uint32_t> in(n), rnd(n);
  std::vector<std::uint16_t> want(n * mode_count), out(n);
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = static_cast<std::uint32_t>(lo + i);
    rnd[i] = hash32(in[i]);
  }
  f32_case cs[case_batch];  // no default initialisers: nothing is cleared
  for (std::size_t b = 0; b < n; b += case_batch) {
    const std::size_t m = std::min(case_batch, n - b);
    for (std::size_t i = 0; i < m; ++i) make_f32_case(BF16, in[b + i], cs[i]);
    const std::uint32_t* rb = rnd.data() + b;
    check_mode<round_mode::rne>(cs, rb, m, want.data() + 0 * n + b, log);
    check_mode<round_mode::rna>(cs, rb, m, want.data() + 1 * n + b, log);
    check_mode<round_mode::rz>(cs, rb, m, want.data() + 2 * n + b, log);
    check_mode<round_mode::ru>(cs, rb, m, want.data() + 3 * n + b, log);
    check_mode<round_mode::rd>(cs, rb, m, want.data() + 4 * n + b, log);
    check_mode<round_mode::rto>(cs, rb, m, want.data() + 5 * n + b, log);
    if (with_sr) check_mode<round_mode::sr>(cs, rb, m, want.data() + 6 * n + b, log);
  }
  // The pair form of sr (every block, sampled sr or not): each input as `lo` with its random word,
  // partnered as `hi` with the input half a block away, against the scalar form of each; the NaN-free
  // form too where neither is NaN (or either is the NaN 0x7fff0000 it also covers).
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t x = in[i], y = in[(i + n / 2) % n], r = rnd[i];
    const std::uint32_t want2 = static_cast<std::uint32_t>(f32_bits_to_bf16_sr(x, r)) |
                                static_cast<std::uint32_t>(f32_bits_to_bf16_sr(y, r << 16)) << 16;
    const std::uint32_t got2 = f32x2_bits_to_bf16x2_sr(x, y, r);
    const auto nan_ok = [](std::uint32_t v) { return !detail::f32_bits_is_nan(v) || v == 0x7fff0000u; };
    const bool ok = got2 == want2 && (!(nan_ok(x) && nan_ok(y)) || f32x2_bits_to_bf16x2_sr_not_nan(x, y, r) == want2);
    if (!ok) [[unlikely]] {
      log.add("bf16x2 sr x=" + hex(x) + " y=" + hex(y) + " r=" + hex(r) + ": " + hex(got2) + ", scalar " + hex(want2));
    }
  }
  for (bulk_isa isa : isas) {
    if (!bulk_isa_supported(isa)) continue;
    for (int k = 0; k < mode_count; ++k) {
      if (modes[k] == round_mode::sr && !with_sr) continue;
      convert_f32_to_bf16_with(isa, in.data(), rnd.data(), out.data(), n, modes[k]);
      const std::uint16_t* w = want.data() + static_cast<std::size_t>(k) * n;
      if (std::memcmp(out.data(), w, n * sizeof(std::uint16_t)) != 0) [[unlikely]] {
        for (std::size_t i = 0; i < n; ++i) {
          if (out[i] != w[i]) { report_bulk(log, isa, modes[k], in[i], out[i], w[i]); break; }
        }
      }
    }
  }
}

// One pass over all 2^32 inputs checks all seven modes, scalar and bulk.
TEST(fast_exhaustive, f32_to_bf16_every_mode_equals_round_pack_and_oracle) {
  std::string variants;
  for (bulk_isa isa : isas) {
    if (bulk_isa_supported(isa)) variants += std::string(variants.empty() ? "" : ", ") + isa_names[static_cast<int>(isa)];
  }
  std::printf("[ bulk     ] instruction sets checked: %s\n", variants.c_str());
  ::testing::Test::RecordProperty("bulk_isas", variants);
  mismatch_log log;
  constexpr std::uint64_t block = 1u << 14;
  sweep_blocks("f32_to_bf16_all_modes_scalar_and_bulk", std::uint64_t{1} << 32, block,
               [&](std::uint64_t lo, std::uint64_t hi) { check_block(lo, hi, sampled_block(lo, block), log); });
  EXPECT_EQ(log.count(), 0u) << log.report();
}

// The bulk entry points that pick the instruction set themselves, on a sample (the variants they
// dispatch to are proven above): convert_f32_to_bf16 (sr there means random bits 0: truncation)
// and convert_f32_to_bf16_sr.
TEST(fast_exhaustive, dispatching_bulk_entry_points_equal_scalar) {
  constexpr std::size_t n = 1u << 16;
  std::vector<std::uint32_t> in(n), rnd(n);
  std::vector<std::uint16_t> out(n);
  splitmix64 g(99);
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = static_cast<std::uint32_t>(g());
    rnd[i] = static_cast<std::uint32_t>(g());
  }
  for (round_mode m : modes) {
    convert_f32_to_bf16(in.data(), out.data(), n, m);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], f32_bits_to_bf16(in[i], rounding{m, 0})) << to_string(m) << " " << hex(in[i]);
  }
  convert_f32_to_bf16_sr(in.data(), rnd.data(), out.data(), n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], f32_bits_to_bf16_sr(in[i], rnd[i])) << hex(in[i]);
}

}  // namespace
}  // namespace tiebreak::test
