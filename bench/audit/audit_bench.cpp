// SPDX-License-Identifier: Apache-2.0
/// @file Audit timings. Google Benchmark: the host f64 reference alone (forward, forward +
/// backward) and the whole host audit on the host target, B=1, H=8, S=1024, D=64.
/// `audit_bench --gpu-timing [--shape B,H,S,D] [--causal] [--file PATH]`: the GPU goal (default
/// B=4, H=16, S=4096, D=128): writes a synthetic bf16 safetensors dump (q, k, v, o, do), then times
/// the GPU f64 reference pass alone and the whole `tiebreak audit --device cuda` pipeline (load the
/// file, reference, statistics, JSON report written to PATH.json), each twice, and prints the ratio.
#include "audit_fixtures.hpp"  // tests/audit: seeded bf16 problems and the emulated kernel

#include "../../src/audit/reference/parallel.hpp"

#include <tiebreak/audit/audit.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace {

namespace ref = tiebreak::reference;
namespace audit = tiebreak::audit;
using tiebreak::round_mode;

ref::attention_shape shape_of(const benchmark::State& st) {
  const auto h = static_cast<std::size_t>(st.range(0)), s = static_cast<std::size_t>(st.range(1)),
             d = static_cast<std::size_t>(st.range(2));
  return {1, h, h, s, s, d, d};
}

void BM_ReferenceForward(benchmark::State& st) {
  const auto in = tiebreak::test::make_problem(shape_of(st), 1, 0.5);
  for (auto _ : st) benchmark::DoNotOptimize(ref::attention_f64(in));
}

void BM_ReferenceForwardBackward(benchmark::State& st) {
  const auto in = tiebreak::test::make_problem(shape_of(st), 1, 0.5, true);
  for (auto _ : st) benchmark::DoNotOptimize(ref::attention_f64(in));
}

/// The whole audit of a kernel dump with dO: reference forward + backward, every statistic.
void BM_Audit(benchmark::State& st) {
  const auto in = tiebreak::test::make_problem(shape_of(st), 1, 0.5, true);
  const auto dump = tiebreak::test::emulate_kernel(in, true, [](std::size_t, std::size_t h) {
    return h % 2 ? round_mode::rz : round_mode::rne;
  });
  audit::audit_options o;
  o.causal = true;
  for (auto _ : st) benchmark::DoNotOptimize(audit::run_audit(dump, o));
}

}  // namespace

BENCHMARK(BM_ReferenceForward)->Args({8, 1024, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReferenceForwardBackward)->Args({8, 1024, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Audit)->Args({8, 1024, 64})->Args({8, 256, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

/// bf16 N(mean, 1) values, threaded in chunks of 2^20 with one seeded generator per chunk.
void fill_bf16(std::vector<double>& x, std::size_t n, std::uint64_t seed, double mean) {
  x.resize(n);
  constexpr std::size_t chunk = std::size_t{1} << 20;
  ref::detail::parallel_for((n + chunk - 1) / chunk, 0, [&](std::size_t c) {
    tiebreak::test::rng g{seed * 0x100000001b3ull + c};
    for (std::size_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i)
      x[i] = tiebreak::test::round_to(tiebreak::formats::bf16, mean + g.normal(), round_mode::rne);
  });
}

std::vector<std::byte> bf16_bytes(const std::vector<double>& x) {
  std::vector<std::byte> out(x.size() * 2);
  ref::detail::parallel_for(x.size() / 65536 + 1, 0, [&](std::size_t c) {
    for (std::size_t i = c * 65536; i < std::min(x.size(), (c + 1) * 65536); ++i) {
      const float f = static_cast<float>(x[i]);  // exact: every value is a bf16, hence an f32
      std::uint32_t b;
      std::memcpy(&b, &f, 4);
      const std::uint16_t h = static_cast<std::uint16_t>(b >> 16);  // a bf16 is the top half of its f32
      std::memcpy(&out[2 * i], &h, 2);
    }
  });
  return out;
}

int gpu_timing(int argc, char** argv) {
  std::size_t B = 4, H = 16, S = 4096, D = 128;
  bool causal = false;
  std::string file = "/tmp/tiebreak_audit_timing.safetensors";
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--causal") causal = true;
    else if (a == "--shape" && i + 1 < argc) std::sscanf(argv[++i], "%zu,%zu,%zu,%zu", &B, &H, &S, &D);
    else if (a == "--file" && i + 1 < argc) file = argv[++i];
    else {
      std::fprintf(stderr, "audit_bench --gpu-timing: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (const std::string why = ref::device_unavailable_reason(); !why.empty()) {
    std::fprintf(stderr, "audit_bench --gpu-timing: %s\n", why.c_str());
    return 2;
  }
  const ref::attention_shape s{B, H, H, S, S, D, D};
  std::printf("[audit-timing] shape B=%zu H=%zu S=%zu D=%zu %s, %u host threads\n", B, H, S, D, causal ? "causal" : "non-causal",
              std::thread::hardware_concurrency());
  auto t = clock_type::now();
  ref::attention_inputs in;
  in.shape = s;
  fill_bf16(in.q, s.q_size(), 1, 0.0);
  fill_bf16(in.k, s.k_size(), 2, 0.0);
  fill_bf16(in.v, s.v_size(), 3, 0.5);
  ref::attention_options ro;
  ro.causal = causal;
  // The "kernel": the f64 O rounded to bf16, rne in even heads, rz (a planted bias) in odd ones.
  std::vector<double> o = ref::attention_f64_device(in, ro).o;
  ref::detail::parallel_for(B * H, 0, [&](std::size_t bh) {
    const round_mode m = bh % 2 ? round_mode::rz : round_mode::rne;
    for (std::size_t x = bh * S * D; x < (bh + 1) * S * D; ++x) o[x] = tiebreak::test::round_to(tiebreak::formats::bf16, o[x], m);
  });
  fill_bf16(in.d_o, s.o_size(), 4, 0.1);
  {
    std::map<std::string, tiebreak::io::st_tensor_data> tensors;
    const std::vector<std::size_t> shp{B, H, S, D};
    tensors["q"] = {tiebreak::io::st_dtype::bf16, shp, bf16_bytes(in.q)};
    tensors["k"] = {tiebreak::io::st_dtype::bf16, shp, bf16_bytes(in.k)};
    tensors["v"] = {tiebreak::io::st_dtype::bf16, shp, bf16_bytes(in.v)};
    tensors["o"] = {tiebreak::io::st_dtype::bf16, shp, bf16_bytes(o)};
    tensors["do"] = {tiebreak::io::st_dtype::bf16, shp, bf16_bytes(in.d_o)};
    tiebreak::io::write_safetensors(file, tensors);
  }
  std::printf("[audit-timing] synthetic dump %s written in %.2f s\n", file.c_str(), since(t));

  double best_ref = 1e300, best_audit = 1e300;
  for (int rep = 0; rep < 2; ++rep) {
    ref::device_timing dt;
    t = clock_type::now();
    const auto out = ref::attention_f64_device(in, ro, nullptr, &dt);
    const double sec = since(t);
    benchmark::DoNotOptimize(out.dq.data());
    best_ref = std::min(best_ref, sec);
    std::printf("[audit-timing] reference pass (fwd+bwd, f64, GPU) %.3f s: upload %.3f, kernels %.3f, download %.3f\n", sec,
                dt.upload, dt.kernels, dt.download);
  }
  for (int rep = 0; rep < 2; ++rep) {
    t = clock_type::now();
    const audit::kernel_dump dump = audit::load_kernel_dump(file);
    const double load = since(t);
    audit::audit_options ao;
    ao.causal = causal;
    ao.device = audit::audit_options::device_kind::cuda;
    const audit::audit_report r = audit::run_audit(dump, ao);
    const auto t_report = clock_type::now();
    nlohmann::json j = audit::to_json(r);
    j["timing_s"]["load"] = load;
    std::ofstream(file + ".json") << j.dump(2) << '\n';
    (void)audit::markdown_summary(r);
    const double report = since(t_report), total = since(t);
    best_audit = std::min(best_audit, total);
    std::printf("[audit-timing] whole audit --device cuda %.3f s: load %.3f, reference %.3f (kernels %.3f), statistics %.3f, "
                "report %.3f; heads biased %zu of %zu\n",
                total, load, r.seconds_reference, r.device_timing ? r.device_timing->kernels : 0.0, r.seconds_statistics, report,
                r.heads_biased, r.heads.size());
  }
  std::printf("[audit-timing] best reference pass %.3f s, best whole audit %.3f s, ratio %.2f (goal <= 2)\n", best_ref, best_audit,
              best_audit / best_ref);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--gpu-timing") == 0) return gpu_timing(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
