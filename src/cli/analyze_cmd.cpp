// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak analyze spectral|align|bias`: the analysis library on .npy files.
#include <tiebreak/analysis/align.hpp>
#include <tiebreak/analysis/bias.hpp>
#include <tiebreak/analysis/json.hpp>
#include <tiebreak/analysis/spectral.hpp>
#include <tiebreak/io/json.hpp>
#include <tiebreak/io/npy.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"

namespace tiebreak::cli {
namespace {

/// Rejects NaN and Inf before CLI11's Range (which lets NaN through).
const CLI::Validator finite_number([](std::string& s) { return finite_number_error(s); }, "FINITE");

namespace an = tiebreak::analysis;
using nlohmann::json;
using an::index;

/// A user-facing problem with the inputs (wrong shapes, too few matrices): reported like npy_error.
struct input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string shape_text(const std::vector<std::size_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

/// A stack of row-major matrices viewed in a C-order array: 0-d → 1×1, 1-d → 1×n,
/// 2-d → one matrix, N-d → prod(leading) matrices of the last two dims.
struct matrix_stack {
  index count = 0, rows = 0, cols = 0;
};
/// A stack of empty matrices has no data to bound its count (shape (2^62, 0, 5) is a valid
/// header of an empty file): only a single empty matrix is accepted.
void check_stack(const std::string& file, const std::vector<std::size_t>& shape, bool empty);

matrix_stack stack_of(const std::vector<std::size_t>& shape) {
  matrix_stack s{1, 1, 1};
  if (shape.size() == 1) s.cols = static_cast<index>(shape[0]);
  if (shape.size() >= 2) {
    s.rows = static_cast<index>(shape[shape.size() - 2]);
    s.cols = static_cast<index>(shape[shape.size() - 1]);
    for (std::size_t i = 0; i + 2 < shape.size(); ++i) s.count *= static_cast<index>(shape[i]);
  }
  return s;
}

void check_stack(const std::string& file, const std::vector<std::size_t>& shape, bool empty) {
  if (empty && stack_of(shape).count > 1)
    throw input_error(file + ": no values in a stack of " + std::to_string(stack_of(shape).count) + " empty matrices (shape " +
                      shape_text(shape) + ")");
}

Eigen::MatrixXd matrix_at(const io::npy_array<double>& a, const matrix_stack& s, index i) {
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      a.data.data() + i * s.rows * s.cols, s.rows, s.cols);
}

json degrees(const Eigen::VectorXd& radians) {
  json a = json::array();
  for (index i = 0; i < radians.size(); ++i) a.push_back(an::json_number(radians[i] * 180.0 / std::numbers::pi));
  return a;
}

std::string fmt_list(const json& a) {
  std::string s;
  for (const auto& x : a) s += (s.empty() ? "" : " ") + fmt::format("{:.6g}", io::number_from_json(x));
  return s;
}

// ------------------------------------------------------------------------------------------------
struct spectral_args {
  std::vector<std::string> files;
  bool json_out = false;
  index rows_per_slice = 0;
  index cols_per_slice = 0;
  bool exact = false;
  double tol = 1e-6;
  std::string method = "lanczos";
};

json spectral_one(const std::string& file, const spectral_args& a) {
  const auto arr = io::read_npy<double>(file);
  check_stack(file, arr.shape, arr.data.empty());
  const matrix_stack st = stack_of(arr.shape);
  an::spectral_options o;
  o.rel_tol = a.tol;
  o.compute_vectors = false;
  o.method = a.method == "power" ? an::spectral_method::power : an::spectral_method::lanczos;
  if (o.method == an::spectral_method::power) o.max_iterations = 100000;
  if ((a.rows_per_slice || a.cols_per_slice) && arr.shape.size() != 2)
    throw input_error(file + ": --rows-per-slice/--cols-per-slice need a 2-d matrix, got shape " +
                      shape_text(arr.shape));
  if (a.rows_per_slice && st.rows % a.rows_per_slice != 0)
    throw input_error(fmt::format("{}: {} rows do not split into slices of {}", file, st.rows, a.rows_per_slice));
  if (a.cols_per_slice && st.cols % a.cols_per_slice != 0)
    throw input_error(fmt::format("{}: {} columns do not split into slices of {}", file, st.cols, a.cols_per_slice));
  for (double v : arr.data)
    if (!std::isfinite(v)) throw input_error(file + ": matrix has NaN or infinite entries");

  json out = {{"file", file}, {"shape", arr.shape}, {"method", a.method}, {"rel_tol", a.tol}};
  json mats = json::array();
  double largest = 0;
  bool all_converged = true;
  for (index i = 0; i < st.count; ++i) {
    const auto v = an::row_major_view(arr.data.data() + i * st.rows * st.cols, st.rows, st.cols);
    const auto r = an::spectral_norm(v, o);
    const double fro = an::frobenius_norm(v);
    json m = r;
    m["frobenius_norm"] = an::json_number(fro);
    m["stable_rank"] = an::json_number(r.sigma > 0 ? (fro / r.sigma) * (fro / r.sigma) : 0.0);
    if (a.exact) {
      const an::spectrum_summary ex = an::exact_spectrum(v);
      m["exact"] = {{"spectral_norm", an::json_number(ex.spectral_norm)},
                    {"rel_error", an::json_number(ex.spectral_norm > 0 ? std::abs(r.sigma - ex.spectral_norm) / ex.spectral_norm : std::abs(r.sigma))},
                    {"stable_rank", an::json_number(ex.stable_rank)},
                    {"effective_rank", an::json_number(ex.effective_rank)}};
    }
    if (a.rows_per_slice || a.cols_per_slice) {
      const auto slices = a.rows_per_slice ? an::split_rows(v, a.rows_per_slice) : an::split_cols(v, a.cols_per_slice);
      json js = json::array();
      for (std::size_t s = 0; s < slices.size(); ++s) {
        const auto rs = an::spectral_norm(slices[s], o);
        const index first = static_cast<index>(s) * (a.rows_per_slice ? a.rows_per_slice : a.cols_per_slice);
        const index len = a.rows_per_slice ? a.rows_per_slice : a.cols_per_slice;
        json e = {{"index", s},
                  {a.rows_per_slice ? "rows" : "cols", {first, first + len}},
                  {"spectral_norm", an::json_number(rs.sigma)},
                  {"iterations", rs.iterations},
                  {"converged", rs.converged}};
        if (a.exact) e["exact_spectral_norm"] = an::json_number(an::exact_spectrum(slices[s]).spectral_norm);
        all_converged = all_converged && rs.converged;
        js.push_back(e);
      }
      m["slices"] = js;
      m["slice_spectral_norms"] = json::array();
      for (const auto& e : js) m["slice_spectral_norms"].push_back(e["spectral_norm"]);
    }
    all_converged = all_converged && r.converged;
    largest = std::max(largest, r.sigma);
    mats.push_back(m);
  }
  if (st.count == 1) {
    for (auto it = mats[0].begin(); it != mats[0].end(); ++it) out[it.key()] = it.value();
  } else {
    out["spectral_norm"] = an::json_number(largest);  // of the stack: the largest member
    out["matrices"] = mats;
    out["slice_spectral_norms"] = json::array();
    for (const auto& m : mats) out["slice_spectral_norms"].push_back(m["spectral_norm"]);
  }
  out["converged"] = all_converged;
  return out;
}

void print_spectral_text(const json& j) {
  auto line = [](const json& m) {
    std::string s = fmt::format("spectral_norm {:.9g}  frobenius {:.6g}  stable_rank {:.4g}  ({} passes{})",
                                io::number_from_json(m["spectral_norm"]), io::number_from_json(m["frobenius_norm"]),
                                io::number_from_json(m["stable_rank"]),
                                m["iterations"].get<int>(), m["converged"].get<bool>() ? "" : ", NOT converged");
    if (m.contains("exact"))
      s += fmt::format("  exact {:.9g} (rel. error {:.2e}, effective_rank {:.4g})",
                       io::number_from_json(m["exact"]["spectral_norm"]), io::number_from_json(m["exact"]["rel_error"]),
                       io::number_from_json(m["exact"]["effective_rank"]));
    return s;
  };
  const std::string head = fmt::format("{}  {}", j["file"].get<std::string>(), shape_text(j["shape"].get<std::vector<std::size_t>>()));
  if (j.contains("matrices")) {
    std::cout << head << "  stack, largest spectral_norm " << fmt::format("{:.9g}", io::number_from_json(j["spectral_norm"])) << '\n';
    for (std::size_t i = 0; i < j["matrices"].size(); ++i) std::cout << fmt::format("  [{}] ", i) << line(j["matrices"][i]) << '\n';
    return;
  }
  std::cout << head << "  " << line(j) << '\n';
  if (j.contains("slices"))
    for (const auto& s : j["slices"])
      std::cout << fmt::format("  slice {:>3}  {:>5}:{:<5} {:.9g}\n", s["index"].get<int>(),
                               (s.contains("rows") ? s["rows"] : s["cols"])[0].get<index>(),
                               (s.contains("rows") ? s["rows"] : s["cols"])[1].get<index>(),
                               io::number_from_json(s["spectral_norm"]));
}

// ------------------------------------------------------------------------------------------------
struct align_args {
  std::vector<std::string> files;
  bool json_out = false;
  index k = 1;
  std::vector<std::string> rank1;
  std::string error_grad;
};

void run_align(const align_args& a) {
  std::vector<Eigen::MatrixXd> seq;
  std::vector<std::string> origin;
  index rows = -1, cols = -1;
  for (const auto& f : a.files) {
    const auto arr = io::read_npy<double>(f);
    if (arr.shape.size() < 2)
      throw input_error(f + ": align needs matrices (2-d) or stacks of them (3-d), got shape " + shape_text(arr.shape));
    check_stack(f, arr.shape, arr.data.empty());
    const matrix_stack st = stack_of(arr.shape);
    for (index i = 0; i < st.count; ++i) {
      if (rows >= 0 && (st.rows != rows || st.cols != cols))
        throw input_error(fmt::format("{}: matrix shape {}x{} differs from the first matrix's {}x{}", f, st.rows, st.cols, rows, cols));
      rows = st.rows;
      cols = st.cols;
      seq.push_back(matrix_at(arr, st, i));
      if (!seq.back().allFinite()) throw input_error(f + ": matrix has NaN or infinite entries");
      origin.push_back(st.count == 1 ? f : fmt::format("{}[{}]", f, i));
    }
  }
  if (seq.size() < 2 && a.rank1.empty())
    throw input_error("align needs at least two matrices (several files, or one 3-d stack), or --rank1 E U V");
  json out = {{"command", "align"}, {"k", a.k}, {"count", seq.size()}};
  if (!seq.empty()) out["shape"] = {rows, cols};
  Eigen::MatrixXd grad;
  if (!a.error_grad.empty()) {
    const auto g = io::read_npy<double>(a.error_grad);
    if (g.shape.size() != 2 || static_cast<index>(g.shape[0]) != rows || static_cast<index>(g.shape[1]) != cols)
      throw input_error(fmt::format("{}: error gradient has shape {}, the matrices are {}x{}", a.error_grad, shape_text(g.shape), rows, cols));
    grad = matrix_at(g, stack_of(g.shape), 0);
    if (!grad.allFinite()) throw input_error(a.error_grad + ": matrix has NaN or infinite entries");
  }
  an::update_alignment_tracker tracker(a.k);
  json steps = json::array();
  an::top_subspaces first_top, last_top;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const an::update_step s = tracker.push(seq[i]);
    json e = {{"index", i},
              {"source", origin[i]},
              {"spectral_norm", an::json_number(s.ranks.spectral_norm)},
              {"frobenius_norm", an::json_number(s.ranks.frobenius_norm)},
              {"stable_rank", an::json_number(s.ranks.stable_rank)},
              {"effective_rank", an::json_number(s.ranks.effective_rank)}};
    if (s.cosine_with_previous) {
      e["cosine_with_previous"] = an::json_number(*s.cosine_with_previous);
      e["principal_angles_deg"] = degrees(s.overlap_with_previous->left.angles);
      e["principal_angles_right_deg"] = degrees(s.overlap_with_previous->right.angles);
      e["overlap_left"] = an::json_number(s.overlap_with_previous->left.overlap);
      e["overlap_right"] = an::json_number(s.overlap_with_previous->right.overlap);
    }
    if (grad.size()) e["error_gradient_alignment"] = an::gradient_alignment(grad, seq[i], a.k);
    steps.push_back(e);
  }
  if (seq.size() >= 2) {
    // The drift of the top-k subspaces over the whole sequence (for two matrices: the only pair).
    const auto ov = an::subspace_overlap(seq.front(), seq.back(), a.k);
    out["principal_angles_deg"] = degrees(ov.left.angles);
    out["principal_angles_right_deg"] = degrees(ov.right.angles);
    out["cosine"] = an::json_number(an::frobenius_cosine(seq.front(), seq.back()));
  }
  out["steps"] = steps;
  if (!a.rank1.empty()) {
    const auto e = io::read_npy<double>(a.rank1[0]);
    const auto u = io::read_npy<double>(a.rank1[1]);
    const auto v = io::read_npy<double>(a.rank1[2]);
    if (e.shape.size() != 1) throw input_error(a.rank1[0] + ": weights must be 1-d, got shape " + shape_text(e.shape));
    if (u.shape.size() != 2 || u.shape[0] != e.shape[0])
      throw input_error(fmt::format("{}: U must be {}×m (one row per term), got shape {}", a.rank1[1], e.shape[0], shape_text(u.shape)));
    if (v.shape.size() != 2 || v.shape[0] != e.shape[0])
      throw input_error(fmt::format("{}: V must be {}×n (one row per term), got shape {}", a.rank1[2], e.shape[0], shape_text(v.shape)));
    for (std::size_t i = 0; i < 3; ++i) {
      const auto& arr = i == 0 ? e : i == 1 ? u : v;
      for (double x : arr.data)
        if (!std::isfinite(x)) throw input_error(a.rank1[i] + ": matrix has NaN or infinite entries");
    }
    const Eigen::VectorXd ev = Eigen::Map<const Eigen::VectorXd>(e.data.data(), static_cast<index>(e.data.size()));
    const auto c = an::rank1_coherence_of(ev, matrix_at(u, stack_of(u.shape), 0), matrix_at(v, stack_of(v.shape), 0));
    out["coherence"] = c;
  }
  if (a.json_out) {
    std::cout << out.dump() << '\n';
    return;
  }
  if (seq.size() >= 2) {
    std::cout << fmt::format("{} matrices {}x{}, k = {}\n", seq.size(), rows, cols, a.k);
    for (const auto& s : steps) {
      std::cout << fmt::format("  [{}] {}  spectral_norm {:.6g}  stable_rank {:.4g}  effective_rank {:.4g}",
                               s["index"].get<std::size_t>(), s["source"].get<std::string>(),
                               io::number_from_json(s["spectral_norm"]), io::number_from_json(s["stable_rank"]),
                               io::number_from_json(s["effective_rank"]));
      if (s.contains("cosine_with_previous"))
        std::cout << fmt::format("  cos(prev) {:.6f}  angles(deg) left [{}] right [{}]",
                                 io::number_from_json(s["cosine_with_previous"]), fmt_list(s["principal_angles_deg"]),
                                 fmt_list(s["principal_angles_right_deg"]));
      std::cout << '\n';
    }
    std::cout << fmt::format("  first vs last: cosine {:.6f}  principal angles (deg) left [{}] right [{}]\n",
                             io::number_from_json(out["cosine"]), fmt_list(out["principal_angles_deg"]),
                             fmt_list(out["principal_angles_right_deg"]));
  }
  if (out.contains("coherence"))
    std::cout << fmt::format("rank-1 sum of {} terms: coherence {:.6f}  dominant_share {:.6f}  weight_sum {:.6g}\n",
                             out["coherence"]["terms"].get<std::size_t>(), io::number_from_json(out["coherence"]["coherence"]),
                             io::number_from_json(out["coherence"]["dominant_share"]), io::number_from_json(out["coherence"]["weight_sum"]));
}

// ------------------------------------------------------------------------------------------------
struct bias_args {
  std::vector<std::string> files;
  bool json_out = false;
  bool per_row = false;
  bool series = false;
  std::size_t block_length = 0;
  std::size_t resamples = 2000;
  std::uint64_t seed = 20251001;
  double confidence = 0.95;
  std::size_t warmup = 20;
  double cusum_k = 0.5;
  double cusum_h = 5.0;
};

json bias_one(const std::string& file, const bias_args& a) {
  const auto arr = io::read_npy<double>(file);
  if (arr.data.empty()) throw input_error(file + ": no values (shape " + shape_text(arr.shape) + ")");
  if (a.per_row && arr.shape.size() != 2)
    throw input_error(file + ": --per-row needs a 2-d array, got shape " + shape_text(arr.shape));
  an::running_moments m;
  m.push(std::span<const double>(arr.data));
  const an::t_test_result t = an::t_test(m, 0, a.confidence);
  const an::sign_test_result s = an::sign_test(m);
  an::bootstrap_options bo;
  bo.block_length = a.block_length;
  bo.resamples = a.resamples;
  bo.seed = a.seed;
  bo.confidence = a.confidence;
  const an::bootstrap_result b = an::block_bootstrap_mean(arr.data, bo);
  an::drift_options dopt;
  dopt.warmup_steps = a.warmup;
  dopt.k = a.cusum_k;
  dopt.h = a.cusum_h;
  an::drift_detector drift(dopt);
  double max_abs_cum = 0;
  // The same series as the tests above: NaN and Inf are counted in `nonfinite`, not summed (one
  // Inf would turn every later cumulative sum into Inf or NaN). The detector skips NaN and keeps
  // the step numbering, so an alarm still names the value's index in the file.
  for (double v : arr.data)
    max_abs_cum = std::max(max_abs_cum, std::abs(drift.push(std::isfinite(v) ? v : NAN).cumulative_sum));

  json out = t;  // n, mean, sd, se, t, df, p_value, cohen_d, hedges_g, ci_low, ci_high, confidence
  out["file"] = file;
  out["shape"] = arr.shape;
  out["nonfinite"] = m.nonfinite;
  out["sum"] = an::json_number(m.sum());
  out["mean_abs"] = an::json_number(m.n ? m.sum_abs / static_cast<double>(m.n) : 0.0);
  out["sign_test"] = s;
  out["bootstrap"] = b;
  json d = {{"sigma", an::json_number(drift.sigma())},
            {"k", a.cusum_k},
            {"h", a.cusum_h},
            {"warmup", a.warmup},
            {"first_alarm", drift.first_alarm() ? json(*drift.first_alarm()) : json(nullptr)},
            {"direction", drift.first_alarm_direction()},
            {"cumulative_sum_final", an::json_number(drift.cumulative_sums().empty() ? 0.0 : drift.cumulative_sums().back())},
            {"max_abs_cumulative_sum", an::json_number(max_abs_cum)}};
  if (a.series) {
    json c = json::array();
    for (double v : drift.cumulative_sums()) c.push_back(an::json_number(v));
    d["cumulative_sum"] = c;
  }
  out["drift"] = d;
  if (a.per_row) {
    json groups = json::array();
    const std::size_t cols = arr.shape[1];
    for (std::size_t r = 0; r < arr.shape[0]; ++r) {
      an::running_moments g;
      g.push(std::span<const double>(arr.data.data() + r * cols, cols));
      const auto gt = an::t_test(g, 0, a.confidence);
      const auto gs = an::sign_test(g);
      groups.push_back({{"row", r},
                        {"n", gt.n},
                        {"mean", an::json_number(gt.mean)},
                        {"sd", an::json_number(gt.sd)},
                        {"t", an::json_number(gt.t)},
                        {"p_value", an::json_number(gt.p_value)},
                        {"cohen_d", an::json_number(gt.cohen_d)},
                        {"sum", an::json_number(g.sum())},
                        {"sign_skew", an::json_number(gs.sign_skew)},
                        {"sign_p_value", an::json_number(gs.p_value)}});
    }
    out["groups"] = groups;
  }
  return out;
}

void print_bias_text(const json& j) {
  auto num = [](const json& x) { return fmt::format("{:.6g}", io::number_from_json(x)); };
  std::cout << fmt::format("{}  {}  n {}\n", j["file"].get<std::string>(), shape_text(j["shape"].get<std::vector<std::size_t>>()), j["n"].get<std::uint64_t>());
  std::cout << fmt::format("  mean {}  sd {}  t {}  p {}  cohen_d {}  {}% CI [{}, {}]\n", num(j["mean"]), num(j["sd"]),
                           num(j["t"]), num(j["p_value"]), num(j["cohen_d"]), 100 * j["confidence"].get<double>(),
                           num(j["ci_low"]), num(j["ci_high"]));
  const auto& s = j["sign_test"];
  std::cout << fmt::format("  sign test: {} positive, {} negative, {} zero  skew {}  p {}\n", s["positive"].get<std::uint64_t>(),
                           s["negative"].get<std::uint64_t>(), s["zero"].get<std::uint64_t>(), num(s["sign_skew"]), num(s["p_value"]));
  const auto& b = j["bootstrap"];
  std::cout << fmt::format("  block bootstrap (block {}, {} resamples): se {}  CI [{}, {}]  p {}\n", b["block_length"].get<std::size_t>(),
                           b["resamples"].get<std::size_t>(), num(b["se"]), num(b["ci_low"]), num(b["ci_high"]), num(b["p_value"]));
  const auto& d = j["drift"];
  std::cout << fmt::format("  drift: cumulative sum {}  CUSUM first alarm {}\n", num(d["cumulative_sum_final"]),
                           d["first_alarm"].is_null() ? std::string("none")
                                                      : fmt::format("at {} ({})", d["first_alarm"].get<std::size_t>(),
                                                                    d["direction"].get<int>() > 0 ? "up" : "down"));
  if (j.contains("groups"))
    for (const auto& g : j["groups"])
      std::cout << fmt::format("  row {:>4}  mean {}  t {}  p {}  sign_skew {}\n", g["row"].get<std::size_t>(), num(g["mean"]),
                               num(g["t"]), num(g["p_value"]), num(g["sign_skew"]));
}

}  // namespace

void register_analyze(CLI::App& app) {
  CLI::App* analyze = app.add_subcommand("analyze", "Bias statistics, low-rank alignment and spectral norms of .npy data");
  analyze->require_subcommand(1);

  auto sa = std::make_shared<spectral_args>();
  CLI::App* spectral = analyze->add_subcommand("spectral", "Spectral norm (and per-slice norms) of .npy matrices");
  spectral->add_option("files", sa->files, ".npy files: 2-d matrices, or N-d stacks of them")->required();
  spectral->add_flag("--json", sa->json_out, "One JSON object per file, one per line");
  spectral->add_option("--rows-per-slice", sa->rows_per_slice, "Also the norm of each block of this many rows (e.g. 64: heads of W_Q)")
      ->check(CLI::PositiveNumber);
  spectral->add_option("--cols-per-slice", sa->cols_per_slice, "Also the norm of each block of this many columns")
      ->check(CLI::PositiveNumber)->excludes("--rows-per-slice");
  spectral->add_flag("--exact", sa->exact, "Check against a full SVD (slow for large matrices); adds effective rank");
  spectral->add_option("--tol", sa->tol, "Relative accuracy target")->capture_default_str()->check(finite_number)->check(CLI::Range(1e-15, 0.5));
  spectral->add_option("--method", sa->method, "lanczos or power")->capture_default_str()->check(CLI::IsMember({"lanczos", "power"}));
  spectral->callback([sa] {
    run_command([&] {
      for (const auto& f : sa->files) {
        const json j = spectral_one(f, *sa);
        if (sa->json_out) std::cout << j.dump() << '\n';
        else print_spectral_text(j);
      }
    });
  });

  auto aa = std::make_shared<align_args>();
  CLI::App* align = analyze->add_subcommand("align", "Principal angles, cosines and ranks along a sequence of matrices; rank-1 coherence");
  align->add_option("files", aa->files, ".npy matrices in sequence order (or one 3-d stack)");
  align->add_flag("--json", aa->json_out, "One JSON object");
  align->add_option("-k,--k", aa->k, "Dimension of the top singular subspaces compared")->capture_default_str()->check(CLI::PositiveNumber);
  align->add_option("--rank1", aa->rank1, "E.npy U.npy V.npy: coherence of sum_T E[T] U[T]ᵀ V[T]")->expected(3);
  align->add_option("--error-grad", aa->error_grad, ".npy error gradient G: its alignment with each matrix's top-k directions");
  align->callback([aa] { run_command([&] { run_align(*aa); }); });

  auto ba = std::make_shared<bias_args>();
  CLI::App* bias = analyze->add_subcommand("bias", "Bias statistics of signed errors (any shape, flattened in C order)");
  bias->add_option("files", ba->files, ".npy arrays of signed errors")->required();
  bias->add_flag("--json", ba->json_out, "One JSON object per file, one per line");
  bias->add_flag("--per-row", ba->per_row, "Also test each row of a 2-d array (e.g. one row per head)");
  bias->add_flag("--series", ba->series, "Include the cumulative sum series in the JSON");
  bias->add_option("--block-length", ba->block_length, "Bootstrap block length (0: 1.5 n^(1/3))")->capture_default_str()->check(CLI::Validator([](std::string& s) { return unsigned_number_error(s); }, "UINT"));
  bias->add_option("--resamples", ba->resamples, "Bootstrap resamples")->capture_default_str()->check(CLI::Range(1, 10000000));
  bias->add_option("--seed", ba->seed, "Bootstrap seed")->capture_default_str()->check(CLI::Validator([](std::string& s) { return unsigned_number_error(s); }, "UINT"));
  bias->add_option("--confidence", ba->confidence, "Confidence level of the intervals")->capture_default_str()->check(finite_number)->check(CLI::Range(0.5, 0.999999));
  bias->add_option("--warmup", ba->warmup, "Values used to estimate the CUSUM scale")->capture_default_str()->check(CLI::Range(2, 1 << 30));
  bias->add_option("--cusum-k", ba->cusum_k, "CUSUM allowance (sd units)")->capture_default_str()->check(finite_number);
  bias->add_option("--cusum-h", ba->cusum_h, "CUSUM threshold (sd units)")->capture_default_str()->check(finite_number);
  bias->callback([ba] {
    run_command([&] {
      for (const auto& f : ba->files) {
        const json j = bias_one(f, *ba);
        if (ba->json_out) std::cout << j.dump() << '\n';
        else print_bias_text(j);
      }
    });
  });
}

}  // namespace tiebreak::cli
