// SPDX-License-Identifier: Apache-2.0
#include "tiebreak/experiment/causal.hpp"

#include <tiebreak/analysis/align.hpp>
#include <tiebreak/analysis/distributions.hpp>
#include <tiebreak/analysis/matrix_view.hpp>
#include <tiebreak/analysis/spectral.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "model.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/host/flash_twin.hpp"
#include "tiebreak/io/json.hpp"

namespace tiebreak::experiment {

using detail::mat;
namespace fs = std::filesystem;

// --- names, configuration, presets ---------------------------------------------------------------

const char* to_string(data_kind d) noexcept { return d == data_kind::lowrank ? "lowrank" : "isotropic"; }
bool parse_data_kind(const std::string& s, data_kind& out) noexcept {
  if (s == "lowrank") { out = data_kind::lowrank; return true; }
  if (s == "isotropic") { out = data_kind::isotropic; return true; }
  return false;
}

std::string config::validate() const {
  if (head_dim != 64 && head_dim != 128) return "head_dim must be 64 or 128 (the attention kernels' head dims)";
  if (vocab < 2 || d_model < 1 || heads < 1 || layers < 1 || seq < 2 || batch < 1)
    return "vocab and seq must be at least 2, every other size at least 1";
  if (vocab > (std::size_t{1} << 20) || d_model > 4096 || heads > 64 || layers > 64 || seq > 8192 || batch > 1024)
    return "a size is beyond the experiment's limits (vocab 2^20, d_model 4096, heads 64, layers 64, seq 8192, batch 1024)";
  if (steps < 2) return "steps must be at least 2";
  if (log_every < 1) return "log_every must be at least 1";
  if (!(lr > 0) || !std::isfinite(lr)) return "the learning rate must be finite and positive";
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay)) return "weight_decay must be finite and not negative";
  if (!(adam_beta1 >= 0 && adam_beta1 < 1) || !(adam_beta2 >= 0 && adam_beta2 < 1)) return "Adam betas must lie in [0, 1)";
  if (!(adam_eps > 0) || !std::isfinite(adam_eps)) return "adam_eps must be finite and positive";
  if (!(init_std > 0) || !std::isfinite(init_std)) return "init_std must be finite and positive";
  if (!(debias_beta > 1.0f) || !std::isfinite(debias_beta)) return "debias_beta must be finite and greater than 1";
  if (!(growth_threshold >= 0) || !std::isfinite(growth_threshold)) return "growth_threshold must be finite and not negative";
  return "";
}

nlohmann::json config::to_json() const {
  return {{"vocab", vocab},       {"d_model", d_model},
          {"heads", heads},       {"head_dim", head_dim},
          {"layers", layers},     {"seq", seq},
          {"batch", batch},       {"steps", steps},
          {"lr", lr},             {"weight_decay", weight_decay},
          {"adam_beta1", adam_beta1}, {"adam_beta2", adam_beta2},
          {"adam_eps", adam_eps}, {"init_std", init_std},
          {"causal", causal},     {"debias_beta", debias_beta},
          {"exp", std::string(attn::to_string(exp))},
          {"log_every", log_every}, {"ref_every", ref_every},
          {"growth_threshold", growth_threshold}, {"checkpoint_every", checkpoint_every},
          {"monitor", "W_Q"}};
}

std::uint64_t config::fingerprint() const {
  nlohmann::json j = to_json();
  j.erase("checkpoint_every");  // where checkpoints fall does not change results
  // The software exponential is what every configuration computed before `exp` existed: its
  // fingerprint stays theirs, so their checkpoints resume.
  if (exp == attn::exp2_policy::software) j.erase("exp");
  const std::string s = j.dump();
  std::uint64_t h = 0x74696562726561ull;
  for (unsigned char ch : s) h = splitmix64(h ^ ch);
  return h;
}

bool find_preset(const std::string& name, preset& out) {
  using attn::out_mode;
  if (name == "smoke") {
    // The CI grid on the host twin (docs/experiment.md): 2 modes x 2 data x 2 seeds, 150 steps.
    out = preset{config{}, {out_mode::bf16, out_mode::fp32}, {data_kind::lowrank, data_kind::isotropic}, {1, 2}};
    return true;
  }
  if (name == "tiny") {
    // The tests' grid (cheap under the sanitizers too): one sequence of 32 tokens, 12 steps.
    config c;
    c.vocab = 64;
    c.d_model = 32;
    c.seq = 32;
    c.batch = 1;
    c.steps = 12;
    c.log_every = 3;
    c.checkpoint_every = 4;
    out = preset{c, {out_mode::bf16, out_mode::fp32}, {data_kind::lowrank, data_kind::isotropic}, {1}};
    return true;
  }
  if (name == "full") {
    // The device grid: every mode x 2 data x 4 seeds, a two-layer model.
    config c;
    c.d_model = 128;
    c.heads = 4;
    c.layers = 2;
    c.seq = 128;
    c.batch = 4;
    c.steps = 1200;  // sized from the measured H200 throughput (32 cells x 100 steps: 27 s) to half the 10 min budget
    c.log_every = 20;
    c.ref_every = 5;
    c.checkpoint_every = 100;
    out = preset{c, {out_mode::bf16, out_mode::fp32, out_mode::debias, out_mode::stochastic},
                 {data_kind::lowrank, data_kind::isotropic}, {1, 2, 3, 4}};
    return true;
  }
  return false;
}
std::vector<std::string> preset_names() { return {"smoke", "tiny", "full"}; }

// --- backends ------------------------------------------------------------------------------------

namespace {
class twin_backend final : public attention_backend {
 public:
  void forward(const attn::flash_args& a) override { host::attention_forward(a, 1); }
  void backward(const attn::flash_args& a) override { host::attention_backward(a, 1); }
  std::string name() const override { return "host twin"; }
};
}  // namespace
std::unique_ptr<attention_backend> make_twin_backend() { return std::make_unique<twin_backend>(); }

// --- one cell ------------------------------------------------------------------------------------

namespace {

head_modes resolve_modes(const config& c, const cell_spec& s) {
  if (s.modes.empty()) return head_modes(c.layers * c.heads, s.mode);
  if (s.modes.size() != c.layers * c.heads) throw std::invalid_argument("a cell's head modes must name every head of every layer");
  return s.modes;
}

analysis::matrix_view<float> view(const mat& m) {
  return {m.data(), m.rows(), m.cols(), m.cols(), 1};
}
double sigma(analysis::matrix_view<float> v) { return analysis::exact_spectrum(v).spectral_norm; }

Eigen::MatrixXd to_double(const mat& m) { return m.cast<double>(); }

nlohmann::json num(double x) { return io::json_number(x); }
nlohmann::json nums(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(num(x));
  return a;
}
nlohmann::json rows(const std::vector<std::vector<double>>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : v) a.push_back(nums(r));
  return a;
}
std::vector<double> read_nums(const nlohmann::json& a) {
  std::vector<double> v;
  for (const auto& x : a) v.push_back(io::number_from_json(x));
  return v;
}
std::vector<std::vector<double>> read_rows(const nlohmann::json& a) {
  std::vector<std::vector<double>> v;
  for (const auto& r : a) v.push_back(read_nums(r));
  return v;
}

nlohmann::json series_json(const series& s) {
  nlohmann::json cos = nlohmann::json::array();
  for (const auto& r : s.update_cosine) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& x : r) row.push_back(x ? num(*x) : nlohmann::json(nullptr));
    cos.push_back(row);
  }
  return {{"step", s.step},
          {"loss", nums(s.loss)},
          {"ref_loss", nums(s.ref_loss)},
          {"sigma_wq", rows(s.sigma_wq)},
          {"sigma_wk", rows(s.sigma_wk)},
          {"sigma_wq_head", rows(s.sigma_wq_head)},
          {"sigma_wk_head", rows(s.sigma_wk_head)},
          {"delta_error", rows(s.delta_error)},
          {"delta_error_cum", rows(s.delta_error_cum)},
          {"repeated_max_rows", rows(s.repeated_max_rows)},
          {"p_one", rows(s.p_one)},
          {"output_error_mean_ulps", rows(s.output_error_mean_ulps)},
          {"o_nonfinite", rows(s.o_nonfinite)},
          {"max_score", rows(s.max_score)},
          {"update_cosine", cos}};
}

series series_from_json(const nlohmann::json& j) {
  series s;
  s.step = j.at("step").get<std::vector<std::size_t>>();
  s.loss = read_nums(j.at("loss"));
  s.ref_loss = read_nums(j.at("ref_loss"));
  s.sigma_wq = read_rows(j.at("sigma_wq"));
  s.sigma_wk = read_rows(j.at("sigma_wk"));
  s.sigma_wq_head = read_rows(j.at("sigma_wq_head"));
  s.sigma_wk_head = read_rows(j.at("sigma_wk_head"));
  s.delta_error = read_rows(j.at("delta_error"));
  s.delta_error_cum = read_rows(j.at("delta_error_cum"));
  s.repeated_max_rows = read_rows(j.at("repeated_max_rows"));
  s.p_one = read_rows(j.at("p_one"));
  s.output_error_mean_ulps = read_rows(j.at("output_error_mean_ulps"));
  s.o_nonfinite = read_rows(j.at("o_nonfinite"));
  s.max_score = read_rows(j.at("max_score"));
  for (const auto& r : j.at("update_cosine")) {
    std::vector<std::optional<double>> row;
    for (const auto& x : r) row.push_back(x.is_null() ? std::nullopt : std::optional<double>(io::number_from_json(x)));
    s.update_cosine.push_back(row);
  }
  return s;
}

nlohmann::json matrices_json(const std::vector<mat>& ms) {
  nlohmann::json a = nlohmann::json::array();
  for (const mat& m : ms) a.push_back(std::vector<float>(m.data(), m.data() + m.size()));
  return a;
}
void matrices_from_json(const nlohmann::json& a, std::vector<mat>& ms) {
  if (a.size() != ms.size()) throw std::runtime_error("checkpoint: wrong number of matrices");
  for (std::size_t k = 0; k < ms.size(); ++k) {
    const auto v = a[k].get<std::vector<float>>();
    if (v.size() != static_cast<std::size_t>(ms[k].size())) throw std::runtime_error("checkpoint: a matrix has the wrong size");
    std::copy(v.begin(), v.end(), ms[k].data());
  }
}
std::vector<mat> copy_of(const detail::weights& w) {
  std::vector<mat> r;
  for (const mat* m : w.all()) r.push_back(*m);
  return r;
}
void assign(detail::weights& w, const std::vector<mat>& ms) {
  auto all = w.all();
  for (std::size_t k = 0; k < all.size(); ++k) *all[k] = ms[k];
}

std::string file_label(const std::string& label) {
  std::string s = label;
  for (char& ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) ch = '_';
  return s;
}

/// The state of a running cell, everything a resume needs.
struct cell_state {
  std::size_t next_step = 0;
  detail::weights w;
  detail::adam_state adam;
  std::vector<double> delta_cum;
  std::vector<mat> prev_wq;      ///< W_Q of every layer at the last logged step
  std::vector<mat> prev_update;  ///< the update W_Q(last log) − W_Q(log before), per layer
  bool have_prev_wq = false, have_prev_update = false;
  series s;
  bool diverged = false;
  double wall_seconds = 0;
};

void save_checkpoint(const fs::path& path, const config& c, const cell_spec& spec, const cell_state& st) {
  nlohmann::json j;
  j["fingerprint"] = c.fingerprint();
  j["label"] = spec.label;
  j["next_step"] = st.next_step;
  j["weights"] = matrices_json(copy_of(st.w));
  j["adam_t"] = st.adam.t;
  if (st.adam.t) {
    j["adam_m"] = matrices_json(copy_of(st.adam.m));
    j["adam_v"] = matrices_json(copy_of(st.adam.v));
  }
  j["delta_cum"] = st.delta_cum;  // CBOR keeps every double exactly (NaN included)
  j["have_prev_wq"] = st.have_prev_wq;
  j["have_prev_update"] = st.have_prev_update;
  if (st.have_prev_wq) j["prev_wq"] = matrices_json(st.prev_wq);
  if (st.have_prev_update) j["prev_update"] = matrices_json(st.prev_update);
  j["series"] = series_json(st.s);
  j["diverged"] = st.diverged;
  j["wall_seconds"] = st.wall_seconds;
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_cbor(j);
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error(fmt::format("cannot write the checkpoint {}", tmp.string()));
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error(fmt::format("cannot write the checkpoint {}", tmp.string()));
  }
  fs::rename(tmp, path);  // atomic: an interrupted write leaves the previous checkpoint
}

/// Loads a checkpoint of this configuration and cell; false when there is none. A checkpoint of
/// another configuration, or a damaged one, is an error (never silently restarted over).
bool load_checkpoint(const fs::path& path, const config& c, const cell_spec& spec, cell_state& st) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  nlohmann::json j;
  try {
    j = nlohmann::json::from_cbor(bytes);
  } catch (const std::exception&) {
    throw std::runtime_error(fmt::format("checkpoint {} is damaged; delete it to start the cell again", path.string()));
  }
  try {
    if (j.at("fingerprint").get<std::uint64_t>() != c.fingerprint() || j.at("label").get<std::string>() != spec.label)
      throw std::runtime_error(fmt::format(
          "checkpoint {} belongs to another configuration; use another output or checkpoint directory, or delete it",
          path.string()));
    st.next_step = j.at("next_step").get<std::size_t>();
    std::vector<mat> ws = copy_of(st.w);
    matrices_from_json(j.at("weights"), ws);
    assign(st.w, ws);
    st.adam.t = j.at("adam_t").get<std::size_t>();
    if (st.adam.t) {
      st.adam.m.zeros_like(st.w);
      st.adam.v.zeros_like(st.w);
      std::vector<mat> ms = copy_of(st.adam.m), vs = copy_of(st.adam.v);
      matrices_from_json(j.at("adam_m"), ms);
      matrices_from_json(j.at("adam_v"), vs);
      assign(st.adam.m, ms);
      assign(st.adam.v, vs);
    }
    st.delta_cum = j.at("delta_cum").get<std::vector<double>>();
    st.have_prev_wq = j.at("have_prev_wq").get<bool>();
    st.have_prev_update = j.at("have_prev_update").get<bool>();
    if (st.have_prev_wq) matrices_from_json(j.at("prev_wq"), st.prev_wq);
    if (st.have_prev_update) matrices_from_json(j.at("prev_update"), st.prev_update);
    st.s = series_from_json(j.at("series"));
    st.diverged = j.at("diverged").get<bool>();
    st.wall_seconds = j.at("wall_seconds").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("checkpoint {} is damaged ({}); delete it to start the cell again", path.string(), e.what()));
  }
  return true;
}

bool all_finite(const detail::weights& w) {
  for (const mat* m : w.all())
    if (!m->allFinite()) return false;
  return true;
}

}  // namespace

double cell_result::final_log_sigma_wq(std::size_t layer) const {
  if (s.sigma_wq.empty()) return std::nan("");
  return std::log(s.sigma_wq.back().at(layer));
}

cell_result run_cell(const config& c, const cell_spec& spec_in, attention_backend& be, const run_options& ro) {
  if (const std::string e = c.validate(); !e.empty()) throw std::invalid_argument(e);
  cell_spec spec = spec_in;
  const head_modes modes = resolve_modes(c, spec);
  spec.modes = modes;
  const std::size_t L = c.layers, H = c.heads, D = c.head_dim;

  cell_state st;
  st.w = detail::init_weights(c, spec.seed);
  st.delta_cum.assign(L * H, 0.0);
  st.prev_wq.assign(L, mat());
  st.prev_update.assign(L, mat());
  for (std::size_t l = 0; l < L; ++l) {
    st.prev_wq[l] = mat::Zero(st.w.wq[l].rows(), st.w.wq[l].cols());
    st.prev_update[l] = st.prev_wq[l];
  }
  fs::path ckpt;
  if (!ro.checkpoint_dir.empty()) {
    fs::create_directories(ro.checkpoint_dir);
    ckpt = fs::path(ro.checkpoint_dir) / (file_label(spec.label) + ".cbor");
    load_checkpoint(ckpt, c, spec, st);
  }

  detail::weights grad;
  std::size_t ran = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return st.wall_seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::size_t logged = st.s.step.size();
  while (st.next_step < c.steps && !st.diverged) {
    if (ro.stop_after_steps && ran == ro.stop_after_steps) break;
    const std::size_t step = st.next_step;
    const auto tokens = detail::make_batch(c, spec.data, spec.seed, step);
    const detail::step_stats ss =
        detail::train_step(c, st.w, tokens, modes, splitmix64(spec.seed * 0x100000001b3ull + step), be, grad);
    for (std::size_t i = 0; i < L * H; ++i) st.delta_cum[i] += ss.delta_error[i];
    const bool log_now = step % c.log_every == 0 || step + 1 == c.steps || !std::isfinite(ss.loss);
    if (log_now) {
      series& s = st.s;
      s.step.push_back(step);
      s.loss.push_back(ss.loss);
      const bool ref = c.ref_every == 0 || logged % c.ref_every == 0 || step + 1 == c.steps;
      s.ref_loss.push_back(ref && all_finite(st.w) ? detail::reference_loss(c, st.w, tokens) : std::nan(""));
      std::vector<double> swq(L), swk(L), swqh(L * H), swkh(L * H);
      std::vector<std::optional<double>> cosv(L);
      for (std::size_t l = 0; l < L; ++l) {
        const bool finite = st.w.wq[l].allFinite() && st.w.wk[l].allFinite();
        swq[l] = finite ? sigma(view(st.w.wq[l])) : std::nan("");
        swk[l] = finite ? sigma(view(st.w.wk[l])) : std::nan("");
        for (std::size_t h = 0; h < H; ++h) {
          swqh[l * H + h] = finite ? sigma(view(st.w.wq[l]).block_cols(static_cast<Eigen::Index>(h * D), static_cast<Eigen::Index>(D))) : std::nan("");
          swkh[l * H + h] = finite ? sigma(view(st.w.wk[l]).block_cols(static_cast<Eigen::Index>(h * D), static_cast<Eigen::Index>(D))) : std::nan("");
        }
        if (st.have_prev_wq) {
          const mat upd = st.w.wq[l] - st.prev_wq[l];
          if (st.have_prev_update && finite && upd.squaredNorm() > 0 && st.prev_update[l].squaredNorm() > 0)
            cosv[l] = analysis::frobenius_cosine(to_double(upd), to_double(st.prev_update[l]));
          st.prev_update[l] = upd;
        }
        st.prev_wq[l] = st.w.wq[l];
      }
      st.have_prev_update = st.have_prev_wq;
      st.have_prev_wq = true;
      s.sigma_wq.push_back(swq);
      s.sigma_wk.push_back(swk);
      s.sigma_wq_head.push_back(swqh);
      s.sigma_wk_head.push_back(swkh);
      s.delta_error.push_back(ss.delta_error);
      s.delta_error_cum.push_back(st.delta_cum);
      s.repeated_max_rows.push_back(ss.repeated_max_rows);
      s.p_one.push_back(ss.p_one);
      s.output_error_mean_ulps.push_back(ss.output_error_mean);
      s.o_nonfinite.push_back(ss.o_nonfinite);
      s.max_score.push_back(ss.max_score);
      s.update_cosine.push_back(cosv);
      ++logged;
      if (ro.progress) {
        const double smax = *std::max_element(swq.begin(), swq.end());
        double dsum = 0;
        for (double x : st.delta_cum) dsum += x;
        ro.progress(fmt::format("{}: step {}/{} loss {:.4f} sigma(W_Q) {:.4f} cum delta err {:+.3e} ({:.1f} s)", spec.label,
                                step, c.steps, ss.loss, smax, dsum, elapsed()));
      }
    }
    if (!std::isfinite(ss.loss)) {
      st.diverged = true;
      st.next_step = step + 1;
      break;
    }
    detail::adam_state& a = st.adam;
    detail::adamw_update(c, st.w, grad, a);
    if (!all_finite(st.w)) st.diverged = true;
    st.next_step = step + 1;
    ++ran;
    if (!ckpt.empty() && c.checkpoint_every && st.next_step % c.checkpoint_every == 0 && st.next_step < c.steps) {
      cell_state snapshot_time = st;  // cheap at these sizes; keeps wall time consistent
      snapshot_time.wall_seconds = elapsed();
      save_checkpoint(ckpt, c, spec, snapshot_time);
    }
  }
  st.wall_seconds = elapsed();
  if (!ckpt.empty()) save_checkpoint(ckpt, c, spec, st);

  cell_result r;
  r.spec = spec;
  r.s = st.s;
  r.steps_run = st.next_step;
  r.wall_seconds = st.wall_seconds;
  r.final_loss = r.s.loss.empty() ? std::nan("") : r.s.loss.back();
  r.final_ref_loss = std::nan("");
  for (std::size_t k = r.s.ref_loss.size(); k-- > 0;)
    if (!std::isnan(r.s.ref_loss[k])) { r.final_ref_loss = r.s.ref_loss[k]; break; }
  // Derailed: a non-finite loss or weight, or a last loss more than 1 nat above uniform guessing (log vocab).
  r.diverged = st.diverged || (!r.s.loss.empty() && !(r.s.loss.back() <= std::log(static_cast<double>(c.vocab)) + 1.0));
  // growth rate: the largest least-squares slope of log sigma(W_Q) over the layers
  r.spectral_growth_rate = -INFINITY;
  for (std::size_t l = 0; l < L; ++l) {
    std::vector<double> x, y;
    for (std::size_t k = 0; k < r.s.step.size(); ++k)
      if (std::isfinite(r.s.sigma_wq[k][l]) && r.s.sigma_wq[k][l] > 0) {
        x.push_back(static_cast<double>(r.s.step[k]));
        y.push_back(std::log(r.s.sigma_wq[k][l]));
      }
    if (x.size() < 2) continue;
    const analysis::growth_fit f = analysis::fit_growth(x, y);
    if (f.slope > r.spectral_growth_rate) {
      r.spectral_growth_rate = f.slope;
      r.growth_rate_se = f.slope_se;
    }
  }
  if (!std::isfinite(r.spectral_growth_rate)) r.spectral_growth_rate = std::nan("");
  return r;
}

// --- the grid ------------------------------------------------------------------------------------

namespace {

std::string cell_label(attn::out_mode m, data_kind d, std::uint64_t seed) {
  return fmt::format("{}/{}/seed{}", attn::to_string(m), to_string(d), seed);
}

/// Runs `specs` on `threads` threads (each cell on one), in order of index; rethrows the first error.
std::vector<cell_result> run_cells(const config& c, const std::vector<cell_spec>& specs, const run_options& ro) {
  std::unique_ptr<attention_backend> be;
  if (ro.device == device_kind::gpu) be = make_gpu_backend();
  std::vector<cell_result> out(specs.size());
  std::atomic<std::size_t> next{0};
  std::mutex err_mu;
  std::exception_ptr err;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const unsigned nt = std::min<unsigned>(ro.threads ? ro.threads : hw, static_cast<unsigned>(specs.size()));
  auto worker = [&] {
    std::unique_ptr<attention_backend> twin = be ? nullptr : make_twin_backend();
    attention_backend& b = be ? *be : *twin;
    for (std::size_t i; (i = next++) < specs.size();) {
      {
        std::lock_guard lk(err_mu);
        if (err) return;
      }
      try {
        out[i] = run_cell(c, specs[i], b, ro);
      } catch (...) {
        std::lock_guard lk(err_mu);
        if (!err) err = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (err) std::rethrow_exception(err);
  return out;
}

double excess_of(const cell_result& a, const cell_result& ref, std::size_t layers) {
  double e = -INFINITY;
  for (std::size_t l = 0; l < layers; ++l) e = std::max(e, a.final_log_sigma_wq(l) - ref.final_log_sigma_wq(l));
  return e;
}

bool uniform_mode(const cell_result& r, attn::out_mode m) {
  return std::all_of(r.spec.modes.begin(), r.spec.modes.end(), [&](attn::out_mode x) { return x == m; });
}

struct interval {
  double mean = std::nan(""), lo = std::nan(""), hi = std::nan("");
};
/// Mean and 95 % Student t interval (NaN bounds for fewer than two values).
interval t_interval(const std::vector<double>& v) {
  interval r;
  if (v.empty()) return r;
  double s = 0;
  for (double x : v) s += x;
  r.mean = s / static_cast<double>(v.size());
  if (v.size() < 2) return r;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  const double se = std::sqrt(ss / static_cast<double>(v.size() - 1) / static_cast<double>(v.size()));
  const double t = analysis::student_t_quantile(0.975, static_cast<double>(v.size() - 1));
  r.lo = r.mean - t * se;
  r.hi = r.mean + t * se;
  return r;
}

/// The cumulative delta error at the last logged step, summed over every head and layer.
double delta_cum_total(const cell_result& r) {
  if (r.s.delta_error_cum.empty()) return std::nan("");
  double t = 0;
  for (double x : r.s.delta_error_cum.back()) t += x;
  return t;
}

}  // namespace

void judge(grid_result& g) {
  std::map<std::pair<int, std::uint64_t>, const cell_result*> ref;
  for (const cell_result& r : g.cells)
    if (uniform_mode(r, attn::out_mode::fp32)) ref[{static_cast<int>(r.spec.data), r.spec.seed}] = &r;
  for (cell_result& r : g.cells) {
    const auto it = ref.find({static_cast<int>(r.spec.data), r.spec.seed});
    r.excess_log_sigma.reset();
    if (it != ref.end() && it->second != &r) r.excess_log_sigma = excess_of(r, *it->second, g.cfg.layers);
    if (r.diverged) r.verdict = "diverged";
    else if (uniform_mode(r, attn::out_mode::fp32)) r.verdict = "reference";
    else if (!r.excess_log_sigma) r.verdict = "stable";  // no fp32 pair: nothing to compare with (to_json says so)
    else r.verdict = *r.excess_log_sigma > g.cfg.growth_threshold ? "growth" : "stable";
  }
}

grid_result run_grid(const preset& p, const run_options& ro) {
  if (const std::string e = p.cfg.validate(); !e.empty()) throw std::invalid_argument(e);
  if (p.modes.empty() || p.data.empty() || p.seeds.empty()) throw std::invalid_argument("the grid needs at least one mode, data kind and seed");
  grid_result g{p.cfg, p.modes, p.data, p.seeds, {}, true};
  std::vector<cell_spec> specs;
  for (data_kind d : p.data)
    for (std::uint64_t seed : p.seeds)
      for (attn::out_mode m : p.modes) specs.push_back(cell_spec{m, d, seed, {}, cell_label(m, d, seed)});
  g.cells = run_cells(p.cfg, specs, ro);
  for (const cell_result& r : g.cells)
    if (r.steps_run < p.cfg.steps && !r.diverged) g.complete = false;
  judge(g);
  return g;
}

nlohmann::json to_json(const grid_result& g, const std::string& preset_name, device_kind device) {
  nlohmann::json j;
  j["schema"] = "tiebreak.experiment/1";
  j["kind"] = "experiment_causal";
  j["preset"] = preset_name;
  j["device"] = device == device_kind::cpu ? "cpu" : "gpu";
  j["complete"] = g.complete;
  j["config"] = g.cfg.to_json();
  nlohmann::json modes = nlohmann::json::array(), data = nlohmann::json::array();
  for (attn::out_mode m : g.modes) modes.push_back(std::string(attn::to_string(m)));
  for (data_kind d : g.data) data.push_back(to_string(d));
  j["modes"] = modes;
  j["data"] = data;
  j["seeds"] = g.seeds;
  nlohmann::json cells = nlohmann::json::array();
  for (const cell_result& r : g.cells) {
    nlohmann::json hm = nlohmann::json::array();
    for (std::size_t l = 0; l < g.cfg.layers; ++l) {
      nlohmann::json row = nlohmann::json::array();
      for (std::size_t h = 0; h < g.cfg.heads; ++h) row.push_back(std::string(attn::to_string(r.spec.modes[l * g.cfg.heads + h])));
      hm.push_back(row);
    }
    cells.push_back({{"mode", std::string(attn::to_string(r.spec.mode))},
                     {"data", to_string(r.spec.data)},
                     {"seed", r.spec.seed},
                     {"label", r.spec.label},
                     {"head_modes", hm},
                     {"spectral_growth_rate", num(r.spectral_growth_rate)},
                     {"growth_rate_se", num(r.growth_rate_se)},
                     {"excess_log_sigma", r.excess_log_sigma ? num(*r.excess_log_sigma) : nlohmann::json(nullptr)},
                     {"delta_error_cum_total", num(delta_cum_total(r))},
                     {"final_loss", num(r.final_loss)},
                     {"final_ref_loss", num(r.final_ref_loss)},
                     {"diverged", r.diverged},
                     {"steps_run", r.steps_run},
                     {"verdict", r.verdict},
                     {"wall_seconds", num(r.wall_seconds)},
                     {"series", series_json(r.s)}});
  }
  j["cells"] = cells;

  // groups over seeds
  nlohmann::json groups = nlohmann::json::array();
  struct group_summary {
    attn::out_mode mode;
    data_kind data;
    std::size_t n = 0, growth = 0, stable = 0, diverged = 0, reference = 0;
    interval rate, excess, delta;
  };
  std::vector<group_summary> gs;
  for (attn::out_mode m : g.modes)
    for (data_kind d : g.data) {
      group_summary s;
      s.mode = m;
      s.data = d;
      std::vector<double> rates, ex, dl;
      for (const cell_result& r : g.cells) {
        if (r.spec.mode != m || r.spec.data != d) continue;
        ++s.n;
        if (std::isfinite(r.spectral_growth_rate)) rates.push_back(r.spectral_growth_rate);
        if (r.excess_log_sigma && std::isfinite(*r.excess_log_sigma)) ex.push_back(*r.excess_log_sigma);
        if (const double t = delta_cum_total(r); std::isfinite(t)) dl.push_back(t);
        s.growth += r.verdict == "growth";
        s.stable += r.verdict == "stable";
        s.diverged += r.verdict == "diverged";
        s.reference += r.verdict == "reference";
      }
      s.rate = t_interval(rates);
      s.excess = t_interval(ex);
      s.delta = t_interval(dl);
      gs.push_back(s);
      const bool has_ex = !ex.empty();
      groups.push_back({{"mode", std::string(attn::to_string(m))},
                        {"data", to_string(d)},
                        {"n", s.n},
                        {"growth_rate_mean", num(s.rate.mean)},
                        {"growth_rate_ci", {num(s.rate.lo), num(s.rate.hi)}},
                        {"excess_log_sigma_mean", has_ex ? num(s.excess.mean) : nlohmann::json(nullptr)},
                        {"excess_log_sigma_ci", has_ex ? nlohmann::json{num(s.excess.lo), num(s.excess.hi)} : nlohmann::json(nullptr)},
                        {"delta_error_cum_mean", num(s.delta.mean)},
                        {"delta_error_cum_ci", {num(s.delta.lo), num(s.delta.hi)}},
                        {"verdicts", {{"growth", s.growth}, {"stable", s.stable}, {"diverged", s.diverged}, {"reference", s.reference}}}});
    }
  j["groups"] = groups;

  // conclusion: the paper's prediction is growth (or divergence) in (bf16, lowrank) and in no other cell
  auto find = [&](attn::out_mode m, data_kind d) -> const group_summary* {
    for (const auto& s : gs)
      if (s.mode == m && s.data == d) return &s;
    return nullptr;
  };
  const bool has_ref = std::find(g.modes.begin(), g.modes.end(), attn::out_mode::fp32) != g.modes.end();
  const group_summary* target = find(attn::out_mode::bf16, data_kind::lowrank);
  std::ostringstream text;
  bool reproduced = false;
  if (!has_ref || !target) {
    text << "The grid lacks the fp32 reference or the bf16/lowrank cell, so the prediction cannot be tested.";
  } else {
    auto bad = [](const group_summary& s) { return s.growth + s.diverged; };
    const bool target_hit = 2 * bad(*target) > target->n && std::isfinite(target->excess.lo) ? target->excess.lo > 0
                                                                                             : 2 * bad(*target) > target->n;
    bool others_clean = true;
    std::ostringstream others;
    for (const auto& s : gs) {
      if (&s == target || s.mode == attn::out_mode::fp32) continue;
      if (2 * bad(s) > s.n) others_clean = false;
      others << fmt::format("{} {}/{}: {} of {} seeds grew or diverged (excess log sigma {:+.4f}); ", attn::to_string(s.mode),
                            to_string(s.data), s.n, bad(s), s.n, s.excess.mean);
    }
    reproduced = target_hit && others_clean;
    text << fmt::format(
        "Prediction (Qiu & Yao 2025): W_Q's spectral norm grows beyond its fp32 pair only with biased rounding (bf16) on "
        "repeating low-rank data. bf16/lowrank: {} of {} seeds grew or diverged, excess log sigma {:+.4f} "
        "(95 % interval [{:+.4f}, {:+.4f}]); ",
        bad(*target), target->n, target->excess.mean, target->excess.lo, target->excess.hi);
    text << "other cells: " << others.str();
    text << "cumulative delta error summed over heads (the sign of the rounding bias, mean over seeds with 95 % interval): ";
    for (const auto& s : gs)
      if (s.mode != attn::out_mode::fp32)
        text << fmt::format("{}/{} {:+.3e} [{:+.3e}, {:+.3e}]; ", attn::to_string(s.mode), to_string(s.data), s.delta.mean,
                            s.delta.lo, s.delta.hi);
    text << fmt::format("verdict threshold {} in log sigma after {} steps. ", g.cfg.growth_threshold, g.cfg.steps);
    text << (reproduced ? "The mechanism reproduced at this preset."
                        : "The mechanism did NOT reproduce at this preset: the measurements above are the result.");
    if (!g.complete) text << " The run is incomplete (stopped before the last step); resume it to finish.";
  }
  j["conclusion"] = {{"reproduced", reproduced}, {"text", text.str()}};
  return j;
}

// --- bisect --------------------------------------------------------------------------------------

bisect_result bisect_heads(std::size_t layers, std::size_t heads, double threshold, const trial_fn& trial) {
  using head_set = std::vector<std::pair<std::size_t, std::size_t>>;
  bisect_result r;
  auto run = [&](const head_set& s) {
    const double e = trial(s);
    const bool growth = !(e <= threshold);  // NaN (diverged) counts as growth
    r.trials.push_back({s, e, growth});
    return growth;
  };
  r.baseline_excess = trial({});
  r.baseline_growth = !(r.baseline_excess <= threshold);
  if (!r.baseline_growth) {
    r.text = "no growth to localise: with no head remedied the run stays within the threshold of the all-remedied run";
    return r;
  }
  auto layer_heads = [&](std::size_t l) {
    head_set s;
    for (std::size_t h = 0; h < heads; ++h) s.emplace_back(l, h);
    return s;
  };
  // 1. one layer at a time (the paper: "using standard attention in that layer alone")
  head_set current;
  for (std::size_t l = 0; l < layers && current.empty(); ++l)
    if (layers > 1 ? !run(layer_heads(l)) : true) current = layer_heads(l);
  if (current.empty()) {
    // no single layer suffices: start from every head
    for (std::size_t l = 0; l < layers; ++l)
      for (auto& x : layer_heads(l)) current.push_back(x);
    if (run(current)) {
      r.text = "remedying every head does not remove the growth (the all-remedied run is the reference: this means noise "
               "above the threshold)";
      return r;
    }
  }
  // 2. drop heads one at a time while the growth stays removed (a minimal set)
  for (std::size_t i = 0; i < current.size() && current.size() > 1;) {
    head_set without = current;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    if (!run(without)) current = without;
    else ++i;
  }
  r.heads = current;
  std::ostringstream t;
  t << "remedying ";
  for (std::size_t k = 0; k < current.size(); ++k) t << (k ? ", " : "") << "layer " << current[k].first << " head " << current[k].second;
  t << (current.size() == 1 ? " alone" : "") << " removes the growth (a minimal set: no head of it can be left out)";
  r.text = t.str();
  return r;
}

nlohmann::json run_bisect(const preset& p, const bisect_spec& b, const run_options& ro, const std::string& preset_name) {
  const config& c = p.cfg;
  if (const std::string e = c.validate(); !e.empty()) throw std::invalid_argument(e);
  const std::size_t L = c.layers, H = c.heads;
  auto spec_for = [&](const std::vector<std::pair<std::size_t, std::size_t>>& remedied, bool all) {
    cell_spec s;
    s.mode = all ? b.remedy : b.biased;
    s.data = b.data;
    s.seed = b.seed;
    s.modes.assign(L * H, all ? b.remedy : b.biased);
    std::string heads = all ? "all" : "none";
    if (!all && !remedied.empty()) {
      heads.clear();
      for (auto [l, h] : remedied) {
        s.modes[l * H + h] = b.remedy;
        heads += fmt::format("{}L{}H{}", heads.empty() ? "" : "+", l, h);
      }
    }
    s.label = fmt::format("bisect/{}/seed{}/{}-on-{}", to_string(b.data), b.seed, attn::to_string(b.remedy), heads);
    return s;
  };
  std::vector<cell_result> reference = run_cells(c, {spec_for({}, true)}, ro);
  const cell_result ref = reference.front();
  std::vector<cell_result> all_runs{ref};
  const trial_fn trial = [&](const std::vector<std::pair<std::size_t, std::size_t>>& remedied) {
    cell_result r = run_cells(c, {spec_for(remedied, false)}, ro).front();
    all_runs.push_back(r);
    if (r.diverged) return std::nan("");
    return excess_of(r, ref, L);
  };
  const bisect_result br = bisect_heads(L, H, c.growth_threshold, trial);
  nlohmann::json j;
  j["schema"] = "tiebreak.experiment/1";
  j["kind"] = "experiment_bisect";
  j["preset"] = preset_name;
  j["device"] = ro.device == device_kind::cpu ? "cpu" : "gpu";
  j["config"] = c.to_json();
  j["biased"] = std::string(attn::to_string(b.biased));
  j["remedy"] = std::string(attn::to_string(b.remedy));
  j["data"] = to_string(b.data);
  j["seed"] = b.seed;
  j["baseline"] = {{"excess_log_sigma", num(br.baseline_excess)}, {"verdict", br.baseline_growth ? "growth" : "stable"}};
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : br.trials) {
    nlohmann::json hs = nlohmann::json::array();
    for (auto [l, h] : t.heads) hs.push_back({l, h});
    trials.push_back({{"heads", hs}, {"excess_log_sigma", num(t.excess_log_sigma)}, {"verdict", t.growth ? "growth" : "stable"}});
  }
  j["trials"] = trials;
  nlohmann::json hs = nlohmann::json::array();
  for (auto [l, h] : br.heads) hs.push_back({l, h});
  j["result"] = {{"heads", hs}, {"text", br.text}};
  nlohmann::json runs = nlohmann::json::array();
  for (const cell_result& r : all_runs)
    runs.push_back({{"label", r.spec.label}, {"final_loss", num(r.final_loss)}, {"diverged", r.diverged},
                    {"spectral_growth_rate", num(r.spectral_growth_rate)}, {"series", series_json(r.s)}});
  j["runs"] = runs;
  return j;
}

}  // namespace tiebreak::experiment
