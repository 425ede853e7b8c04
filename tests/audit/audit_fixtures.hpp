// SPDX-License-Identifier: Apache-2.0
/// @file Test fixtures for the audit: seeded bf16 problems, an emulated kernel with a per-head
/// rounding mode, and writers for .npy folders and safetensors files.
#pragma once

#include <tiebreak/audit/inputs.hpp>
#include <tiebreak/fp/round.hpp>
#include <tiebreak/fp/value.hpp>
#include <tiebreak/fp/random.hpp>
#include <tiebreak/io/npy.hpp>
#include <tiebreak/io/safetensors.hpp>
#include <tiebreak/reference/attention.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace tiebreak::test {

/// splitmix64 and Box–Muller: the same numbers on every platform (std distributions are not).
struct rng {
  tiebreak::splitmix64_generator g;
  explicit rng(std::uint64_t seed) : g(seed) {}
  std::uint64_t next() { return g.next(); }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1p-53; }
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
  }
};

/// x rounded into `f` with mode `m` by the core, as a double (exact).
inline double round_to(const format_desc& f, double x, round_mode m) {
  return to_double(f, f64_bits_to(f, f64_to_bits(x), rounding{m, 0}).bits);
}

/// Random inputs (q, k, v, and dO when `with_do`), every value a bf16 (rounded by the core, rne).
/// v ~ N(v_mean, 1), q, k ~ N(0, 1), dO ~ N(do_mean, 1).
inline reference::attention_inputs make_problem(const reference::attention_shape& s, std::uint64_t seed,
                                                double v_mean = 0.0, bool with_do = false, double do_mean = 0.0) {
  rng g{seed};
  reference::attention_inputs in;
  in.shape = s;
  auto fill = [&](std::vector<double>& x, std::size_t n, double mean) {
    x.resize(n);
    for (double& e : x) e = round_to(formats::bf16, mean + g.normal(), round_mode::rne);
  };
  fill(in.q, s.q_size(), 0);
  fill(in.k, s.k_size(), 0);
  fill(in.v, s.v_size(), v_mean);
  if (with_do) fill(in.d_o, s.o_size(), do_mean);
  return in;
}

/// O in f64 by plain loops (independent of the Eigen reference), non-causal or causal.
inline std::vector<double> naive_o(const reference::attention_inputs& in, bool causal, double scale) {
  const auto& s = in.shape;
  std::vector<double> o(s.o_size(), 0.0);
  std::vector<double> p(s.seq_k);
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < s.heads; ++h) {
      const std::size_t bh = b * s.heads + h, bkv = b * s.kv_heads + s.kv_head(h);
      for (std::size_t i = 0; i < s.seq_q; ++i) {
        double m = -INFINITY;
        for (std::size_t j = 0; j < s.seq_k; ++j) {
          if (!reference::visible(s, causal, i, j)) {
            p[j] = -INFINITY;
            continue;
          }
          double acc = 0;
          for (std::size_t d = 0; d < s.dim; ++d)
            acc += in.q[(bh * s.seq_q + i) * s.dim + d] * in.k[(bkv * s.seq_k + j) * s.dim + d];
          p[j] = scale * acc;
          m = std::max(m, p[j]);
        }
        if (m == -INFINITY) continue;
        double l = 0;
        for (std::size_t j = 0; j < s.seq_k; ++j) {
          p[j] = p[j] == -INFINITY ? 0.0 : std::exp(p[j] - m);
          l += p[j];
        }
        for (std::size_t e = 0; e < s.dim_v; ++e) {
          double acc = 0;
          for (std::size_t j = 0; j < s.seq_k; ++j) acc += p[j] * in.v[(bkv * s.seq_k + j) * s.dim_v + e];
          o[(bh * s.seq_q + i) * s.dim_v + e] = acc / l;
        }
      }
    }
  return o;
}

/// An emulated kernel: O computed in f64 from the (bf16) inputs, then rounded to bf16 by the core
/// with mode(batch, head) (rz plants a magnitude bias, rne is unbiased).
/// `scale` 0 means 1/sqrt(dim).
inline audit::kernel_dump emulate_kernel(const reference::attention_inputs& in, bool causal,
                                         const std::function<round_mode(std::size_t, std::size_t)>& mode,
                                         double scale = 0) {
  const auto& s = in.shape;
  audit::kernel_dump d;
  d.inputs = in;
  d.o = naive_o(in, causal, scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(s.dim)));
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < s.heads; ++h) {
      const round_mode m = mode(b, h);
      for (std::size_t x = 0; x < s.seq_q * s.dim_v; ++x) {
        double& e = d.o[(b * s.heads + h) * s.seq_q * s.dim_v + x];
        e = round_to(formats::bf16, e, m);
      }
    }
  d.source = "emulated";
  d.container = "memory";
  d.layout = "bhsd";
  for (const char* n : {"q", "k", "v", "o"}) {
    audit::tensor_info t;
    t.name = n;
    t.dtype = "bf16";
    t.format = formats::bf16;
    d.tensors[n] = t;
  }
  if (!in.d_o.empty()) d.tensors["do"] = d.tensors["q"];
  return d;
}

/// Values as little-endian encodings of `f` (each value must be exactly representable).
inline std::vector<std::byte> encode_as(const format_desc& f, const std::vector<double>& xs) {
  const std::size_t item = static_cast<std::size_t>(f.storage_bits() / 8);
  std::vector<std::byte> out(xs.size() * item);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::uint64_t bits = f64_bits_to(f, f64_to_bits(xs[i]), rounding{round_mode::rne, 0}).bits;
    for (std::size_t b = 0; b < item; ++b) out[i * item + b] = std::byte{static_cast<unsigned char>(bits >> (8 * b))};
  }
  return out;
}

/// bhsd [b, h, s, d] → bshd [b, s, h, d].
inline std::vector<double> to_bshd(const std::vector<double>& x, std::size_t B, std::size_t H, std::size_t S, std::size_t D) {
  std::vector<double> out(x.size());
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t s = 0; s < S; ++s)
        for (std::size_t d = 0; d < D; ++d) out[((b * S + s) * H + h) * D + d] = x[((b * H + h) * S + s) * D + d];
  return out;
}

/// The tensors of a dump (bhsd) with their 4-d shapes in `bshd` or bhsd order.
struct named_tensor {
  std::vector<double> values;
  std::vector<std::size_t> shape;
};
inline std::map<std::string, named_tensor> dump_tensors(const audit::kernel_dump& d, bool bshd) {
  const auto& s = d.inputs.shape;
  std::map<std::string, named_tensor> out;
  auto add = [&](const std::string& n, const std::vector<double>& x, std::size_t H, std::size_t S, std::size_t D) {
    if (x.empty()) return;
    if (bshd) out[n] = {to_bshd(x, s.batch, H, S, D), {s.batch, S, H, D}};
    else out[n] = {x, {s.batch, H, S, D}};
  };
  add("q", d.inputs.q, s.heads, s.seq_q, s.dim);
  add("k", d.inputs.k, s.kv_heads, s.seq_k, s.dim);
  add("v", d.inputs.v, s.kv_heads, s.seq_k, s.dim_v);
  add("o", d.o, s.heads, s.seq_q, s.dim_v);
  add("do", d.inputs.d_o, s.heads, s.seq_q, s.dim_v);
  add("dq", d.dq, s.heads, s.seq_q, s.dim);
  add("dk", d.dk, s.kv_heads, s.seq_k, s.dim);
  add("dv", d.dv, s.kv_heads, s.seq_k, s.dim_v);
  if (!d.lse.empty()) out["lse"] = {d.lse, {s.batch, s.heads, s.seq_q}};
  return out;
}

/// Writes a dump as a safetensors file with every tensor in `f` (lse always F32).
inline void write_dump_safetensors(const std::filesystem::path& path, const audit::kernel_dump& d, bool bshd,
                                   io::st_dtype dtype = io::st_dtype::bf16) {
  const format_desc f = dtype == io::st_dtype::bf16 ? formats::bf16 : dtype == io::st_dtype::f16 ? formats::f16 : formats::f32;
  std::map<std::string, io::st_tensor_data> t;
  for (auto& [name, nt] : dump_tensors(d, bshd)) {
    const bool lse = name == "lse";
    t[name] = {lse ? io::st_dtype::f32 : dtype, nt.shape, encode_as(lse ? formats::f32 : f, nt.values)};
  }
  io::write_safetensors(path, t);
}

/// Writes a dump as a folder of f4 .npy files (bf16 values are exact in f4).
inline void write_dump_npy(const std::filesystem::path& dir, const audit::kernel_dump& d, bool bshd) {
  std::filesystem::create_directories(dir);
  for (auto& [name, nt] : dump_tensors(d, bshd)) {
    std::vector<float> f(nt.values.begin(), nt.values.end());
    io::write_npy<float>(dir / (name + ".npy"), f, nt.shape);
  }
}

/// A fresh empty temporary directory, removed with everything in it when the object dies.
class scoped_dir {
 public:
  explicit scoped_dir(std::filesystem::path p) : path_(std::move(p)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  scoped_dir(const scoped_dir&) = delete;
  scoped_dir& operator=(const scoped_dir&) = delete;
  ~scoped_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  operator const std::filesystem::path&() const noexcept { return path_; }
  friend std::filesystem::path operator/(const scoped_dir& d, const std::string& name) { return d.path_ / name; }

 private:
  std::filesystem::path path_;
};

inline scoped_dir temp_dir(const std::string& tag) {
  return scoped_dir(std::filesystem::temp_directory_path() /
                    ("tiebreak_audit_" + tag + "_" + std::to_string(::getpid())));
}

}  // namespace tiebreak::test
