// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak attention`: the instrumented flash attention (twin or GPU), its tensors and probe counters.
#ifdef TIEBREAK_HAVE_ANALYSIS
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "attention_run.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "tiebreak/audit/audit.hpp"

#ifndef TIEBREAK_VERSION
#define TIEBREAK_VERSION "unknown"
#endif

namespace tiebreak::cli {
namespace {

/// Version of the probe JSON's schema (docs/attention.md, "Probe JSON").
constexpr const char* probe_schema = "tiebreak.attention_probe/1";

struct attention_args {
  std::string mode;
  float beta = 2.0f;
  float debias_max_shift = attn::flash_options{}.debias_max_shift;
  float near_tolerance = attn::flash_options{}.near_tolerance;
  bool scale_fma = false;
  std::string exp = "software";
  bool emulate = false;
  bool causal = false;
  std::string shape;
  std::string inputs;
  std::string layout = "bhsd";
  std::optional<std::size_t> kv_heads;
  std::uint64_t seed = 1;
  std::optional<double> scale;
  double tie_share = 0.25;
  unsigned threads = 0;
  std::string output;
  bool quiet = false;
};

/// B,H,S,D: four positive integers (each below 2^31).
std::vector<std::size_t> parse_shape(const std::string& text) {
  std::vector<std::size_t> out;
  std::size_t pos = 0;
  const std::string bad = "--shape: expected B,H,S,D (four positive integers), got '" + text + "'";
  while (true) {
    const std::size_t comma = text.find(',', pos);
    const std::string part = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (part.empty() || part.size() > 10 || part.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(bad);
    const unsigned long long v = std::stoull(part);
    if (v == 0 || v >= (1ull << 31)) throw std::invalid_argument(bad);
    out.push_back(static_cast<std::size_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.size() != 4) throw std::invalid_argument(bad);
  return out;
}

/// Throws when the call's host buffers (inputs, outputs, gradients) would not fit the machine's memory.
void check_memory(const attn::shape& s, const std::string& what) {
  const long double elems = static_cast<long double>(s.batch) * s.heads * s.seq_q * (s.dim + s.dim_v) +
                            static_cast<long double>(s.batch) * s.kv_heads * s.seq_k * (s.dim + s.dim_v);
  const long double bytes = elems * 2 * 2 + static_cast<long double>(s.batch) * s.heads * s.seq_q * s.dim_v * 6 +
                            static_cast<long double>(s.batch) * s.heads * s.seq_q * 8;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  const long double memory = pages > 0 && page_size > 0 ? static_cast<long double>(pages) * page_size : 0;
  if (memory > 0 && bytes > memory)
    throw std::invalid_argument(fmt::format("{}: the call needs {:.0f} bytes of host memory, more than the machine's {:.0f}",
                                            what, static_cast<double>(bytes), static_cast<double>(memory)));
}

std::string probe_path_for(const std::string& out) {
  const std::string ext = ".safetensors";
  if (out.size() > ext.size() && out.compare(out.size() - ext.size(), ext.size(), ext) == 0)
    return out.substr(0, out.size() - ext.size()) + ".probe.json";
  return out + ".probe.json";
}

/// Fails early (before minutes of work) when `path` cannot be a file we write.
void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) throw std::runtime_error(path + ": cannot open for writing (a directory)");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(path + ": cannot open for writing (no folder " + dir.string() + ")");
}

nlohmann::json counters_json(const probe::head_counters& c) {
  return {{"repeated_max_exact", c.repeated_max_exact},
          {"repeated_max_near", c.repeated_max_near},
          {"p_one", c.p_one},
          {"output_error", attention::moments_json(c.output_error)},
          {"delta_error", attention::moments_json(c.delta_error)}};
}

void run(const attention_args& a) {
  attn::out_mode mode{};
  if (!attn::parse_out_mode(a.mode, mode))
    throw std::invalid_argument("--mode: unknown mode '" + a.mode + "' (expected one of bf16 fp32 debias stochastic)");
  attn::exp2_policy exp{};
  if (!attn::parse_exp2_policy(a.exp, exp))
    throw std::invalid_argument("--exp: unknown exponential '" + a.exp + "' (expected software or sfu)");
  if (a.shape.empty() == a.inputs.empty())
    throw std::invalid_argument("give either --shape B,H,S,D or --inputs FILE (exactly one)");
  if (!(a.beta > 1.0f) || !(a.beta < std::numeric_limits<float>::infinity()))
    throw std::invalid_argument(attn::error_text(attn::flash_error::bad_beta));
  if (!(a.debias_max_shift >= attn::debias_max_shift_min && a.debias_max_shift <= attn::debias_max_shift_max))
    throw std::invalid_argument(attn::error_text(attn::flash_error::bad_debias_shift));
  if (!(a.near_tolerance >= 0.0f) || !(a.near_tolerance < std::numeric_limits<float>::infinity()))
    throw std::invalid_argument(attn::error_text(attn::flash_error::bad_near_tolerance));
  if (!a.inputs.empty() && a.kv_heads) throw std::invalid_argument("--kv-heads: only with --shape (a file's k has its own heads)");

  // The backend first: without a GPU (and without --emulate) nothing else is worth reading.
  const attention::backend be = a.emulate ? attention::backend::twin : attention::backend::gpu;
  if (be == attention::backend::gpu) {
    if (const std::string why = attention::gpu_unavailable_reason(); !why.empty())
      throw std::runtime_error("no GPU to run the attention kernels on (" + why + "); --emulate runs the bit-identical host twin");
  }
  check_writable(a.output);
  const std::string probe_path = probe_path_for(a.output);
  check_writable(probe_path);

  attention::inputs in;
  std::string source;
  if (!a.shape.empty()) {
    const std::vector<std::size_t> d = parse_shape(a.shape);
    attn::shape s{d[0], d[1], a.kv_heads.value_or(d[1]), d[2], d[2], d[3], d[3]};
    if (const attn::problem_error e = s.validate(); e != attn::problem_error::ok)
      throw std::invalid_argument(fmt::format("--kv-heads: {} key/value heads for the {} heads of --shape: {}", s.kv_heads,
                                              s.heads, attn::error_text(e)));
    if (s.dim != 64 && s.dim != 128)
      throw std::invalid_argument(fmt::format("--shape: head dim {}: {}", s.dim, attn::error_text(attn::flash_error::dim_unsupported)));
    check_memory(s, "--shape");
    source = "--shape";
    in = attention::draw(attention::workload{s, a.causal, a.seed, a.tie_share});
  } else {
    source = a.inputs;
    in = attention::read(a.inputs, a.layout == "bshd" ? audit::layout::bshd : audit::layout::bhsd, a.seed);
    const attn::shape& s = in.shape;
    if (s.dim != s.dim_v || (s.dim != 64 && s.dim != 128))
      throw std::invalid_argument(fmt::format("{}: q and k have head dim {}, v has {}: {}", a.inputs, s.dim, s.dim_v,
                                              attn::error_text(attn::flash_error::dim_unsupported)));
    check_memory(s, a.inputs);
  }
  const attn::shape& s = in.shape;
  reference::attention_options ro;  // the audit's own scale rule (1/sqrt(dim) in double) and mask
  ro.causal = a.causal;
  ro.scale = a.scale;
  const attn::problem prob = ro.problem_for(s);
  attn::flash_options opt;
  opt.mode = mode;
  opt.scaling = a.scale_fma ? attn::score_scaling::fused : attn::score_scaling::unfused;
  opt.exp = exp;
  opt.beta = a.beta;
  opt.debias_max_shift = a.debias_max_shift;
  opt.near_tolerance = a.near_tolerance;
  opt.seed = a.seed;

  try {
    attention::check_call(prob, opt);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }

  const std::size_t bad_q = attention::nonfinite(in.q), bad_k = attention::nonfinite(in.k),
                    bad_v = attention::nonfinite(in.v), bad_do = attention::nonfinite(in.dout);
  const std::string shape_text = fmt::format("batch {}, heads {}, kv_heads {}, seq_q {}, seq_k {}, dim {}", s.batch,
                                             s.heads, s.kv_heads, s.seq_q, s.seq_k, s.dim);
  if (!a.quiet) {
    if (a.inputs.empty())
      std::cerr << fmt::format("tiebreak attention: drew q, k, v, do ({}) from seed {}: {} rows with a repeated maximum planted\n",
                               shape_text, a.seed, in.planted_rows);
    else
      std::cerr << fmt::format("tiebreak attention: read {} ({}){}\n", a.inputs, shape_text,
                               in.do_drawn ? "; it has no 'do': dO drawn from the seed" : "");
    if (bad_q + bad_k + bad_v + bad_do)
      std::cerr << fmt::format("tiebreak attention: the inputs hold NaN/Inf values (q {}, k {}, v {}, do {}): counted; the run proceeds\n",
                               bad_q, bad_k, bad_v, bad_do);
    std::cerr << fmt::format("tiebreak attention: mode {}, {} scaling, {} exponential, on the {} ...\n",
                             attn::to_string(mode), attn::to_string(opt.scaling), attn::to_string(opt.exp),
                             attention::to_string(be));
  }
  attention::outputs out;
  try {
    out = attention::run(in, prob, opt, be, a.threads);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }

  io::write_safetensors(a.output, attention::to_safetensors(in, out, mode));

  nlohmann::json j;
  j["schema"] = probe_schema;
  j["tool"] = {{"name", "tiebreak"}, {"version", TIEBREAK_VERSION}};
  nlohmann::json cl = nlohmann::json::array();
  for (const std::string& arg : command_line()) cl.push_back(audit::json_safe_text(arg));
  j["command_line"] = cl;
  j["output"] = audit::json_safe_text(a.output);
  j["backend"] = attention::to_string(be);
  j["problem"] = {{"batch", s.batch}, {"heads", s.heads}, {"kv_heads", s.kv_heads}, {"seq_q", s.seq_q},
                  {"seq_k", s.seq_k}, {"dim", s.dim}, {"dim_v", s.dim_v}, {"causal", prob.causal()},
                  {"scale", io::json_number(prob.scale)}, {"layout", "bhsd"}};
  j["options"] = {{"mode", attn::to_string(mode)}, {"scaling", attn::to_string(opt.scaling)},
                  {"exp", attn::to_string(opt.exp)},
                  {"beta", io::json_number(opt.beta)}, {"debias_max_shift", io::json_number(opt.debias_max_shift)},
                  {"seed", opt.seed},
                  {"near_tolerance", io::json_number(opt.near_tolerance)}};
  j["inputs"] = {{"source", a.inputs.empty() ? "drawn" : "file"},
                 {"path", a.inputs.empty() ? nlohmann::json(nullptr) : nlohmann::json(audit::json_safe_text(a.inputs))},
                 {"layout", a.inputs.empty() ? "bhsd" : a.layout},
                 {"do", in.do_drawn ? "drawn" : "file"},
                 {"seed", a.seed},
                 {"tie_share", a.inputs.empty() ? io::json_number(a.tie_share) : nlohmann::json(nullptr)},
                 {"planted_rows", in.planted_rows},
                 {"planted_key_pairs", in.planted_pairs},
                 {"nonfinite", {{"q", bad_q}, {"k", bad_k}, {"v", bad_v}, {"do", bad_do}}}};
  probe::head_counters total{};
  nlohmann::json heads = nlohmann::json::array();
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t h = 0; h < s.heads; ++h) {
      const probe::head_counters& c = out.counters[b * s.heads + h];
      total.merge(c);
      nlohmann::json hj = counters_json(c);
      hj["batch"] = b;
      hj["head"] = h;
      hj["kv_head"] = s.kv_head(h);
      heads.push_back(std::move(hj));
    }
  }
  j["heads"] = std::move(heads);
  j["total"] = counters_json(total);
  j["units"] = {{"output_error", mode == attn::out_mode::fp32 ? "none: O is not rounded (every event 0)"
                                                               : "ulps of bf16 at the rounded value"},
                {"delta_error", "delta - (delta from the f32 O), absolute"}};
  j["timing_s"] = {{"forward", out.seconds_forward}, {"backward", out.seconds_backward}};
  {
    std::ofstream f(probe_path, std::ios::trunc);
    if (!f) throw std::runtime_error(probe_path + ": cannot open for writing");
    f << j.dump(2) << '\n';
    f.close();
    if (!f) throw std::runtime_error(probe_path + ": write error");
  }

  std::cout << fmt::format("{:>5} {:>4} {:>3} {:>9} {:>9} {:>7} {:>12} {:>10} {:>15} {:>13} {:>15}\n", "batch", "head", "kv",
                           "rep exact", "rep near", "p==1", "O err (ulp)", "O err sd", "O err +/-", "delta err", "delta +/-");
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t h = 0; h < s.heads; ++h) {
      const probe::head_counters& c = out.counters[b * s.heads + h];
      std::cout << fmt::format("{:>5} {:>4} {:>3} {:>9} {:>9} {:>7} {:>+12.5f} {:>10.5f} {:>15} {:>+13.4e} {:>15}\n", b, h,
                               s.kv_head(h), c.repeated_max_exact, c.repeated_max_near, c.p_one,
                               attention::mean_of(c.output_error), attention::sd_of(c.output_error),
                               fmt::format("{}/{}", c.output_error.positive, c.output_error.negative),
                               attention::mean_of(c.delta_error),
                               fmt::format("{}/{}", c.delta_error.positive, c.delta_error.negative));
    }
  }
  std::cout.flush();
  if (!a.quiet) {
    std::cerr << fmt::format("tiebreak attention: forward {:.3f} s, backward {:.3f} s ({}); wrote {} and {}\n",
                             out.seconds_forward, out.seconds_backward, attention::to_string(be), a.output, probe_path);
    std::string audit_cmd = "tiebreak audit " + a.output;
    if (a.causal) audit_cmd += " --causal";
    if (a.scale) audit_cmd += fmt::format(" --scale {}", *a.scale);
    std::cerr << "tiebreak attention: audit it with: " << audit_cmd << '\n';
  }
}

}  // namespace

void register_attention(CLI::App& app) {
  const CLI::Validator finite([](std::string& s) { return finite_number_error(s); }, "FINITE");
  const CLI::Validator uint([](std::string& s) { return unsigned_number_error(s); }, "UINT");
  auto a = std::make_shared<attention_args>();
  CLI::App* cmd = app.add_subcommand(
      "attention", "Instrumented flash attention (forward + backward) on the GPU or its host twin: tensors and probe counters");
  cmd->add_option("--mode", a->mode, "Output mode: bf16, fp32, debias, stochastic")->required();
  cmd->add_option("--beta", a->beta, "debias: offset beta * max for a repeated maximum > 0 (finite, > 1)")
      ->capture_default_str()->check(finite);
  cmd->add_option("--debias-max-shift", a->debias_max_shift,
                  "debias: the offset stays at most this far above the row maximum (log2 units, in [1, 100]): "
                  "P-bar at the maximum >= 2^-shift, so a large maximum cannot flush the row to 0/0")
      ->capture_default_str()->check(finite);
  cmd->add_option("--near-tolerance", a->near_tolerance,
                  "Probe: a score within this distance of the row maximum (scaled units, scale * q.k) counts as a near repeat")
      ->capture_default_str()->check(finite);
  cmd->add_flag("--scale-fma", a->scale_fma, "Scale the score with one FMA (upstream flash-attention) instead of two roundings");
  cmd->add_option("--exp", a->exp,
                  "The exponential: software (exp2_sw, the same bits on every GPU) or sfu (ex2.approx.ftz, one "
                  "instruction; its model, and so --emulate, matches the H200's unit bit for bit)")
      ->capture_default_str();
  cmd->add_flag("--emulate", a->emulate, "Run the bit-exact host twin instead of the GPU kernels");
  cmd->add_flag("--causal", a->causal, "Causal mask (bottom-right aligned when seq_q != seq_k)");
  cmd->add_option("--shape", a->shape, "Draw the inputs: B,H,S,D (batch, heads, sequence, head dim 64 or 128)");
  cmd->add_option("--inputs", a->inputs, "Read q, k, v [do] from a safetensors file or .npy folder (as `tiebreak audit`)");
  cmd->add_option("--layout", a->layout, "Layout of --inputs")->capture_default_str()->check(CLI::IsMember({"bhsd", "bshd"}));
  cmd->add_option("--kv-heads", a->kv_heads, "Key/value heads of --shape (divides H; default H)")->check(uint);
  cmd->add_option("--seed", a->seed, "Seed of the drawn tensors and of stochastic rounding")->capture_default_str()->check(uint);
  const CLI::Validator positive(
      [](std::string& s) {
        if (std::string e = finite_number_error(s); !e.empty()) return e;
        return std::strtod(s.c_str(), nullptr) > 0 ? std::string() : "'" + s + "' is not a positive number";
      },
      "POSITIVE");
  cmd->add_option("--scale", a->scale, "Softmax scale (default 1/sqrt(D))")->check(positive);
  cmd->add_option("--tie-share", a->tie_share, "Share of query rows drawn with a repeated maximum (--shape)")
      ->capture_default_str()->check(finite)->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--threads", a->threads, "Host threads of the twin (0: all cores)")->capture_default_str()->check(uint);
  cmd->add_option("-o,--output", a->output, "The safetensors file to write (and OUT.probe.json beside it)")->required();
  cmd->add_flag("-q,--quiet", a->quiet, "No progress or summary on stderr");
  cmd->callback([a] { run_command([&] { run(*a); }); });
}

}  // namespace tiebreak::cli
#endif
