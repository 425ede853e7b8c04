// SPDX-License-Identifier: Apache-2.0
/// @file The attention kernels against their host twin, bit for bit: O (bf16 and f32), LSE, delta,
/// dQ, dK, dV and every probe counter, in every output mode and score scaling, with and without the
/// probe, on small problems (ragged lengths, causal and not, grouped-query heads, head dims 64 and
/// 128, rows that see no key, planted repeated maxima). Skipped without a GPU.
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../gpu_test_util.hpp"
#include "../../host/support/attn_inputs.hpp"
#include "../../host/support/debias_patterns.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/gpu/flash.hpp"
#include "tiebreak/host/flash_twin.hpp"

namespace tiebreak::attn {
namespace {

using gpu::testing::dev_buf;

struct tensors {
  std::vector<std::uint16_t> q, k, v, dout, o, dq, dk, dv;
  std::vector<float> o_f32, lse, delta;
  std::vector<probe::head_counters> counters;
  std::vector<float> dump;  ///< score, pbar, offset of the dumped rows (probed runs)
};

/// The rows a probed run dumps: the first row of head 0 and the last row of the last head.
std::vector<std::uint64_t> dump_rows(const shape& s) { return {s.q_row(0, 0, 0), s.q_row(s.batch - 1, s.heads - 1, s.seq_q - 1)}; }

using tiebreak::test::bf16_of;

/// `qa`: the planted queries' value in their odd columns (1: a scaled maximum of 8 at D = 64; ±16: ±128,
/// where the debias offset is bounded, and under -16 keys 4.. of every kv head lie further below).
/// `patterns`: support/debias_patterns.hpp's heads instead (keys of at most 1/4 in magnitude beside them).
tensors inputs(const shape& s, std::uint64_t seed, bool planted, double qa = 1.0, bool patterns = false) {
  tensors t;
  splitmix64_generator g{seed};
  auto fill = [&](std::vector<std::uint16_t>& x, std::size_t n, double amp) {
    x.resize(n);
    for (auto& e : x) e = bf16_of(amp * tiebreak::test::uniform_pm1(g));
  };
  fill(t.q, s.q_size(), 2.0);
  fill(t.k, s.k_size(), 2.0);
  fill(t.v, s.v_size(), 1.0);
  fill(t.dout, s.o_size(), 1.0);
  if (patterns) {
    fill(t.k, s.k_size(), 0.25);
    tiebreak::test::plant_debias_patterns(s, t.q, t.k, seed + 1);
  }
  if (planted) {  // keys 0..3 of every kv head equal, and every query of head 0 aligned with them
    for (std::size_t b = 0; b < s.batch; ++b)
      for (std::size_t kh = 0; kh < s.kv_heads; ++kh)
        for (std::size_t j = 0; j < 4 && j < s.seq_k; ++j)
          for (std::size_t c = 0; c < s.dim; ++c) t.k[s.k_offset(b, kh, j) + c] = bf16_of(c % 2 ? 2.0 : 0.0);
    for (std::size_t b = 0; b < s.batch; ++b)
      for (std::size_t i = 0; i < s.seq_q; ++i)
        for (std::size_t c = 0; c < s.dim; ++c) t.q[s.q_offset(b, 0, i) + c] = bf16_of(c % 2 ? qa : 0.0);
    if (qa < 0)
      for (std::size_t b = 0; b < s.batch; ++b)
        for (std::size_t kh = 0; kh < s.kv_heads; ++kh)
          for (std::size_t j = 4; j < s.seq_k; ++j)
            for (std::size_t c = 1; c < s.dim; c += 2) t.k[s.k_offset(b, kh, j) + c] = bf16_of(3.0);
  }
  return t;
}

void prepare_outputs(tensors& t, const shape& s) {
  t.o.assign(s.o_size(), 0);
  t.o_f32.assign(s.o_size(), 0);
  t.lse.assign(s.lse_size(), 0);
  t.delta.assign(s.lse_size(), 0);
  t.dq.assign(s.q_size(), 0);
  t.dk.assign(s.k_size(), 0);
  t.dv.assign(s.v_size(), 0);
  t.counters.assign(s.batch * s.heads, {});
  t.dump.assign(3 * 2 * s.seq_k, -7.0f);
}

void run_host(tensors& t, const problem& p, const flash_options& opt, bool probed, bool backward) {
  prepare_outputs(t, p.shape);
  flash_args a{p, opt, {}, probed ? t.counters.data() : nullptr, {}};
  a.t = {t.q.data(), t.k.data(), t.v.data(), t.dout.data(), t.o.data(), t.o_f32.data(), t.lse.data(),
         t.delta.data(), t.dq.data(), t.dk.data(), t.dv.data()};
  const auto rows = dump_rows(p.shape);
  const std::size_t n = 2 * p.shape.seq_k;
  if (probed) a.dump = {rows.data(), 2, t.dump.data(), t.dump.data() + n, t.dump.data() + 2 * n};
  host::attention_forward(a);
  if (backward) host::attention_backward(a);
}

void run_device(tensors& t, const problem& p, const flash_options& opt, bool probed, bool backward) {
  const shape& s = p.shape;
  prepare_outputs(t, s);
  dev_buf<std::uint16_t> q(s.q_size()), k(s.k_size()), v(s.v_size()), dout(s.o_size()), o(s.o_size()), dq(s.q_size()),
      dk(s.k_size()), dv(s.v_size());
  dev_buf<float> of(s.o_size()), lse(s.lse_size()), delta(s.lse_size());
  ASSERT_TRUE(q.p && k.p && v.p && dout.p && o.p && dq.p && dk.p && dv.p && of.p && lse.p && delta.p);
  TIEBREAK_CUDA_OK(q.put(t.q));
  TIEBREAK_CUDA_OK(k.put(t.k));
  TIEBREAK_CUDA_OK(v.put(t.v));
  TIEBREAK_CUDA_OK(dout.put(t.dout));
  flash_args a{p, opt, {}, probed ? t.counters.data() : nullptr, {}};
  a.t = {q.p, k.p, v.p, dout.p, o.p, of.p, lse.p, delta.p, dq.p, dk.p, dv.p};
  const auto rows = dump_rows(s);
  dev_buf<std::uint64_t> drows(2);
  dev_buf<float> dump(t.dump.size());
  ASSERT_TRUE(drows.p && dump.p);
  TIEBREAK_CUDA_OK(drows.put(rows));
  TIEBREAK_CUDA_OK(dump.put(t.dump));
  const std::size_t n = 2 * s.seq_k;
  if (probed) a.dump = {drows.p, 2, dump.p, dump.p + n, dump.p + 2 * n};
  gpu::attention_forward(a);
  TIEBREAK_CUDA_OK(dump.get(t.dump));
  if (backward) gpu::attention_backward(a);
  TIEBREAK_CUDA_OK(o.get(t.o));
  TIEBREAK_CUDA_OK(of.get(t.o_f32));
  TIEBREAK_CUDA_OK(lse.get(t.lse));
  TIEBREAK_CUDA_OK(delta.get(t.delta));
  TIEBREAK_CUDA_OK(dq.get(t.dq));
  TIEBREAK_CUDA_OK(dk.get(t.dk));
  TIEBREAK_CUDA_OK(dv.get(t.dv));
}

template <class T>
std::size_t mismatches(const std::vector<T>& a, const std::vector<T>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

struct shape_case {
  shape s;
  bool causal;
  bool planted;
  double qa = 1.0;
  bool nonfinite_v = false;  ///< NaN and Inf in V (forward only): O has NaN columns beside finite ones
  bool patterns = false;     ///< support/debias_patterns.hpp: repeated maxima in one lane, across lanes, across tiles
};
const shape_case cases[] = {
    {{1, 2, 1, 70, 100, 64, 64}, false, true},
    {{1, 2, 2, 100, 70, 64, 64}, true, false},
    {{2, 2, 1, 65, 129, 128, 128}, true, true},
    {{1, 4, 2, 128, 128, 128, 128}, false, false},
    {{1, 1, 1, 1, 1, 64, 64}, true, false},
    {{1, 2, 1, 70, 100, 64, 64}, false, true, 16.0},   // debias: the bounded offset (scaled maximum +128)
    {{2, 2, 1, 65, 129, 128, 128}, true, true, -16.0},  // and -128 (D = 128: +-256)
    // Several blocks of every kernel per head (dQ: three 128-row blocks, launched in reverse when
    // causal; dK/dV: five 64-key blocks), the last of each ragged.
    {{1, 2, 1, 300, 300, 128, 128}, true, false},
    // A NaN in V's column 3 and +Inf in its column 10 (a key each, every row sees both): the stochastic
    // output's pairs (2, 3) and (10, 11) then hold a NaN beside a finite value (the NaN repair path of
    // f32x2_bits_to_bf16x2_sr), the other pairs of those rows none.
    {{1, 2, 1, 70, 100, 64, 64}, false, false, 1.0, true},
    // Each way a row's maximum can repeat (or repeat and then be overtaken), a head each: within a
    // lane, across lanes, in a later tile (the debias count's every path).
    {{1, 6, 6, 70, 200, 64, 64}, false, false, 1.0, false, true},
    {{1, 6, 6, 70, 200, 128, 128}, true, false, 1.0, false, true},
};

/// TIEBREAK_FLASH_GPU_REDUCED=1 (tools/device-check.sh's sanitize stage): every other shape, the probed
/// unfused and the unprobed fused instantiations only — compute-sanitizer runs every access checked.
bool reduced() {
  const char* e = std::getenv("TIEBREAK_FLASH_GPU_REDUCED");
  return e && *e == '1';
}

/// exp2_policy::sfu's twin uses the table of sm_90 (the H200's unit; tests/gpu/fp/sfu_gpu_test.cu):
/// on other devices its cases are left out, said once.
bool sfu_modelled() {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  static const bool said = [&] {
    if (major != 9 || minor != 0)
      std::printf("flash: exp2_policy::sfu not compared on sm_%d%d (its model is sm_90's)\n", major, minor);
    return true;
  }();
  (void)said;
  return major == 9 && minor == 0;
}

void compare_all(bool backward) {
  std::size_t compared = 0;
  int ci = 0;
  for (const auto& sc : cases) {
    if (reduced() && ci++ % 2 == 1) continue;
    if (sc.nonfinite_v && backward) continue;
    problem p{sc.s, sc.causal ? mask_kind::causal : mask_kind::none, 1.0 / std::sqrt(static_cast<double>(sc.s.dim))};
    tensors in = inputs(sc.s, 7 + sc.s.seq_q, sc.planted, sc.qa, sc.patterns);
    if (sc.nonfinite_v) {
      in.v[sc.s.v_offset(0, 0, 5) + 3] = 0x7fc0;   // NaN
      in.v[sc.s.v_offset(0, 0, 9) + 10] = 0x7f80;  // +Inf
    }
    for (out_mode m : all_out_modes) {
      for (score_scaling scal : {score_scaling::unfused, score_scaling::fused}) {
        for (exp2_policy ep : all_exp2_policies)
        for (bool probed : {false, true}) {
          if (reduced() && probed != (scal == score_scaling::unfused)) continue;
          // The SFU's exponential on the device, its model (sm_90's table) in the twin.
          if (ep == exp2_policy::sfu && !sfu_modelled()) continue;
          flash_options opt{m, scal, 2.0f, 99, 1e-3f};
          opt.exp = ep;
          tensors h = in, d = in;
          run_host(h, p, opt, probed, backward);
          run_device(d, p, opt, probed, backward);
          const std::string what = std::string(to_string(m)) + " " + std::string(to_string(scal)) +
                                   (probed ? " probed" : "") + (ep == exp2_policy::sfu ? " sfu" : "") + " seq " + std::to_string(sc.s.seq_q) + "x" +
                                   std::to_string(sc.s.seq_k) + " dim " + std::to_string(sc.s.dim);
          EXPECT_EQ(mismatches(h.o, d.o), 0u) << "O " << what;
          EXPECT_EQ(mismatches(h.o_f32, d.o_f32), 0u) << "O f32 " << what;
          EXPECT_EQ(mismatches(h.lse, d.lse), 0u) << "LSE " << what;
          if (m == out_mode::debias && sc.qa != 1.0) {  // the bounded offset: no NaN from a flushed row
            std::size_t nonfinite = 0;
            for (const std::uint16_t e : d.o) nonfinite += (e & 0x7f80u) == 0x7f80u;
            EXPECT_EQ(nonfinite, 0u) << "non-finite O " << what;
          }
          if (backward) {
            EXPECT_EQ(mismatches(h.delta, d.delta), 0u) << "delta " << what;
            EXPECT_EQ(mismatches(h.dq, d.dq), 0u) << "dQ " << what;
            EXPECT_EQ(mismatches(h.dk, d.dk), 0u) << "dK " << what;
            EXPECT_EQ(mismatches(h.dv, d.dv), 0u) << "dV " << what;
          }
          EXPECT_EQ(h.counters, d.counters) << "counters " << what;
          EXPECT_EQ(mismatches(h.dump, d.dump), 0u) << "row dump " << what;
          compared += h.o.size() + h.lse.size() + (backward ? h.dq.size() + h.dk.size() + h.dv.size() + h.delta.size() : 0);
        }
      }
    }
  }
  std::printf("flash %s: %zu elements compared, twin == device\n", backward ? "forward+backward" : "forward", compared);
}

TEST(FlashGpu, ForwardBitIdenticalToTwin) {
  TIEBREAK_REQUIRE_GPU();
  ASSERT_TRUE(gpu::attention_available());
  compare_all(false);
}

// The launchers sum the probe's block counters per head on the device, staging 128 blocks at a time:
// 129 query tiles of one head (129 fwd_rows<true> rows) take two chunks, the second of one block. Short keys keep
// the twin's share small; planted rows give repeated maxima and P-bar == 1 events to count.
TEST(FlashGpu, ProbeCountersOfMoreThan128BlocksPerHead) {
  TIEBREAK_REQUIRE_GPU();
  const shape s{1, 2, 1, 129 * fwd_rows<true>, 64, 64, 64};
  const problem p{s, mask_kind::none, 0.125};
  const tensors in = inputs(s, 11, true);
  for (out_mode m : {out_mode::bf16, out_mode::debias}) {
    const flash_options opt{m, score_scaling::unfused, 2.0f, 99, 1e-3f};
    tensors h = in, d = in;
    run_host(h, p, opt, true, false);
    run_device(d, p, opt, true, false);
    EXPECT_EQ(mismatches(h.o, d.o), 0u) << to_string(m);
    EXPECT_EQ(h.counters, d.counters) << to_string(m);
    if (m == out_mode::bf16) EXPECT_GT(h.counters[0].p_one, 0u) << "the planted head counts P-bar == 1 events";
    EXPECT_EQ(h.counters[0].output_error.count + h.counters[1].output_error.count, s.o_size());
  }
}

// A tensor that does not start on a 16-byte boundary is refused before anything is launched (the
// kernels copy rows 16 bytes at a time: inside a kernel it would be a sticky misaligned-address
// fault). Checked ahead of every CUDA call, so this runs without a GPU too (host pointers, never read).
TEST(FlashGpu, MisalignedTensorsAreRefusedBeforeLaunch) {
  const shape s{1, 1, 1, 64, 64, 64, 64};
  const problem p{s, mask_kind::none, 0.125};
  std::vector<std::uint16_t> buf(8 * s.q_size() + 64);
  auto aligned = [&](std::size_t at) {
    auto addr = reinterpret_cast<std::uintptr_t>(buf.data() + at);
    return reinterpret_cast<std::uint16_t*>((addr + 15) / 16 * 16);
  };
  std::vector<float> f(2 * s.o_size() + 2 * s.lse_size() + 16);
  flash_args a{p, flash_options{}, {}, nullptr, {}};
  a.t = {aligned(0), aligned(s.q_size() + 8), aligned(2 * s.q_size() + 16), aligned(3 * s.q_size() + 24),
         aligned(4 * s.q_size() + 32), nullptr, f.data(), f.data() + s.lse_size(), aligned(5 * s.q_size() + 40),
         aligned(6 * s.q_size() + 48), aligned(7 * s.q_size() + 56)};
  auto refused = [&](auto call, const char* name) {
    try {
      call();
      ADD_FAILURE() << "a misaligned " << name << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("tensor ") + name), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "misaligned " << name << ": not refused up front: " << e.what();
    }
  };
  flash_args q = a;
  q.t.q = a.t.q + 1;
  refused([&] { gpu::attention_forward(q); }, "q");
  flash_args v = a;
  v.t.v = a.t.v + 1;
  refused([&] { gpu::attention_forward(v); }, "v");
  flash_args d = a;
  d.t.dout = a.t.dout + 1;
  refused([&] { gpu::attention_backward(d); }, "dout");
}

// The gradient kernels' shared memory is sized for two blocks per SM (attn::bwd_smem_bytes: exactly
// two at D = 128 on the H100 and H200); a layout that grows past it halves their occupancy silently.
TEST(FlashGpu, GradientKernelsKeepTheirBlocksPerSM) {
  TIEBREAK_REQUIRE_GPU();
  for (int dim : {64, 128}) {
    const gpu::gradient_occupancy o = gpu::attention_gradient_occupancy(dim);
    std::printf("flash: D = %d: dK/dV %d, dQ %d blocks per SM\n", dim, o.dkdv, o.dq);
    // The SFU instantiations. D = 64: three of each (dK/dV by attn::bwd_kv_min_blocks, dQ by ptxas's
    // own 168 registers); D = 128: two.
    const int want = dim == 64 ? 3 : 2;
    EXPECT_GE(o.dkdv, want) << "dim " << dim;
    EXPECT_GE(o.dq, want) << "dim " << dim;
  }
  EXPECT_THROW(gpu::attention_gradient_occupancy(96), std::invalid_argument);
}

TEST(FlashGpu, ForwardAndBackwardBitIdenticalToTwin) {
  TIEBREAK_REQUIRE_GPU();
  compare_all(true);
}

}  // namespace
}  // namespace tiebreak::attn
