// SPDX-License-Identifier: Apache-2.0
// The emulated backend of attn/flash.hpp and the twin's entry points.
#include "tiebreak/host/flash_twin.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/fp/sfu.hpp"

namespace tiebreak::host {
namespace {

using attn::mma_frags;

/// One warp's mma operands as matrices: A 16 x 16 (bf16), B 16 x 8 (bf16, k x n), C 16 x 8 (f32).
struct mma_operands {
  std::uint16_t a[16][16];
  std::uint16_t b[16][8];
  float c[16][8];
};

/// C = A B + C, every element through the model of mma.m16n8k16.row.col.f32.bf16.bf16.f32.
[[gnu::noinline]] void mma_tile(mma_operands& m) {
  static constexpr emu::mma_model model = emu::mma_entry(emu::mma_instr::mma_m16n8k16_bf16).model;
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 8; ++col) {
      const auto d = emu::mma_dot(model, f32_to_bits(m.c[row][col]), &m.a[row][0], 1, &m.b[0][col], 8);
      m.c[row][col] = bits_to_f32(static_cast<std::uint32_t>(d.bits));
    }
}

/// The backend of a block of T threads run on one host thread: each collective loops over the lanes.
template <int T>
struct twin_backend {
  static constexpr int slots = T;
  std::uint16_t* smem_ = nullptr;
  std::uint16_t* smem() const noexcept { return smem_; }
  static int slot(int tid) noexcept { return tid; }
  template <class F>
  void for_threads(F&& f) {
    for (int t = 0; t < T; ++t) f(t);
  }
  void sync() noexcept {}
  /// exp2_policy::sfu: the model of ex2.approx.ftz.f32, sm_90's interpolator (fp/sfu.hpp), inlined.
  static float ex2_approx_ftz(float x) { return sfu::ex2_approx_ftz_sm90(x); }
  void commit() noexcept {}
  template <int N>
  void wait() noexcept {}
  template <int R, int C>
  void load_tile(std::uint16_t* dst, const std::uint16_t* src, int valid) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) dst[attn::swz<C>(r, c)] = r < valid ? src[static_cast<std::size_t>(r) * C + c] : 0;
  }
  template <int N>
  void load_floats(float* dst, const float* src, int valid) {
    for (int i = 0; i < N; ++i) dst[i] = i < valid ? src[i] : 0.0f;
  }
  template <int C>
  static void load_a(std::uint32_t (&a)[4], const std::uint16_t* tile, int row0, int col0, int lane) {
    attn::load_a<C>(a, tile, row0, col0, lane);
  }
  template <int C>
  static void load_b2_nmajor(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2], const std::uint16_t* tile, int n0, int k0,
                             int lane) {
    attn::load_b_nmajor<C>(b0, tile, n0, k0, lane);
    attn::load_b_nmajor<C>(b1, tile, n0 + 8, k0, lane);
  }
  template <int C>
  static void load_b2_kmajor(std::uint32_t (&b0)[2], std::uint32_t (&b1)[2], const std::uint16_t* tile, int k0, int n0,
                             int lane) {
    attn::load_b_kmajor<C>(b0, tile, k0, n0, lane);
    attn::load_b_kmajor<C>(b1, tile, k0, n0 + 8, lane);
  }
  static std::uint32_t load_pair(const std::uint16_t* p) noexcept { return attn::pack2(p[0], p[1]); }
  /// Eight bf16 encodings or four floats, p[0] first (the device: one 16-byte load).
  template <class E>
  static void load16(E (&out)[16 / sizeof(E)], const E* p) noexcept {
    for (std::size_t i = 0; i < 16 / sizeof(E); ++i) out[i] = p[i];
  }
  /// Two adjacent elements (the lower index first); the device stores them as one 4- or 8-byte word.
  static void store2(std::uint16_t* p, std::uint16_t lo, std::uint16_t hi) noexcept {
    p[0] = lo;
    p[1] = hi;
  }
  static void store2(float* p, float lo, float hi) noexcept {
    p[0] = lo;
    p[1] = hi;
  }
  static std::uint32_t pack_bf16x2_rne(float lo, float hi) noexcept {
    return attn::pack2(f32_bits_to_bf16_rne(f32_to_bits(lo)), f32_bits_to_bf16_rne(f32_to_bits(hi)));
  }
  /// mma.m16n8k16.row.col.f32.bf16.bf16.f32 of each warp, through the model (emu/mma.hpp): the
  /// fragments are gathered by the PTX layout here, the 128 elements computed by mma_tile (compiled
  /// once, not once per call site).
  template <class F>
  void mma(F&& f) {
    for (int w = 0; w < T / 32; ++w) {
      mma_operands m;
      for (int lane = 0; lane < 32; ++lane) {
        const mma_frags x = f(32 * w + lane);
        const int g = lane >> 2, t = lane & 3;
        for (int r = 0; r < 4; ++r)
          for (int h = 0; h < 2; ++h)
            m.a[g + 8 * (r & 1)][2 * t + h + 8 * (r >> 1)] = static_cast<std::uint16_t>(x.a[r] >> (16 * h));
        for (int r = 0; r < 2; ++r)
          for (int h = 0; h < 2; ++h) m.b[2 * t + h + 8 * r][g] = static_cast<std::uint16_t>(x.b[r] >> (16 * h));
        for (int i = 0; i < 4; ++i) m.c[g + 8 * (i >> 1)][2 * t + (i & 1)] = x.c[i];
      }
      mma_tile(m);
      for (int lane = 0; lane < 32; ++lane) {
        const mma_frags x = f(32 * w + lane);
        const int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 4; ++i) x.c[i] = m.c[g + 8 * (i >> 1)][2 * t + (i & 1)];
      }
    }
  }
  /// The butterfly of a quad: v = op(v, v xor 1), then v = op(v, v xor 2), as the shuffles do.
  template <class V, class Op, class F>
  static void quad(F&& f, Op op) {
    for (int q = 0; q < T / 4; ++q) {
      V v[4], w[4];
      for (int i = 0; i < 4; ++i) v[i] = f(4 * q + i);
      for (int i = 0; i < 4; ++i) w[i] = op(v[i], v[i ^ 1]);
      for (int i = 0; i < 4; ++i) f(4 * q + i) = op(w[i], w[i ^ 2]);
    }
  }
  template <class F>
  void quad_max(F&& f) {
    quad<float>(f, [](float a, float b) { return f32::max(a, b); });
  }
  template <class F>
  void quad_sum(F&& f) {
    quad<float>(f, [](float a, float b) { return f32::add_rn(a, b); });
  }
  template <class F>
  void quad_count(F&& f) {
    quad<std::uint32_t>(f, [](std::uint32_t a, std::uint32_t b) { return a + b; });
  }
};

void check(const attn::flash_args& a, bool backward) {
  const attn::flash_error e = attn::flash_check(a, backward);
  if (e != attn::flash_error::ok) throw std::invalid_argument(attn::error_text(e));
}

/// Runs job(i) for i < n on `threads` host threads (in any order; the jobs write disjoint data).
template <class Job>
void parallel_blocks(std::size_t n, unsigned threads, Job job) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, n));
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) job(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  std::exception_ptr err;
  std::atomic<bool> failed{false};
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      try {
        for (std::size_t i; (i = next.fetch_add(1)) < n && !failed;) job(i);
      } catch (...) {
        if (!failed.exchange(true)) err = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  if (err) std::rethrow_exception(err);
}

template <int D, attn::out_mode M, attn::score_scaling Sc, class Probe, attn::exp2_policy E>
void forward_impl(const attn::flash_args& a, unsigned threads) {
  const attn::flash_consts c = attn::make_consts(a);
  const auto& s = a.prob.shape;
  constexpr std::size_t rows = attn::fwd_rows<Probe::enabled>;
  const std::size_t n_qt = (s.seq_q + rows - 1) / rows;
  const std::size_t n = n_qt * s.batch * s.heads;
  std::vector<probe::head_counters> partial(Probe::enabled ? n : 0);
  parallel_blocks(n, threads, [&](std::size_t i) {
    std::vector<std::uint16_t> smem(attn::fwd_smem_bytes<D, Probe::enabled> / 2 + 8);
    twin_backend<attn::fwd_threads> be{smem.data()};
    const std::size_t bh = i / n_qt, qt = i % n_qt;
    attn::flash_forward_block<twin_backend<attn::fwd_threads>, D, M, Sc, Probe, E>(
        be, a, c, static_cast<int>(bh / s.heads), static_cast<int>(bh % s.heads), static_cast<int>(qt),
        Probe::enabled ? &partial[i] : nullptr);
  });
  if constexpr (Probe::enabled) attn::merge_block_counters(a, partial.data(), n_qt);
}

template <attn::out_mode M, class Probe>
void delta_impl(const attn::flash_args& a, unsigned threads) {
  const auto& s = a.prob.shape;
  const std::size_t per_head = (s.seq_q + attn::bwd_threads - 1) / attn::bwd_threads;
  const std::size_t n = per_head * s.batch * s.heads;
  std::vector<probe::head_counters> partial(Probe::enabled ? n : 0);
  parallel_blocks(n, threads, [&](std::size_t i) {
    std::vector<std::uint16_t> smem(attn::delta_smem_bytes / 2 + 8);
    twin_backend<attn::bwd_threads> be{smem.data()};
    const std::size_t bh = i / per_head;
    attn::flash_delta_block<twin_backend<attn::bwd_threads>, M, Probe>(
        be, a, static_cast<int>(bh / s.heads), static_cast<int>(bh % s.heads), static_cast<int>(i % per_head),
        Probe::enabled ? &partial[i] : nullptr);
  });
  if constexpr (Probe::enabled) attn::merge_block_counters(a, partial.data(), per_head);
}

template <int D, attn::score_scaling Sc, attn::exp2_policy E>
void gradients(const attn::flash_args& a, unsigned threads) {
  const attn::flash_consts c = attn::make_consts(a);
  const auto& s = a.prob.shape;
  using be_t = twin_backend<attn::bwd_threads>;
  const std::size_t n_kb = (s.seq_k + attn::bwd_rows - 1) / attn::bwd_rows;
  parallel_blocks(n_kb * s.batch * s.kv_heads, threads, [&](std::size_t i) {
    std::vector<std::uint16_t> smem(attn::bwd_smem_bytes<D> / 2 + 8);
    be_t be{smem.data()};
    const std::size_t bk = i / n_kb;
    attn::flash_dkdv_block<be_t, D, Sc, E>(be, a, c, static_cast<int>(bk / s.kv_heads), static_cast<int>(bk % s.kv_heads),
                                        static_cast<int>(i % n_kb));
  });
  const std::size_t n_qt = (s.seq_q + attn::dq_rows - 1) / attn::dq_rows;
  parallel_blocks(n_qt * s.batch * s.heads, threads, [&](std::size_t i) {
    std::vector<std::uint16_t> smem(attn::dq_smem_bytes<D> / 2 + 8);
    be_t be{smem.data()};
    const std::size_t bh = i / n_qt;
    attn::flash_dq_block<be_t, D, Sc, E>(be, a, c, static_cast<int>(bh / s.heads), static_cast<int>(bh % s.heads),
                                      static_cast<int>(i % n_qt));
  });
}

}  // namespace

void attention_backward(const attn::flash_args& a, unsigned threads) {
  check(a, true);
  attn::dispatch_delta(a, [&]<attn::out_mode M, class Probe>() { delta_impl<M, Probe>(a, threads); });
  attn::dispatch_gradients(a, [&]<int D, attn::score_scaling Sc, attn::exp2_policy E>() { gradients<D, Sc, E>(a, threads); });
}

void attention_forward(const attn::flash_args& a, unsigned threads) {
  check(a, false);
  attn::dispatch_forward(a, [&]<int D, attn::out_mode M, attn::score_scaling Sc, class Probe, attn::exp2_policy E>() {
    forward_impl<D, M, Sc, Probe, E>(a, threads);
  });
}

}  // namespace tiebreak::host
