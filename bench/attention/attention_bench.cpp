// SPDX-License-Identifier: Apache-2.0
/// @file attention_bench: device timing of tiebreak's attention kernels (forward, forward+backward), JSON lines out.
///
/// For B·S = `--tokens` tokens, H heads, head dims D and sequence lengths S (causal and not), every
/// chosen output mode, probe setting and score scaling: median (and minimum) of `--reps` timed calls
/// after `--warmup` untimed ones, CUDA events around the synchronous launchers on the default
/// stream. The modes and probe settings of one shape and pass take turns call by call (`--order
/// interleaved`, the default), so that the ratios between them do not depend on how the card's
/// clocks and power drifted from one case to the next. One JSON object per line
/// (docs/attention-bench.md has the schema and the FLOP convention); tools/attention-bench.py
/// merges them with PyTorch SDPA's figures into one table.
/// Bad options exit 2 with one line; so does a machine without a CUDA device the kernels run on.
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tiebreak/attn/flash.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/value.hpp"
#include "tiebreak/gpu/flash.hpp"

namespace {

using namespace tiebreak;
using nlohmann::json;

/// The FLOP count of one case (the FlashAttention benchmarks' convention, docs/attention-bench.md):
/// forward 4·B·H·S²·D (Q Kᵀ and P V, 2·S²·D each), halved when causal; backward 2.5× the forward.
double forward_flops(std::size_t b, std::size_t h, std::size_t s, std::size_t d, bool causal) {
  const double f = 4.0 * static_cast<double>(b) * static_cast<double>(h) * static_cast<double>(s) * static_cast<double>(s) *
                   static_cast<double>(d);
  return causal ? f / 2 : f;
}
double case_flops(std::size_t b, std::size_t h, std::size_t s, std::size_t d, bool causal, bool backward) {
  const double f = forward_flops(b, h, s, d, causal);
  return backward ? 3.5 * f : f;
}

struct options {
  std::size_t tokens = 16384;
  std::size_t heads = 16;
  std::vector<std::size_t> seqs{1024, 4096, 16384};
  std::vector<std::size_t> dims{128};
  std::string causal = "both";  // off | on | both
  std::vector<std::string> modes{"bf16", "fp32", "debias", "stochastic"};
  std::string probe = "both";     // off | on | both
  std::string scaling = "unfused";  // unfused | fused | both
  std::string exp = "software";     // software | sfu | both
  std::vector<std::string> passes{"fwd", "fwd+bwd"};
  int warmup = 2;
  int reps = 5;
  double max_seconds = 0;  // 0: no limit
  std::string order = "interleaved";  // interleaved | sequential
  std::uint64_t seed = 1;
  std::string json_path;
  bool quick = false;
  bool dry_run = false;
};

/// One timed configuration.
struct bench_case {
  std::size_t batch, heads, seq, dim;
  bool causal;
  attn::out_mode mode;
  attn::score_scaling scaling;
  attn::exp2_policy exp;
  bool probe;
  bool backward;
};

[[noreturn]] void bad_input(const std::string& why) {
  std::fprintf(stderr, "attention_bench: %s\n", why.c_str());
  std::exit(2);
}

std::vector<bool> both_or(const std::string& v, const char* what) {
  if (v == "off") return {false};
  if (v == "on") return {true};
  if (v == "both") return {false, true};
  bad_input(std::string("--") + what + " must be off, on or both, not '" + v + "'");
}

std::vector<bench_case> plan(const options& o) {
  if (o.heads == 0 || o.tokens == 0) bad_input("--tokens and --heads must be positive");
  if (o.warmup < 0 || o.reps < 1) bad_input("--warmup must be >= 0 and --reps >= 1");
  for (std::size_t d : o.dims)
    if (d != 64 && d != 128) bad_input("--dims: the kernels support head dims 64 and 128, not " + std::to_string(d));
  for (std::size_t s : o.seqs)
    if (s == 0 || o.tokens % s != 0)
      bad_input("--seqs: " + std::to_string(s) + " does not divide --tokens " + std::to_string(o.tokens));
  std::vector<attn::out_mode> modes;
  for (const std::string& m : o.modes) {
    attn::out_mode x;
    if (!attn::parse_out_mode(m, x)) bad_input("--modes: unknown mode '" + m + "' (bf16, fp32, debias, stochastic)");
    modes.push_back(x);
  }
  std::vector<attn::score_scaling> scalings;
  if (o.scaling == "unfused" || o.scaling == "both") scalings.push_back(attn::score_scaling::unfused);
  if (o.scaling == "fused" || o.scaling == "both") scalings.push_back(attn::score_scaling::fused);
  if (scalings.empty()) bad_input("--scaling must be unfused, fused or both, not '" + o.scaling + "'");
  std::vector<attn::exp2_policy> exps;
  if (o.exp == "software" || o.exp == "both") exps.push_back(attn::exp2_policy::software);
  if (o.exp == "sfu" || o.exp == "both") exps.push_back(attn::exp2_policy::sfu);
  if (exps.empty()) bad_input("--exp must be software, sfu or both, not '" + o.exp + "'");
  std::vector<bool> backward;
  for (const std::string& p : o.passes) {
    if (p == "fwd") backward.push_back(false);
    else if (p == "fwd+bwd") backward.push_back(true);
    else bad_input("--passes: unknown pass '" + p + "' (fwd, fwd+bwd)");
  }
  const std::vector<bool> causal = both_or(o.causal, "causal"), probe = both_or(o.probe, "probe");
  std::vector<bench_case> out;
  for (std::size_t d : o.dims)
    for (std::size_t s : o.seqs)
      for (bool c : causal)
        for (attn::score_scaling sc : scalings)
          for (attn::exp2_policy e : exps)
            for (bool bw : backward)
              for (attn::out_mode m : modes)  // mode and probe innermost: the cases timed together
                for (bool p : probe) out.push_back({o.tokens / s, o.heads, s, d, c, m, sc, e, p, bw});
  return out;
}

/// A case's record; case_run::finish adds the timings (kind "result") or why there are none (kind "error").
json describe(const bench_case& c, const char* kind) {
  return json{{"kind", kind},
              {"backend", "tiebreak"},
              {"mode", std::string(attn::to_string(c.mode))},
              {"scaling", std::string(attn::to_string(c.scaling))},
              {"exp", std::string(attn::to_string(c.exp))},
              {"probe", c.probe},
              {"pass", c.backward ? "fwd+bwd" : "fwd"},
              {"batch", c.batch},
              {"heads", c.heads},
              {"seq", c.seq},
              {"dim", c.dim},
              {"causal", c.causal},
              {"flops", case_flops(c.batch, c.heads, c.seq, c.dim, c.causal, c.backward)}};
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// A device buffer of n elements of T.
template <class T>
struct device_buffer {
  T* p = nullptr;
  explicit device_buffer(std::size_t n) { cuda_ok(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)), "cudaMalloc"); }
  ~device_buffer() { cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

/// n bf16 values, roughly N(0, 1) (the sum of four uniforms on [−√3, √3), halved: variance 1), each
/// rounded once from f32 to bf16 with round-to-nearest-even; Philox keyed by (element, tensor), so
/// the values do not depend on the number of threads that draw them.
std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed, std::uint32_t tensor) {
  std::vector<std::uint16_t> v(n);
  const philox gen{seed};
  const auto fill = [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) {
      const philox_block r = gen(static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32), tensor);
      double s = 0;
      for (std::uint32_t w : r.w) s += (static_cast<double>(w) * 0x1p-32 - 0.5) * 3.4641016151377546;
      v[i] = f32_bits_to_bf16_rne(f32_to_bits(static_cast<float>(s / 2)));  // double -> f32: nearest-even
    }
  };
  const std::size_t parts = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 32);
  std::vector<std::thread> pool;
  for (std::size_t p = 0; p < parts; ++p) pool.emplace_back(fill, n * p / parts, n * (p + 1) / parts);
  for (std::thread& th : pool) th.join();
  return v;
}

/// The device tensors of the largest case of one head dim (every case has B·S = tokens).
struct tensors {
  std::size_t n;
  device_buffer<std::uint16_t> q, k, v, dout, o, dq, dk, dv;
  device_buffer<float> o_f32, lse, delta;
  tensors(std::size_t tokens, std::size_t heads, std::size_t dim)
      : n(tokens * heads * dim), q(n), k(n), v(n), dout(n), o(n), dq(n), dk(n), dv(n), o_f32(n), lse(tokens * heads),
        delta(tokens * heads) {}
};

/// A sample of an output tensor is finite and not all zero: a kernel that wrote nothing (or NaN)
/// is reported, not timed.
std::string check_output(const void* dev, std::size_t n, bool f32) {
  const std::size_t m = std::min<std::size_t>(n, 1 << 16);
  std::vector<std::uint32_t> h(m);
  std::vector<std::uint16_t> hb(m);
  if (f32) cuda_ok(cudaMemcpy(h.data(), dev, m * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  else {
    cuda_ok(cudaMemcpy(hb.data(), dev, m * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (std::size_t i = 0; i < m; ++i) h[i] = static_cast<std::uint32_t>(hb[i]) << 16;
  }
  std::size_t nonzero = 0;
  for (std::uint32_t b : h) {
    if ((b & 0x7f800000u) == 0x7f800000u) return "output not finite (or not written)";
    nonzero += (b & 0x7fffffffu) != 0 ? 1 : 0;
  }
  return nonzero == 0 ? "output all zero" : "";
}

/// One case being timed: its arguments (pointing into the shared tensors), its probe counters, and
/// its timed calls so far.
struct case_run {
  bench_case c;
  json r;
  attn::flash_args a;
  std::vector<probe::head_counters> counters;
  std::vector<double> ms;
  int calls = 0;
  bool live = false;  ///< checked and warmed up: takes part in the timed rounds

  case_run(const bench_case& bc, tensors& t, const options& o) : c(bc), r(describe(bc, "result")) {
    a.prob.shape = attn::shape{c.batch, c.heads, c.heads, c.seq, c.seq, c.dim, c.dim};
    a.prob.mask = c.causal ? attn::mask_kind::causal : attn::mask_kind::none;
    a.prob.scale = 1.0 / std::sqrt(static_cast<double>(c.dim));  // SDPA's default scale
    a.opt.mode = c.mode;
    a.opt.scaling = c.scaling;
    a.opt.exp = c.exp;
    a.opt.seed = o.seed;
    const bool fp32 = c.mode == attn::out_mode::fp32;
    a.t.q = t.q.p;
    a.t.k = t.k.p;
    a.t.v = t.v.p;
    a.t.dout = t.dout.p;
    a.t.o_bf16 = fp32 ? nullptr : t.o.p;
    // The full probe measures delta's error against the f32 O, so a probed call also keeps it.
    a.t.o_f32 = fp32 || c.probe ? t.o_f32.p : nullptr;
    a.t.lse = t.lse.p;
    a.t.delta = t.delta.p;
    a.t.dq = t.dq.p;
    a.t.dk = t.dk.p;
    a.t.dv = t.dv.p;
    counters.resize(c.probe ? c.batch * c.heads : 0);
  }
  void call() {
    a.counters = c.probe ? counters.data() : nullptr;  // here, not in the constructor: valid after a move
    gpu::attention_forward(a, nullptr);
    if (c.backward) gpu::attention_backward(a, nullptr);
    ++calls;
  }
  void fail(const std::string& why) {
    r["kind"] = "error";
    r["error"] = why;
    live = false;
  }
  /// The first call, checked, then the other warm-ups. A call the kernels do not support
  /// (std::invalid_argument) is reported as this case's error; the rest runs.
  void start(tensors& t, const options& o) {
    const bool fp32 = c.mode == attn::out_mode::fp32;
    try {
      // NaN everywhere first (all-ones bytes: a NaN in bf16 and in f32), so that an output the first
      // call does not write is caught rather than the previous case's being checked.
      cuda_ok(cudaMemset(fp32 ? static_cast<void*>(t.o_f32.p) : t.o.p, 0xff, t.n * (fp32 ? 4 : 2)), "cudaMemset");
      cuda_ok(cudaMemset(t.dq.p, 0xff, t.n * 2), "cudaMemset");
      call();  // the first warm-up call, checked
      std::string bad = check_output(fp32 ? static_cast<const void*>(t.o_f32.p) : t.o.p, t.n, fp32);
      if (bad.empty() && c.backward) bad = check_output(t.dq.p, t.n, false);
      if (!bad.empty()) return fail(bad);
      for (int i = 1; i < o.warmup; ++i) call();
      live = true;
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
  }
  /// One timed call between two events on the default stream.
  void time_one(cudaEvent_t start_ev, cudaEvent_t stop_ev) {
    try {
      cuda_ok(cudaEventRecord(start_ev, nullptr), "cudaEventRecord");
      call();
      cuda_ok(cudaEventRecord(stop_ev, nullptr), "cudaEventRecord");
      cuda_ok(cudaEventSynchronize(stop_ev), "cudaEventSynchronize");
      float e = 0;
      cuda_ok(cudaEventElapsedTime(&e, start_ev, stop_ev), "cudaEventElapsedTime");
      ms.push_back(e);
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
  }
  /// The record: median, minimum and maximum of the timed calls.
  json finish(std::size_t group_size) {
    if (r["kind"] != "result") return r;
    std::sort(ms.begin(), ms.end());
    const std::size_t n = ms.size();
    const double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
    r["reps"] = n;
    r["ms"] = median;
    r["ms_min"] = ms.front();
    r["ms_max"] = ms.back();
    r["tflops"] = r["flops"].get<double>() / (median * 1e-3) / 1e12;
    r["interleaved_with"] = group_size - 1;
    if (c.probe) {  // evidence that the probe ran: P-bar == 1 events per call, over every head
      std::uint64_t p_one = 0;
      for (const probe::head_counters& h : counters) p_one += h.p_one;
      r["p_one_per_call"] = static_cast<double>(p_one) / calls;
    }
    return r;
  }
};

/// Times a group of cases of one shape and pass: each is checked and warmed up, then the timed calls
/// go round the group (rep i of every case before rep i + 1 of any), so that every case of the group
/// sees the same clocks, power state and temperature. On a card at its power cap (the H100 at
/// S = 16k, docs/attention-bench.md) a case timed alone after another moved by up to 17 %; the
/// ratios the goals ask for (a mode over bf16, the probe over none) are ratios within a group.
std::vector<json> run_group(const std::vector<bench_case>& group, tensors& t, const options& o, cudaEvent_t start,
                            cudaEvent_t stop) {
  std::vector<case_run> runs;
  runs.reserve(group.size());
  for (const bench_case& c : group) runs.emplace_back(c, t, o);
  for (case_run& cr : runs) cr.start(t, o);
  for (int i = 0; i < o.reps; ++i)
    for (case_run& cr : runs)
      if (cr.live) cr.time_one(start, stop);
  std::vector<json> out;
  for (case_run& cr : runs) out.push_back(cr.finish(group.size()));
  return out;
}

/// The groups of head dim `dim` timed together: with --order interleaved, the cases that differ only
/// in mode and probe (plan's order keeps them next to each other); with sequential, one case each.
std::vector<std::vector<bench_case>> groups_of(const std::vector<bench_case>& cases, std::size_t dim,
                                               bool interleaved) {
  std::vector<std::vector<bench_case>> out;
  const auto same_shape = [](const bench_case& x, const bench_case& y) {
    return x.batch == y.batch && x.heads == y.heads && x.seq == y.seq && x.dim == y.dim && x.causal == y.causal &&
           x.scaling == y.scaling && x.exp == y.exp && x.backward == y.backward;
  };
  for (const bench_case& c : cases) {
    if (c.dim != dim) continue;
    if (interleaved && !out.empty() && same_shape(out.back().front(), c)) out.back().push_back(c);
    else out.push_back({c});
  }
  return out;
}

std::string case_line(const json& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-10s %-7s %-8s probe=%-3s %-7s D=%-3zu S=%-5zu B=%-3zu %-6s",
                r["mode"].get<std::string>().c_str(), r["scaling"].get<std::string>().c_str(),
                r["exp"].get<std::string>().c_str(), r["probe"].get<bool>() ? "on" : "off",
                r["pass"].get<std::string>().c_str(), r["dim"].get<std::size_t>(), r["seq"].get<std::size_t>(),
                r["batch"].get<std::size_t>(), r["causal"].get<bool>() ? "causal" : "full");
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"Times tiebreak's attention kernels (forward, forward+backward) on the GPU; JSON lines out "
               "(docs/attention-bench.md)"};
  app.add_option("--tokens", o.tokens, "B*S, the tokens of every case (B = tokens / S)");
  app.add_option("--heads", o.heads, "heads H");
  app.add_option("--seqs", o.seqs, "sequence lengths S")->delimiter(',');
  app.add_option("--dims", o.dims, "head dims D (64, 128)")->delimiter(',');
  app.add_option("--causal", o.causal, "off | on | both");
  app.add_option("--modes", o.modes, "output modes: bf16,fp32,debias,stochastic")->delimiter(',');
  app.add_option("--probe", o.probe, "per-head probe: off | on | both");
  app.add_option("--scaling", o.scaling, "score scaling: unfused | fused | both");
  app.add_option("--exp", o.exp, "the exponential: software | sfu | both");
  app.add_option("--passes", o.passes, "fwd,fwd+bwd")->delimiter(',');
  app.add_option("--warmup", o.warmup, "untimed calls before the timed ones (at least one is made: the first call is checked)");
  app.add_option("--reps", o.reps, "timed calls per case (median reported)");
  app.add_option("--max-seconds", o.max_seconds,
                 "start no new shape (group of cases timed together) after this many seconds (0: no limit)");
  app.add_option("--order", o.order,
                 "interleaved: the modes and probe settings of one shape and pass take turns, call by call "
                 "(the same clocks and power state for the ratios between them); sequential: each case's "
                 "calls in a row")
      ->check(CLI::IsMember({"interleaved", "sequential"}));
  app.add_option("--seed", o.seed, "seed of the inputs and of the stochastic mode");
  app.add_option("--json", o.json_path, "write the JSON lines to this file too (stdout always has them)");
  app.add_flag("--quick", o.quick, "smoke run: S = 1k and 4k, probe off, 1 warm-up and 3 timed calls");
  app.add_flag("--dry-run", o.dry_run, "print the cases and their FLOP counts; no device needed");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 2;
  }
  if (o.quick) {
    if (app.count("--seqs") == 0) o.seqs = {1024, 4096};
    if (app.count("--probe") == 0) o.probe = "off";
    if (app.count("--warmup") == 0) o.warmup = 1;
    if (app.count("--reps") == 0) o.reps = 3;
  }
  const std::vector<bench_case> cases = plan(o);

  std::ofstream jf;
  if (!o.json_path.empty()) {
    jf.open(o.json_path);
    if (!jf) bad_input("cannot write " + o.json_path);
  }
  const auto emit = [&](const json& j) {
    const std::string s = j.dump();
    std::cout << s << '\n' << std::flush;
    if (jf) jf << s << '\n' << std::flush;
  };

  if (o.dry_run) {  // with each case the group it is timed in (numbered per head dim, as timed)
    for (std::size_t dim : o.dims) {
      std::size_t gi = 0;
      for (const std::vector<bench_case>& group : groups_of(cases, dim, o.order == "interleaved")) {
        for (const bench_case& c : group) {
          json r = describe(c, "plan");
          r["group"] = gi;
          emit(r);
        }
        ++gi;
      }
    }
    return 0;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || !gpu::attention_available())
    bad_input("no CUDA device the attention kernels run on (compute capability 9.0)");

  try {
    cudaDeviceProp prop{};
    cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    emit(json{{"kind", "meta"},
              {"device", prop.name},
              {"sm_count", prop.multiProcessorCount},
              {"cuda_runtime", runtime},
              {"tokens", o.tokens},
              {"heads", o.heads},
              {"warmup", o.warmup},
              {"reps", o.reps},
              {"order", o.order},
              {"flops_convention", "fwd 4*B*H*S^2*D, halved when causal; bwd 2.5x fwd; fwd+bwd 3.5x fwd"}});
    cudaEvent_t start, stop;
    cuda_ok(cudaEventCreate(&start), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&stop), "cudaEventCreate");
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t done = 0, failed = 0;
    for (std::size_t dim : o.dims) {
      tensors t(o.tokens, o.heads, dim);
      std::uint32_t tensor_id = 0;
      for (std::uint16_t* p : {t.q.p, t.k.p, t.v.p, t.dout.p}) {
        const std::vector<std::uint16_t> h = random_bf16(t.n, o.seed, tensor_id++);
        cuda_ok(cudaMemcpy(p, h.data(), t.n * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
      }
      for (const std::vector<bench_case>& group : groups_of(cases, dim, o.order == "interleaved")) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::vector<json> rs;
        if (o.max_seconds > 0 && elapsed > o.max_seconds) {
          for (const bench_case& c : group) {
            rs.push_back(describe(c, "skipped"));
            rs.back()["error"] = "--max-seconds reached";
          }
        } else {
          rs = run_group(group, t, o, start, stop);
        }
        for (const json& r : rs) {
          ++done;
          failed += r["kind"] == "result" ? 0 : 1;
          std::fprintf(stderr, "[attention-bench] %s  %s\n", case_line(r).c_str(),
                       r["kind"] == "result" ? (std::to_string(r["tflops"].get<double>()) + " TFLOP/s").c_str()
                                             : r["error"].get<std::string>().c_str());
          emit(r);
        }
      }
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::fprintf(stderr, "[attention-bench] %zu cases, %zu not timed\n", done, failed);
  } catch (const std::exception& e) {  // a CUDA error: the context may be lost, so stop here
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
