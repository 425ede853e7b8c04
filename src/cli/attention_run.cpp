// SPDX-License-Identifier: Apache-2.0
/// @file The attention command's workload, its call into the twin or the GPU kernels, and its results' forms.
#ifdef TIEBREAK_HAVE_ANALYSIS
#include "attention_run.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"
#include "tiebreak/host/flash_twin.hpp"
#include "tiebreak/io/json.hpp"

#ifdef TIEBREAK_HAVE_GPU_ATTENTION
#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/flash.hpp"
#endif

namespace tiebreak::cli::attention {
namespace {

/// bf16 encoding of x, round-to-nearest-even by the core.
std::uint16_t to_bf16(double x) {
  return static_cast<std::uint16_t>(f64_bits_to(formats::bf16, f64_to_bits(x), rounding{round_mode::rne, 0}).bits);
}
double bf16_value(std::uint16_t b) { return to_double(formats::bf16, b); }

/// The generator of one tensor of one seed (tags: 1 q, 2 k, 3 v, 4 dO, 5 the planting).
splitmix64_generator stream(std::uint64_t seed, std::uint64_t tag) {
  return splitmix64_generator(splitmix64(seed) + tag * 0x632be59bd9b4e019ull);
}

void fill(std::vector<std::uint16_t>& x, std::size_t n, splitmix64_generator g, double mean, double sd) {
  x.resize(n);
  for (std::uint16_t& e : x) e = to_bf16(mean + sd * irwin_hall4_unit(g));
}

constexpr double do_mean = 0.5;

}  // namespace

inputs draw(const workload& w) {
  const attn::shape& s = w.shape;
  inputs in;
  in.shape = s;
  fill(in.q, s.q_size(), stream(w.seed, 1), 0.0, 1.0);
  fill(in.k, s.k_size(), stream(w.seed, 2), 0.0, 1.0);
  fill(in.v, s.v_size(), stream(w.seed, 3), 1.0, 0.5);
  draw_do(in, w.seed);

  // Pairs of identical keys: in each block of 16 keys, key a (one of the first 8) copied to a + 8.
  splitmix64_generator g = stream(w.seed, 5);
  std::vector<std::pair<std::size_t, std::size_t>> pairs;  // (a, b = a + 8), b increasing
  for (std::size_t base = 0; base + 8 < s.seq_k; base += 16) {
    const std::size_t span = std::min<std::size_t>(8, s.seq_k - base - 8);
    const std::size_t a = base + uniform_below(g, span);
    pairs.emplace_back(a, a + 8);
  }
  const std::uint16_t quarter = 125u << 7;  // 0.25: the binade [0.25, 0.5) holds quarter + 0 .. 127
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t kvh = 0; kvh < s.kv_heads; ++kvh) {
      for (const auto& [ka, kb] : pairs) {
        for (std::size_t c = 0; c < s.dim; ++c) in.k[s.k_offset(b, kvh, kb) + c] = in.k[s.k_offset(b, kvh, ka) + c];
        for (std::size_t c = 0; c < s.dim_v; ++c) {
          in.v[s.v_offset(b, kvh, ka) + c] = static_cast<std::uint16_t>(quarter + uniform_below(g, 128));
          in.v[s.v_offset(b, kvh, kb) + c] = static_cast<std::uint16_t>(quarter + uniform_below(g, 128));
        }
        ++in.planted_pairs;
      }
    }
  }
  // Rows with a repeated maximum: q = 2 k_a + N(0, 0.5) for a pair (a, b) the row sees. Since k_b = k_a,
  // the scores of a and b are equal whatever q is; the noise gives every row its own maximum (rows
  // sharing a pair would otherwise share their P-bar values, and their errors would not be independent).
  const attn::problem p{s, w.causal ? attn::mask_kind::causal : attn::mask_kind::none, 1.0};
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t h = 0; h < s.heads; ++h) {
      const std::size_t kvh = s.kv_head(h);
      for (std::size_t i = 0; i < s.seq_q; ++i) {
        const double u = static_cast<double>(g.next() >> 11) * 0x1p-53;
        if (!(u < w.tie_share)) continue;
        const std::size_t vis = p.visible_keys(i);
        std::size_t eligible = 0;
        while (eligible < pairs.size() && pairs[eligible].second < vis) ++eligible;
        if (eligible == 0) continue;
        const std::size_t a = pairs[uniform_below(g, eligible)].first;
        for (std::size_t c = 0; c < s.dim; ++c)
          in.q[s.q_offset(b, h, i) + c] = to_bf16(2.0 * bf16_value(in.k[s.k_offset(b, kvh, a) + c]) + 0.5 * irwin_hall4_unit(g));
        ++in.planted_rows;
      }
    }
  }
  return in;
}

void draw_do(inputs& in, std::uint64_t seed) {
  fill(in.dout, in.shape.o_size(), stream(seed, 4), do_mean, 1.0);
  in.do_drawn = true;
}

inputs read(const std::string& path, audit::layout layout, std::uint64_t seed) {
  audit::load_options lo;
  lo.tensor_layout = layout;
  lo.inputs_only = true;
  const audit::kernel_dump d = audit::load_kernel_dump(path, lo);
  inputs in;
  in.shape = d.inputs.shape;
  auto encode = [&](const char* name, const std::vector<double>& x, std::vector<std::uint16_t>& out) {
    out.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        out[i] = std::signbit(x[i]) ? 0xffc0u : 0x7fc0u;
        continue;
      }
      const round_result r = f64_bits_to(formats::bf16, f64_to_bits(x[i]), rounding{round_mode::rne, 0});
      if (r.inexact() || r.overflow())
        throw audit::input_error(d.source + ": tensor '" + name + "' holds a value that is not a bf16 value (element " +
                                 std::to_string(i) + " in bhsd order: " + fmt::format("{}", x[i]) +
                                 "); the attention kernels take bf16 inputs");
      out[i] = static_cast<std::uint16_t>(r.bits);
    }
  };
  encode("q", d.inputs.q, in.q);
  encode("k", d.inputs.k, in.k);
  encode("v", d.inputs.v, in.v);
  if (d.inputs.d_o.empty()) draw_do(in, seed);
  else encode("do", d.inputs.d_o, in.dout);
  return in;
}

std::size_t nonfinite(const std::vector<std::uint16_t>& x) {
  std::size_t n = 0;
  for (std::uint16_t e : x) n += (e & 0x7f80u) == 0x7f80u;
  return n;
}

const char* to_string(backend b) { return b == backend::twin ? "host twin" : "gpu"; }

std::string gpu_unavailable_reason() {
#ifdef TIEBREAK_HAVE_GPU_ATTENTION
  if (gpu::attention_available()) return "";
  return "no CUDA device of compute capability 9.0 that runs the attention kernels";
#else
  return "this build has no GPU attention kernels";
#endif
}

namespace {

#ifdef TIEBREAK_HAVE_GPU_ATTENTION
/// The call on the device: inputs up, forward and backward, outputs down (counters stay a host table).
void run_gpu(const inputs& in, attn::flash_args a, outputs& out) {
  using gpu::detail::device_buffer;
  constexpr gpu::detail::cuda_check check{"tiebreak attention"};
  auto up = [&](const auto& buf, const auto& host) {
    check(cudaMemcpy(buf.data(), host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice), "copy to the device");
  };
  auto down = [&](auto& host, const auto& buf) {
    check(cudaMemcpy(host.data(), buf.data(), host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost), "copy to the host");
  };
  device_buffer<std::uint16_t> q(in.q.size(), check), k(in.k.size(), check), v(in.v.size(), check),
      dout(in.dout.size(), check);
  device_buffer<std::uint16_t> ob(out.o_bf16.size(), check), dq(out.dq.size(), check), dk(out.dk.size(), check),
      dv(out.dv.size(), check);
  device_buffer<float> of(out.o_f32.size(), check), lse(out.lse.size(), check), delta(out.delta.size(), check);
  up(q, in.q);
  up(k, in.k);
  up(v, in.v);
  up(dout, in.dout);
  a.t = attn::flash_tensors{q.data(), k.data(), v.data(), dout.data(), out.o_bf16.empty() ? nullptr : ob.data(),
                            of.data(), lse.data(), delta.data(), dq.data(), dk.data(), dv.data()};
  const auto t0 = std::chrono::steady_clock::now();
  gpu::attention_forward(a);
  const auto t1 = std::chrono::steady_clock::now();
  gpu::attention_backward(a);
  const auto t2 = std::chrono::steady_clock::now();
  out.seconds_forward = std::chrono::duration<double>(t1 - t0).count();
  out.seconds_backward = std::chrono::duration<double>(t2 - t1).count();
  if (!out.o_bf16.empty()) down(out.o_bf16, ob);
  down(out.o_f32, of);
  down(out.lse, lse);
  down(out.delta, delta);
  down(out.dq, dq);
  down(out.dk, dk);
  down(out.dv, dv);
}
#endif

}  // namespace

void check_call(const attn::problem& p, const attn::flash_options& o) {
  std::uint16_t h = 0;  // stand-ins: flash_check looks at the pointers only to see that they are set
  float f = 0;
  attn::flash_args a;
  a.prob = p;
  a.opt = o;
  a.t = attn::flash_tensors{&h, &h, &h, &h, &h, &f, &f, &f, &h, &h, &h};
  if (const attn::flash_error e = attn::flash_check(a, true); e != attn::flash_error::ok)
    throw std::invalid_argument(attn::error_text(e));
}

outputs run(const inputs& in, const attn::problem& p, const attn::flash_options& o, backend be, unsigned threads) {
  const attn::shape& s = p.shape;
  outputs out;
  if (o.mode != attn::out_mode::fp32) out.o_bf16.resize(s.o_size());
  out.o_f32.resize(s.o_size());
  out.lse.resize(s.lse_size());
  out.delta.resize(s.lse_size());
  out.dq.resize(s.q_size());
  out.dk.resize(s.k_size());
  out.dv.resize(s.v_size());
  out.counters.assign(s.batch * s.heads, probe::head_counters{});
  attn::flash_args a;
  a.prob = p;
  a.opt = o;
  a.t = attn::flash_tensors{in.q.data(), in.k.data(), in.v.data(), in.dout.data(),
                            out.o_bf16.empty() ? nullptr : out.o_bf16.data(), out.o_f32.data(), out.lse.data(),
                            out.delta.data(), out.dq.data(), out.dk.data(), out.dv.data()};
  a.counters = out.counters.data();
  if (const attn::flash_error e = attn::flash_check(a, true); e != attn::flash_error::ok)
    throw std::invalid_argument(attn::error_text(e));
  if (be == backend::gpu) {
#ifdef TIEBREAK_HAVE_GPU_ATTENTION
    run_gpu(in, a, out);
    return out;
#else
    throw std::runtime_error(gpu_unavailable_reason());
#endif
  }
  const auto t0 = std::chrono::steady_clock::now();
  host::attention_forward(a, threads);
  const auto t1 = std::chrono::steady_clock::now();
  host::attention_backward(a, threads);
  const auto t2 = std::chrono::steady_clock::now();
  out.seconds_forward = std::chrono::duration<double>(t1 - t0).count();
  out.seconds_backward = std::chrono::duration<double>(t2 - t1).count();
  return out;
}

namespace {

std::vector<std::byte> le_bytes(const std::vector<std::uint16_t>& x) {
  std::vector<std::byte> b(2 * x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    b[2 * i] = static_cast<std::byte>(x[i] & 0xff);
    b[2 * i + 1] = static_cast<std::byte>(x[i] >> 8);
  }
  return b;
}
std::vector<std::byte> le_bytes(const std::vector<float>& x) {
  std::vector<std::byte> b(4 * x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t u = f32_to_bits(x[i]);
    for (int j = 0; j < 4; ++j) b[4 * i + j] = static_cast<std::byte>((u >> (8 * j)) & 0xff);
  }
  return b;
}

}  // namespace

std::map<std::string, io::st_tensor_data> to_safetensors(const inputs& in, const outputs& out, attn::out_mode mode) {
  const attn::shape& s = in.shape;
  const std::vector<std::size_t> qs{s.batch, s.heads, s.seq_q, s.dim}, ks{s.batch, s.kv_heads, s.seq_k, s.dim},
      vs{s.batch, s.kv_heads, s.seq_k, s.dim_v}, os{s.batch, s.heads, s.seq_q, s.dim_v}, ls{s.batch, s.heads, s.seq_q};
  std::map<std::string, io::st_tensor_data> t;
  t["q"] = {io::st_dtype::bf16, qs, le_bytes(in.q)};
  t["k"] = {io::st_dtype::bf16, ks, le_bytes(in.k)};
  t["v"] = {io::st_dtype::bf16, vs, le_bytes(in.v)};
  t["do"] = {io::st_dtype::bf16, os, le_bytes(in.dout)};
  if (mode == attn::out_mode::fp32) t["o"] = {io::st_dtype::f32, os, le_bytes(out.o_f32)};
  else t["o"] = {io::st_dtype::bf16, os, le_bytes(out.o_bf16)};
  t["lse"] = {io::st_dtype::f32, ls, le_bytes(out.lse)};
  t["delta"] = {io::st_dtype::f32, ls, le_bytes(out.delta)};
  t["dq"] = {io::st_dtype::bf16, qs, le_bytes(out.dq)};
  t["dk"] = {io::st_dtype::bf16, ks, le_bytes(out.dk)};
  t["dv"] = {io::st_dtype::bf16, vs, le_bytes(out.dv)};
  return t;
}

audit::kernel_dump to_dump(const inputs& in, const outputs& out, attn::out_mode mode, const format_desc& o_format) {
  const attn::shape& s = in.shape;
  audit::kernel_dump d;
  d.source = "(in memory)";
  d.container = "memory";
  d.layout = "bhsd";
  d.inputs.shape = s;
  auto info = [&](const std::string& name, const char* dtype, const format_desc& f, std::vector<std::size_t> shape,
                  const std::vector<double>& x) {
    audit::tensor_info t;
    t.name = name;
    t.dtype = dtype;
    t.format = f;
    t.shape = std::move(shape);
    t.elements = x.size();
    for (double e : x) t.nonfinite += !std::isfinite(e);
    d.tensors[name] = t;
  };
  auto decode = [](const std::vector<std::uint16_t>& x) {
    std::vector<double> r(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) r[i] = bf16_value(x[i]);
    return r;
  };
  auto widen = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  const std::vector<std::size_t> qs{s.batch, s.heads, s.seq_q, s.dim}, ks{s.batch, s.kv_heads, s.seq_k, s.dim},
      vs{s.batch, s.kv_heads, s.seq_k, s.dim_v}, os{s.batch, s.heads, s.seq_q, s.dim_v};
  d.inputs.q = decode(in.q);
  info("q", "bf16", formats::bf16, qs, d.inputs.q);
  d.inputs.k = decode(in.k);
  info("k", "bf16", formats::bf16, ks, d.inputs.k);
  d.inputs.v = decode(in.v);
  info("v", "bf16", formats::bf16, vs, d.inputs.v);
  d.inputs.d_o = decode(in.dout);
  info("do", "bf16", formats::bf16, os, d.inputs.d_o);
  const bool f32_o = mode == attn::out_mode::fp32;
  d.o = f32_o ? widen(out.o_f32) : decode(out.o_bf16);
  info("o", f32_o ? "f32" : "bf16", o_format, os, d.o);
  d.lse = widen(out.lse);
  info("lse", "f32", formats::f32, {s.batch, s.heads, s.seq_q}, d.lse);
  d.dq = decode(out.dq);
  info("dq", "bf16", formats::bf16, qs, d.dq);
  d.dk = decode(out.dk);
  info("dk", "bf16", formats::bf16, ks, d.dk);
  d.dv = decode(out.dv);
  info("dv", "bf16", formats::bf16, vs, d.dv);
  return d;
}

double mean_of(const probe::signed_moments& m) {
  return m.count ? m.sum / static_cast<double>(m.count) : 0.0;
}
double sd_of(const probe::signed_moments& m) {
  if (m.count < 2) return 0.0;
  const double n = static_cast<double>(m.count), mean = m.sum / n;
  const double var = (m.sum_sq - n * mean * mean) / (n - 1);
  return var > 0 ? std::sqrt(var) : 0.0;
}

nlohmann::json moments_json(const probe::signed_moments& m) {
  return {{"count", m.count},
          {"positive", m.positive},
          {"negative", m.negative},
          {"zero", m.count - m.positive - m.negative},
          {"sum", io::json_number(m.sum)},
          {"sum_sq", io::json_number(m.sum_sq)},
          {"mean", io::json_number(mean_of(m))},
          {"sd", io::json_number(sd_of(m))}};
}

}  // namespace tiebreak::cli::attention
#endif
