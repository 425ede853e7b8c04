// SPDX-License-Identifier: Apache-2.0
// The host twin's outputs, pinned: a 64-bit digest (FNV-1a over the bytes) of everything the forward
// and the backward write, per case of a fixed matrix (shapes with ragged tiles, grouped-query heads,
// causal rows that see no key, planted repeated maxima, a NaN input, amplitudes that reach debias's
// offset bound; every output mode, both scalings, probe off and on with row dumps; and, with unfused
// scaling, the same with the SFU's exponential, exp2_policy::sfu, its model on the host). The other twin
// tests check properties (against f64, between modes); this one catches any change of bits at all,
// so that a restructured kernel algorithm (attn/flash.hpp: a new order of instructions, a pipeline)
// is proven on the host to compute what it computed before, and the GPU test (twin == device) then
// carries that to the device.
//
// At the smoke level (the sanitizer build, tools/sanitize.sh, where the twin's tensor-core model runs
// tens of times slower) only the four smallest shapes with unfused scaling (the SFU's: the smallest) are computed, each still
// against its pinned digest; the quick and full levels compute the whole matrix.
//
// A change that is meant to change bits re-pins the table: run the test with
// TIEBREAK_PRINT_DIGESTS=1, which prints the lines of flash_twin_digests.inc as they now are
// (`... | grep '^    [{/]' > tests/host/attn/flash_twin_digests.inc`), and say in the commit why the
// bits changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "support/attn_inputs.hpp"
#include "support/sweep.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/host/flash_twin.hpp"

namespace {

using namespace tiebreak;
using attn::out_mode;

struct fnv1a {
  std::uint64_t h = 1469598103934665603ull;
  template <class T>
  void add(const std::vector<T>& v) {
    const auto* c = reinterpret_cast<const unsigned char*>(v.data());
    for (std::size_t i = 0; i < v.size() * sizeof(T); ++i) {
      h ^= c[i];
      h *= 1099511628211ull;
    }
  }
};

struct digest_case {
  attn::shape s;
  bool causal;
  double amp;    ///< inputs uniform in [-amp, amp)
  bool planted;  ///< keys that repeat a row's maximum
};

// seq_q, seq_k not multiples of the 64-row/64-key tiles; a row of 1 and a key of 1; grouped heads;
// causal with seq_q > seq_k (rows that see no key); amplitudes up to 30 (scaled maxima far above
// debias's bound of 64 binades with beta = 2).
const digest_case cases[] = {
    {{1, 2, 1, 70, 100, 64, 64}, false, 1, false},   {{1, 2, 2, 100, 70, 64, 64}, true, 1, false},
    {{2, 2, 2, 150, 150, 128, 128}, true, 4, false}, {{1, 2, 2, 70, 257, 128, 128}, false, 8, true},
    {{1, 2, 2, 64, 64, 128, 128}, false, 1, true},   {{1, 1, 1, 200, 200, 64, 64}, true, 30, true},
    {{1, 2, 1, 1, 129, 128, 128}, false, 2, false},  {{1, 1, 1, 65, 1, 64, 64}, true, 1, false},
};

struct inputs {
  attn::problem prob;
  std::vector<std::uint16_t> q, k, v, dout;
};

inputs make(const digest_case& cs, std::uint64_t seed) {
  inputs in;
  const attn::shape& s = cs.s;
  in.prob.shape = s;
  in.prob.mask = cs.causal ? attn::mask_kind::causal : attn::mask_kind::none;
  in.prob.scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  splitmix64_generator g{seed};
  auto fill = [&](std::vector<std::uint16_t>& x, std::size_t n) {
    x.resize(n);
    for (auto& e : x) e = test::bf16_of(cs.amp * test::uniform_pm1(g));
  };
  fill(in.q, s.q_size());
  fill(in.k, s.k_size());
  fill(in.v, s.v_size());
  fill(in.dout, s.o_size());
  if (cs.planted) {  // six keys per kv head equal, every third query element 1: many rows repeat their maximum
    for (std::size_t b = 0; b < s.batch; ++b)
      for (std::size_t kh = 0; kh < s.kv_heads; ++kh)
        for (std::size_t j = 0; j < 6 && j < s.seq_k; ++j)
          for (std::size_t c = 0; c < s.dim; ++c) in.k[s.k_offset(b, kh, j * 11 % s.seq_k) + c] = test::bf16_of(c % 2 ? 2.0 : 0.0);
    for (std::size_t i = 0; i < in.q.size(); i += 3) in.q[i] = test::bf16_of(1.0);
  }
  in.q[5] = 0x7fc1;  // a NaN: its row's outputs are NaN, counted by the probe
  return in;
}

struct forward_out {
  std::vector<std::uint16_t> o;
  std::vector<float> o_f32, lse;
  std::uint64_t digest;  ///< of everything the forward wrote
};

/// One forward call of the twin on `in`, probed (with three rows dumped) or not, and its digest.
forward_out forward(const inputs& in, const attn::flash_options& opt, bool probed) {
  const attn::shape& s = in.prob.shape;
  forward_out f{std::vector<std::uint16_t>(s.o_size(), 0xdead), std::vector<float>(s.o_size(), -7.0f),
                std::vector<float>(s.lse_size(), -7.0f), 0};
  std::vector<probe::head_counters> counters(s.batch * s.heads);
  const std::vector<std::uint64_t> rows = {s.q_row(0, 0, 0), s.q_row(0, s.heads - 1, s.seq_q - 1), s.q_row(0, 0, s.seq_q / 2)};
  std::vector<float> score(rows.size() * s.seq_k, -9.0f), pbar(score), offset(score);
  attn::flash_args a{in.prob, opt, {}, probed ? counters.data() : nullptr, {}};
  a.t = {in.q.data(), in.k.data(), in.v.data(), nullptr, f.o.data(), f.o_f32.data(), f.lse.data()};
  if (probed) a.dump = {rows.data(), static_cast<std::uint32_t>(rows.size()), score.data(), pbar.data(), offset.data()};
  host::attention_forward(a, 2);
  fnv1a d;
  d.add(f.o);
  d.add(f.o_f32);
  d.add(f.lse);
  d.add(counters);
  d.add(score);
  d.add(pbar);
  d.add(offset);
  f.digest = d.h;
  return f;
}

/// The cases the smoke level computes: the smallest shapes, unfused; with the SFU's exponential, the
/// first shape.
bool in_smoke_subset(std::size_t ci, attn::score_scaling sc, attn::exp2_policy e) {
  if (e == attn::exp2_policy::sfu) return ci == 0;
  return (ci == 0 || ci == 1 || ci == 4 || ci == 7) && sc == attn::score_scaling::unfused;
}

/// Every case's digest (at the smoke level, those of in_smoke_subset), in a fixed order, named.
std::vector<std::pair<std::string, std::uint64_t>> compute_digests(bool smoke) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (std::size_t ci = 0; ci < std::size(cases); ++ci) {
    const digest_case& cs = cases[ci];
    const attn::shape& s = cs.s;
    const inputs in = make(cs, 1234 + ci);
    for (out_mode m : attn::all_out_modes)
      for (attn::score_scaling sc : {attn::score_scaling::unfused, attn::score_scaling::fused})
        for (attn::exp2_policy ep : attn::all_exp2_policies)
        for (bool probed : {false, true}) {
          // The SFU's exponential with unfused scaling only (the scaling's code is shared).
          if (ep == attn::exp2_policy::sfu && sc != attn::score_scaling::unfused) continue;
          if (smoke && !in_smoke_subset(ci, sc, ep)) continue;
          attn::flash_options opt{m};
          opt.scaling = sc;
          opt.exp = ep;
          opt.seed = 99;
          forward_out f = forward(in, opt, probed);
          const std::string name = "case " + std::to_string(ci) + " " + std::string(attn::to_string(m)) + " " +
                                   std::string(attn::to_string(sc)) + (probed ? " probe" : "") +
                                   (ep == attn::exp2_policy::sfu ? " sfu" : "");
          out.emplace_back("forward " + name, f.digest);

          // The backward from this forward's outputs (unfused only: the scaling's code is shared).
          if (sc != attn::score_scaling::unfused) continue;
          std::vector<std::uint16_t> dq(s.q_size(), 0xdead), dk(s.k_size(), 0xdead), dv(s.v_size(), 0xdead);
          std::vector<float> delta(s.lse_size(), -7.0f);
          std::vector<probe::head_counters> bcounters(s.batch * s.heads);
          attn::flash_args g{in.prob, opt, {}, probed ? bcounters.data() : nullptr, {}};
          g.t = {in.q.data(), in.k.data(), in.v.data(), in.dout.data(), f.o.data(), f.o_f32.data(), f.lse.data(),
                 delta.data(), dq.data(), dk.data(), dv.data()};
          host::attention_backward(g, 2);
          fnv1a e;
          e.add(delta);
          e.add(dq);
          e.add(dk);
          e.add(dv);
          e.add(bcounters);
          out.emplace_back("backward " + name, e.h);
        }
  }
  return out;
}

// Pinned from the twin of commit 25851f0 (and of every kernel restructure since that kept its bits).
const std::pair<const char*, std::uint64_t> pinned[] = {
#include "flash_twin_digests.inc"
};

TEST(FlashTwinDigest, EveryOutputBitAsPinned) {
  const bool smoke = test::smoke_level && std::getenv("TIEBREAK_PRINT_DIGESTS") == nullptr;
  const auto got = compute_digests(smoke);
  if (smoke) {  // a subset: each computed case against the pinned entry of its name
    ASSERT_EQ(got.size(), 80u);
    int changed = 0;
    for (const auto& g : got) {  // (a lambda may not capture a structured binding in C++20)
      const auto* e = std::find_if(std::begin(pinned), std::end(pinned), [&](const auto& p) { return g.first == p.first; });
      ASSERT_NE(e, std::end(pinned)) << g.first << " is not pinned: re-pin (TIEBREAK_PRINT_DIGESTS=1)";
      if (g.second != e->second) {
        ++changed;
        ADD_FAILURE() << g.first << ": digest " << std::hex << g.second << ", pinned " << e->second;
      }
    }
    EXPECT_EQ(changed, 0) << "of " << got.size() << " cases (smoke subset)";
    return;
  }
  if (std::getenv("TIEBREAK_PRINT_DIGESTS") != nullptr) {
    std::printf("    // SPDX-License-Identifier: Apache-2.0\n    // flash_twin_digest_test.cpp's pinned digests (TIEBREAK_PRINT_DIGESTS=1 prints them)\n");
    for (const auto& [name, h] : got) std::printf("    {\"%s\", 0x%016llxull},\n", name.c_str(), static_cast<unsigned long long>(h));
  }
  ASSERT_EQ(got.size(), std::size(pinned)) << "the case matrix changed: re-pin (TIEBREAK_PRINT_DIGESTS=1)";
  int changed = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].first, pinned[i].first) << "the case matrix changed: re-pin (TIEBREAK_PRINT_DIGESTS=1)";
    if (got[i].second != pinned[i].second) {
      ++changed;
      ADD_FAILURE() << got[i].first << ": digest " << std::hex << got[i].second << ", pinned " << pinned[i].second;
    }
  }
  EXPECT_EQ(changed, 0) << "of " << got.size() << " cases; if the change is meant, re-pin with TIEBREAK_PRINT_DIGESTS=1";
}

// The digest sees a single bit: one input bit flipped changes a case's forward digest (so the
// pinned table is not a constant the test would accept anyway).
TEST(FlashTwinDigest, OneInputBitChangesTheDigests) {
  inputs in = make(cases[4], 1234 + 4);
  const std::uint64_t before = forward(in, {out_mode::bf16}, false).digest;
  in.k[1000] ^= 1;  // the last bit of one key element
  EXPECT_NE(forward(in, {out_mode::bf16}, false).digest, before);
}

}  // namespace
