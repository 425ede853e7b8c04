// SPDX-License-Identifier: Apache-2.0
/// @file tiebreak_gemm_dump: runs the project's tensor-core GEMM (gpu::mma_gemm) on random inputs and
/// writes a, b, d as a safetensors file for `tiebreak audit-gemm --identify` (docs/gemm-audit.md).
///
/// The kernel's scheme is known: one warp (mma.sync) or warpgroup (wgmma) per m x 8 output tile, the
/// instruction's k-chunks in increasing order, each instruction's D the next one's C, C = 0. With
/// --split-k S the K range is cut into S equal parts, each part is one mma_gemm launch from C = 0,
/// and the S partial products are summed on the host in f32, in order 0, 1, ..., S-1, rounded to
/// nearest-even (emu::add, the core's addition): audit-gemm must name "split-K S (in order)".
///
/// Usage: tiebreak_gemm_dump --out FILE [--instr mma.m16n8k16.bf16] [--m 2048] [--n 2048] [--k 4096]
///                           [--split-k 1] [--seed 1] [--spread 8] [--host 1]
/// --host 1 computes each part with emu::gemm, the kernel's host twin (bit-identical by construction,
/// checked on the device by tests/mma/gpu): the same file without a GPU, for trying the pipeline.
/// Inputs: values sig·2^e, sig uniform in (-2, 2), e uniform in [-spread, spread], rounded to the
/// instruction's operand format (RNE). Exit 2 on bad arguments, 1 without a usable GPU.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/emu/ops.hpp"
#include "tiebreak/gpu/mma.hpp"
#include "tiebreak/host/emu_gemm.hpp"

namespace {

using namespace tiebreak;

const char* st_dtype_of(const format_desc& f) {
  if (emu::same_format(f, formats::bf16)) return "BF16";
  if (emu::same_format(f, formats::f16)) return "F16";
  if (emu::same_format(f, formats::e4m3)) return "F8_E4M3";
  if (emu::same_format(f, formats::e5m2)) return "F8_E5M2";
  return "F32";
}
std::size_t item_of(const format_desc& f) { return f.storage_bits() <= 8 ? 1 : f.storage_bits() <= 16 ? 2 : 4; }

struct tensor {
  std::string name, dtype;
  std::size_t rows, cols, item;
  const std::vector<std::uint32_t>* v;
};

/// A safetensors file: 8-byte header length, the JSON header (padded to 8 bytes), the data (LE).
void write_safetensors(const std::string& path, const std::vector<tensor>& ts) {
  std::string h = "{";
  std::size_t off = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const std::size_t n = ts[i].rows * ts[i].cols * ts[i].item;
    if (i) h += ',';
    h.append("\"").append(ts[i].name).append("\":{\"dtype\":\"").append(ts[i].dtype).append("\",\"shape\":[");
    h.append(std::to_string(ts[i].rows)).append(",").append(std::to_string(ts[i].cols)).append("],\"data_offsets\":[");
    h.append(std::to_string(off)).append(",").append(std::to_string(off + n)).append("]}");
    off += n;
  }
  h += "}";
  while (h.size() % 8) h += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((h.size() >> (8 * i)) & 0xff);
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  std::vector<unsigned char> buf;
  for (const tensor& t : ts) {
    buf.resize(t.v->size() * t.item);
    for (std::size_t i = 0; i < t.v->size(); ++i)
      for (std::size_t b = 0; b < t.item; ++b) buf[i * t.item + b] = static_cast<unsigned char>(((*t.v)[i] >> (8 * b)) & 0xff);
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  }
  out.close();
  if (!out) throw std::runtime_error(path + ": write error");
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "tiebreak_gemm_dump: %s\nusage: tiebreak_gemm_dump --out FILE [--instr NAME] [--m M] [--n N] [--k K] [--split-k S] [--seed S] [--spread E]\n", why.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, instr_name = "mma.m16n8k16.bf16";
  long long M = 2048, N = 2048, K = 4096, split = 1, spread = 8, host = 0;
  unsigned long long seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("option " + a + " needs a value");
    const std::string v = argv[++i];
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    const bool num = end && *end == 0 && !v.empty();
    if (a == "--out") out = v;
    else if (a == "--instr") instr_name = v;
    else if (!num || n < 0) usage(a + ": '" + v + "' is not a non-negative integer");
    else if (a == "--m") M = n;
    else if (a == "--n") N = n;
    else if (a == "--k") K = n;
    else if (a == "--split-k") split = n;
    else if (a == "--seed") seed = static_cast<unsigned long long>(n);
    else if (a == "--spread") spread = n;
    else if (a == "--host") host = n;
    else usage("unknown option " + a);
  }
  if (out.empty()) usage("--out is required");
  emu::mma_instr instr{};
  if (!emu::parse_mma_instr(instr_name, instr)) usage("unknown instruction '" + instr_name + "'");
  const emu::mma_model& m = emu::mma_entry(instr).model;
  if (split < 1 || M <= 0 || N <= 0 || K <= 0 || M % m.m || N % 8 || K % split || (K / split) % m.k)
    usage("need M % " + std::to_string(m.m) + " == 0, N % 8 == 0, K % split == 0 and (K / split) % " + std::to_string(m.k) + " == 0");
  if (!host && !gpu::mma_available(instr)) {
    std::fprintf(stderr, "tiebreak_gemm_dump: %s: %s\n", instr_name.c_str(), gpu::mma_device_description().c_str());
    return 1;
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> sig(-2, 2);
  std::uniform_int_distribution<long long> ex(-spread, spread);
  auto random = [&](const format_desc& f, std::size_t n) {
    std::vector<std::uint32_t> v(n);
    for (auto& x : v)
      x = static_cast<std::uint32_t>(
          f64_bits_to(f, f64_to_bits(std::ldexp(sig(rng), static_cast<int>(ex(rng)))), rounding{round_mode::rne, 0}).bits);
    return v;
  };
  const auto Ms = static_cast<std::size_t>(M), Ns = static_cast<std::size_t>(N), Ks = static_cast<std::size_t>(K);
  const std::vector<std::uint32_t> A = random(m.a_fmt, Ms * Ks), B = random(m.b_fmt, Ks * Ns);
  const std::size_t kp = Ks / static_cast<std::size_t>(split);
  std::vector<std::uint32_t> D(Ms * Ns, 0), part(Ms * Ns), zero(Ms * Ns, 0), Ap(Ms * kp), Bp(kp * Ns);
  for (long long p = 0; p < split; ++p) {
    const std::size_t k0 = static_cast<std::size_t>(p) * kp;
    for (std::size_t i = 0; i < Ms; ++i)
      for (std::size_t k = 0; k < kp; ++k) Ap[i * kp + k] = A[i * Ks + k0 + k];
    for (std::size_t k = 0; k < kp; ++k)
      for (std::size_t j = 0; j < Ns; ++j) Bp[k * Ns + j] = B[(k0 + k) * Ns + j];
    if (host) emu::gemm(m, static_cast<int>(M), static_cast<int>(N), static_cast<int>(kp), Ap.data(), Bp.data(), zero.data(), part.data());
    else gpu::mma_gemm(instr, static_cast<int>(M), static_cast<int>(N), static_cast<int>(kp), Ap.data(), Bp.data(), zero.data(), part.data());
    for (std::size_t q = 0; q < D.size(); ++q)
      D[q] = p == 0 ? part[q]
                    : static_cast<std::uint32_t>(
                          emu::add(m.c_fmt, D[q], part[q], rounding{round_mode::rne, 0}).round.bits);
  }
  write_safetensors(out, {{"a", st_dtype_of(m.a_fmt), Ms, Ks, item_of(m.a_fmt), &A},
                          {"b", st_dtype_of(m.b_fmt), Ks, Ns, item_of(m.b_fmt), &B},
                          {"d", st_dtype_of(m.c_fmt), Ms, Ns, item_of(m.c_fmt), &D}});
  std::printf("tiebreak_gemm_dump: %s %lldx%lldx%lld split-K %lld -> %s (%s)\n", instr_name.c_str(), M, N, K, split,
              out.c_str(), host ? "host emulation" : gpu::mma_device_description().c_str());
  return 0;
}
