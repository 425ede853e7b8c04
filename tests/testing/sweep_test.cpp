// SPDX-License-Identifier: Apache-2.0
/// @file Tests of tiebreak/testing/sweep.hpp: counts, ordering, threads, strides, resuming.
#include "tiebreak/testing/sweep.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/round.hpp"

namespace tt = tiebreak::testing;

namespace {

constexpr std::uint64_t total = 1000003;  // prime: the last chunk is partial

/// Fails on i % 1000 == 7 and counts its calls.
struct failing_every_1000 {
  std::atomic<std::uint64_t>* calls;
  void operator()(std::uint64_t b, std::uint64_t e, std::uint64_t stride, tt::sweep_sink& sink) const {
    for (std::uint64_t i = (b + stride - 1) / stride * stride; i < e; i += stride) {
      calls->fetch_add(1, std::memory_order_relaxed);
      if (i % 1000 == 7) sink.mismatch(i, i + 1, i);
    }
  }
};

std::string temp_path(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() /
                 (name + "." + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".ckpt");
  std::filesystem::remove(p);
  return p.string();
}

}  // namespace

TEST(Sweep, CountsAndFirstMismatchesDoNotDependOnThreads) {
  for (unsigned threads : {1u, 2u, 5u}) {
    std::atomic<std::uint64_t> calls{0};
    tt::sweep_options o;
    o.threads = threads;
    o.chunk_size = 65536;
    const tt::sweep_report r = tt::sweep(total, failing_every_1000{&calls}, o);
    EXPECT_EQ(calls.load(), total);
    EXPECT_EQ(r.checked, total);
    EXPECT_EQ(r.mismatches, 1000u);  // 7, 1007, ..., 999007
    EXPECT_EQ(r.chunks_total, 16u);
    EXPECT_TRUE(r.complete);
    ASSERT_EQ(r.first_mismatches.size(), 8u);
    for (std::size_t k = 0; k < 8; ++k) {
      EXPECT_EQ(r.first_mismatches[k], (tt::sweep_mismatch{1000 * k + 7, 1000 * k + 8, 1000 * k + 7}));
    }
    EXPECT_THAT(r.summary(), ::testing::HasSubstr("1000003 checked, 1000 mismatches (16/16 chunks, 0 resumed)"));
  }
}

TEST(Sweep, StrideVisitsOnlyMultiples) {
  std::atomic<std::uint64_t> calls{0};
  tt::sweep_options o;
  o.chunk_size = 10000;
  o.stride = 7;
  std::atomic<std::uint64_t> bad{0};
  const auto r = tt::sweep(
      total,
      [&](std::uint64_t b, std::uint64_t e, std::uint64_t s, tt::sweep_sink&) {
        for (std::uint64_t i = (b + s - 1) / s * s; i < e; i += s) {
          calls.fetch_add(1);
          if (i % 7 != 0) bad.fetch_add(1);
        }
      },
      o);
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(calls.load(), (total + 6) / 7);  // 0, 7, ..., 1000006 excluded: 142858 inputs
  EXPECT_EQ(r.checked, calls.load());
}

TEST(Sweep, ResumesFromACheckpointAndSkipsFinishedChunks) {
  const std::string path = temp_path("tiebreak_sweep_resume");
  tt::sweep_options o;
  o.chunk_size = 65536;
  o.threads = 2;
  o.checkpoint = path;
  o.name = "resume-test";

  // Run 1: stop after 5 chunks.
  std::atomic<std::uint64_t> calls1{0};
  o.max_chunks = 5;
  const auto r1 = tt::sweep(total, failing_every_1000{&calls1}, o);
  EXPECT_FALSE(r1.complete);
  EXPECT_EQ(r1.chunks_done, 5u);
  EXPECT_EQ(calls1.load(), 5u * 65536);  // five full chunks (the partial last one is never among the first claimed)
  EXPECT_THAT(r1.summary(), ::testing::HasSubstr("INCOMPLETE"));

  // Run 2: resume; only the 11 remaining chunks run.
  std::atomic<std::uint64_t> calls2{0};
  o.max_chunks = 0;
  const auto r2 = tt::sweep(total, failing_every_1000{&calls2}, o);
  EXPECT_TRUE(r2.complete);
  EXPECT_EQ(r2.chunks_resumed, 5u);
  EXPECT_EQ(calls2.load(), total - 5u * 65536);

  // Same report as an uninterrupted run.
  std::atomic<std::uint64_t> calls3{0};
  tt::sweep_options plain;
  plain.chunk_size = 65536;
  const auto r3 = tt::sweep(total, failing_every_1000{&calls3}, plain);
  EXPECT_EQ(r2.checked, r3.checked);
  EXPECT_EQ(r2.mismatches, r3.mismatches);
  EXPECT_EQ(r2.first_mismatches, r3.first_mismatches);

  // Run 4: everything recorded: nothing runs.
  std::atomic<std::uint64_t> calls4{0};
  const auto r4 = tt::sweep(total, failing_every_1000{&calls4}, o);
  EXPECT_EQ(calls4.load(), 0u);
  EXPECT_EQ(r4.chunks_resumed, 16u);
  EXPECT_EQ(r4.mismatches, 1000u);
  std::filesystem::remove(path);
}

TEST(Sweep, TornCheckpointLineIsRedoneAndForeignCheckpointRefused) {
  const std::string path = temp_path("tiebreak_sweep_torn");
  tt::sweep_options o;
  o.chunk_size = 65536;
  o.checkpoint = path;
  o.name = "torn";
  o.max_chunks = 3;
  std::atomic<std::uint64_t> calls{0};
  (void)tt::sweep(total, failing_every_1000{&calls}, o);
  {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << "chunk 15 16963 17 2 15007 15008 15007 16007 16008 1600";  // killed mid-write: no newline, no end
  }
  o.max_chunks = 0;
  std::atomic<std::uint64_t> calls2{0};
  const auto r = tt::sweep(total, failing_every_1000{&calls2}, o);
  EXPECT_EQ(r.chunks_resumed, 3u);
  EXPECT_EQ(calls2.load(), total - 3u * 65536);  // chunk 15 ran again
  EXPECT_EQ(r.mismatches, 1000u);

  tt::sweep_options other = o;
  other.name = "another-sweep";
  std::atomic<std::uint64_t> calls3{0};
  EXPECT_THROW((void)tt::sweep(total, failing_every_1000{&calls3}, other), std::runtime_error);
  other.name = o.name;
  other.chunk_size = 4096;  // another chunking is another sweep too
  EXPECT_THROW((void)tt::sweep(total, failing_every_1000{&calls3}, other), std::runtime_error);
  EXPECT_EQ(calls3.load(), 0u);
  std::filesystem::remove(path);
}

TEST(Sweep, ExceptionsPropagateAfterJoining) {
  tt::sweep_options o;
  o.chunk_size = 1000;
  o.threads = 3;
  EXPECT_THROW((void)tt::sweep(
                   total,
                   [](std::uint64_t b, std::uint64_t, std::uint64_t, tt::sweep_sink&) {
                     if (b == 50000) throw std::logic_error("boom");
                   },
                   o),
               std::logic_error);
}

TEST(ForAllF32, FastRneAgreesWithRoundPackOnAStridedSweep) {
  tt::sweep_options o;
  o.stride = 65537;  // 65537 * 65535 + ... : every exponent and sign, varied fractions
  const auto r = tt::for_all_f32(
      [](std::uint32_t x) {
        const std::uint64_t want = tiebreak::f32_bits_to(tiebreak::formats::bf16, x, tiebreak::rne_t{}).bits;
        const std::uint64_t got = tiebreak::f32_bits_to_bf16_rne(x);
        return tt::sweep_check{got == want, got, want};
      },
      o);
  EXPECT_EQ(r.checked, ((std::uint64_t{1} << 32) + 65536) / 65537);
  EXPECT_EQ(r.mismatches, 0u) << r.summary();
  EXPECT_TRUE(r.complete);
}

TEST(ForAllF32, ReportsTheSmallestMismatchingEncodings) {
  // Truncation instead of rne: the sweep must find the same first mismatches as a serial loop.
  tt::sweep_options o;
  o.stride = 4099;
  o.max_reported = 4;
  auto check = [](std::uint32_t x) {
    const std::uint64_t want = tiebreak::f32_bits_to(tiebreak::formats::bf16, x, tiebreak::rne_t{}).bits;
    const std::uint64_t got = tiebreak::f32_bits_to_bf16_rz(x);
    return tt::sweep_check{got == want, got, want};
  };
  const auto r = tt::for_all_f32(check, o);
  std::vector<tt::sweep_mismatch> serial;
  for (std::uint64_t i = 0; i < (std::uint64_t{1} << 32) && serial.size() < 4; i += 4099) {
    const auto c = check(static_cast<std::uint32_t>(i));
    if (!c.ok) serial.push_back({i, c.got, c.expected});
  }
  EXPECT_GT(r.mismatches, 0u);
  EXPECT_EQ(r.first_mismatches, serial);
}

TEST(ForAllBf16Pairs, PassesBothHalvesOfTheIndex) {
  tt::sweep_options o;
  o.stride = 257;
  o.max_reported = 3;
  // Fails exactly when a == b (i = a * 65537); the strided set of such i is counted serially below.
  const auto r = tt::for_all_bf16_pairs([](std::uint16_t a, std::uint16_t b) { return a != b; }, o);
  std::uint64_t expected = 0;
  std::vector<std::uint64_t> first;
  for (std::uint64_t i = 0; i < (std::uint64_t{1} << 32); i += 257) {
    if ((i >> 16) == (i & 0xffff)) {
      ++expected;
      if (first.size() < 3) first.push_back(i);
    }
  }
  EXPECT_EQ(r.mismatches, expected);
  ASSERT_EQ(r.first_mismatches.size(), first.size());
  for (std::size_t k = 0; k < first.size(); ++k) EXPECT_EQ(r.first_mismatches[k].input, first[k]);
}
