// SPDX-License-Identifier: Apache-2.0
/// @file The causal experiment (issue 19, docs/experiment.md): does biased rounding of the attention
/// output, together with repeated low-rank updates, make the spectral norm of W_Q grow, and does each
/// remedy remove the growth?
///
/// A small attention-only language model trains with AdamW on synthetic data; every attention call
/// goes through tiebreak's instrumented kernels (the H200 kernels, or their bit-identical host
/// twin), with an output mode per layer and head. Everything else (projections, RMSNorm, readout,
/// cross-entropy, AdamW) is f32 host arithmetic, the same in every cell, so the cells of the 2x2
/// ablation differ only in what the attention kernel rounds.
///
/// This is the training harness: its own target (tiebreak::experiment), used by the CLI's
/// `tiebreak experiment` and the tests; no library code includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tiebreak/attn/flash.hpp"

namespace tiebreak::experiment {

/// Synthetic data (docs/experiment.md, "Data").
enum class data_kind : std::uint8_t {
  lowrank,    ///< a few sink tokens repeated in every sequence + a short motif repeated: repeated maxima, low-rank updates
  isotropic,  ///< tokens uniform and independent over the whole vocabulary: the control
};
[[nodiscard]] const char* to_string(data_kind d) noexcept;
[[nodiscard]] bool parse_data_kind(const std::string& s, data_kind& out) noexcept;

/// Where the attention kernels run.
enum class device_kind : std::uint8_t { cpu, gpu };

/// The model, the optimiser and the run. Defaults are those of the `smoke` preset.
struct config {
  // model
  std::size_t vocab = 256;  ///< lowrank data use tokens 0..8 of it; isotropic data all of it (few repeats)
  std::size_t d_model = 64;
  std::size_t heads = 2;
  std::size_t head_dim = 64;  ///< 64 or 128 (the kernels' head dims)
  std::size_t layers = 1;
  std::size_t seq = 64;
  std::size_t batch = 2;
  bool causal = true;
  // optimiser (AdamW, decoupled weight decay)
  double lr = 3e-3;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double init_std = 0.02;  ///< N(0, init_std) for every weight matrix (embedding: N(0, 1))
  // attention kernels
  float debias_beta = 2.0f;
  attn::exp2_policy exp = attn::exp2_policy::software;  ///< the kernels' exponential (docs/attention.md)
  // the run
  std::size_t steps = 150;
  std::size_t log_every = 5;       ///< series entries at step 0, log_every, ... and the last step
  std::size_t ref_every = 0;       ///< reference loss every this many logged entries (0: every logged entry)
  double growth_threshold = 0.05;  ///< verdict "growth": log sigma_end(W_Q) above the fp32 pair's by more than this
  std::size_t checkpoint_every = 50;  ///< steps between checkpoints of a running cell (0: only at its end)

  /// Empty when the configuration can run; else one line saying what is wrong.
  [[nodiscard]] std::string validate() const;
  [[nodiscard]] nlohmann::json to_json() const;
  /// A hash of everything that changes results (checkpoints from another configuration are refused).
  [[nodiscard]] std::uint64_t fingerprint() const;
};

/// A named preset (`smoke`: the CI grid on the host twin; `full`: the device grid). False if unknown.
struct preset {
  config cfg;
  std::vector<attn::out_mode> modes;
  std::vector<data_kind> data;
  std::vector<std::uint64_t> seeds;
};
[[nodiscard]] bool find_preset(const std::string& name, preset& out);
[[nodiscard]] std::vector<std::string> preset_names();

/// Output mode of every head: modes[l * heads + h].
using head_modes = std::vector<attn::out_mode>;

/// One training run.
struct cell_spec {
  attn::out_mode mode = attn::out_mode::bf16;  ///< the cell's label (head_modes may differ per head: bisect)
  data_kind data = data_kind::lowrank;
  std::uint64_t seed = 1;
  head_modes modes;  ///< empty: `mode` everywhere
  std::string label; ///< "bf16/lowrank/seed1"; a bisect trial names its heads
};

/// The attention kernels of a run.
class attention_backend {
 public:
  virtual ~attention_backend() = default;
  /// attn::flash_args with HOST pointers (flash_check ok); counters a host table or null.
  virtual void forward(const attn::flash_args& a) = 0;
  virtual void backward(const attn::flash_args& a) = 0;
  [[nodiscard]] virtual std::string name() const = 0;
};
/// The host twin on one thread per call (cells run in parallel).
[[nodiscard]] std::unique_ptr<attention_backend> make_twin_backend();
/// The H200 kernels (copies in and out per call); throws std::runtime_error naming why not when
/// this build or machine has none.
[[nodiscard]] std::unique_ptr<attention_backend> make_gpu_backend();

/// Per logged step (column arrays; per-head arrays flattened l * heads + h).
struct series {
  std::vector<std::size_t> step;
  std::vector<double> loss, ref_loss;  ///< ref_loss NaN where not computed (ref_every)
  std::vector<std::vector<double>> sigma_wq, sigma_wk;            ///< [entry][layer]
  std::vector<std::vector<double>> sigma_wq_head, sigma_wk_head;  ///< [entry][l*H+h]
  std::vector<std::vector<double>> delta_error, delta_error_cum;  ///< [entry][l*H+h]
  std::vector<std::vector<double>> repeated_max_rows, p_one, output_error_mean_ulps;  ///< [entry][l*H+h]
  std::vector<std::vector<double>> o_nonfinite, max_score;  ///< [entry][l*H+h]: NaN/Inf elements of O; largest scaled score
  std::vector<std::vector<std::optional<double>>> update_cosine;  ///< [entry][layer]
};

/// The result of one cell.
struct cell_result {
  cell_spec spec;
  series s;
  double spectral_growth_rate = 0;  ///< max over layers of the least-squares slope of log sigma(W_Q) per step
  double growth_rate_se = 0;
  std::optional<double> excess_log_sigma;  ///< vs the fp32 cell of the same data and seed
  double final_loss = 0, final_ref_loss = 0;
  bool diverged = false;   ///< a non-finite loss or weight, or the last loss above log(vocab) + 1 (worse than guessing)
  std::size_t steps_run = 0;
  std::string verdict;     ///< growth | stable | diverged | reference
  double wall_seconds = 0;
  [[nodiscard]] double final_log_sigma_wq(std::size_t layer) const;
};

/// Progress lines (one per logged step of a cell); null: none.
using progress_fn = std::function<void(const std::string&)>;

/// What a run needs besides the configuration.
struct run_options {
  device_kind device = device_kind::cpu;
  unsigned threads = 0;            ///< cells in parallel (0: hardware threads)
  std::string checkpoint_dir;      ///< empty: no checkpoints; else resume from and write to it
  std::size_t stop_after_steps = 0;  ///< testing resume: stop every cell after this many steps of this
                                     ///< invocation (0: run to the end); the result is then partial
  progress_fn progress;
};

/// Trains one cell (resuming from its checkpoint when one matches).
[[nodiscard]] cell_result run_cell(const config& cfg, const cell_spec& spec, attention_backend& be,
                                   const run_options& ro);

/// The 2x2 grid (modes x data x seeds): runs every cell, pairs each with its fp32 cell and judges it.
struct grid_result {
  config cfg;
  std::vector<attn::out_mode> modes;
  std::vector<data_kind> data;
  std::vector<std::uint64_t> seeds;
  std::vector<cell_result> cells;
  bool complete = true;  ///< false when stop_after_steps cut the run short
};
[[nodiscard]] grid_result run_grid(const preset& p, const run_options& ro);
/// Fills excess_log_sigma and verdict of every cell from its fp32 pair (idempotent).
void judge(grid_result& g);

/// The JSON of docs/experiment.md (`kind` experiment_causal), with groups and the conclusion.
[[nodiscard]] nlohmann::json to_json(const grid_result& g, const std::string& preset_name, device_kind device);

/// Localisation (`tiebreak experiment bisect`): the smallest set of heads whose remedy removes the
/// growth, searched as the paper narrowed it by hand: first one layer at a time, then within the
/// smallest layer set, heads removed one at a time while the growth stays removed (a minimal set).
struct bisect_trial {
  std::vector<std::pair<std::size_t, std::size_t>> heads;  ///< (layer, head) remedied
  double excess_log_sigma = 0;
  bool growth = false;
};
struct bisect_result {
  double baseline_excess = 0;
  bool baseline_growth = false;
  std::vector<bisect_trial> trials;
  std::vector<std::pair<std::size_t, std::size_t>> heads;  ///< the result (empty: nothing to localise)
  std::string text;
};
/// The search, over a function that says, for a set of remedied heads, the excess log sigma of
/// the run (vs all heads remedied) — the harness passes training runs, the tests a synthetic one.
using trial_fn = std::function<double(const std::vector<std::pair<std::size_t, std::size_t>>&)>;
[[nodiscard]] bisect_result bisect_heads(std::size_t layers, std::size_t heads, double threshold, const trial_fn& trial);

struct bisect_spec {
  data_kind data = data_kind::lowrank;
  std::uint64_t seed = 1;
  attn::out_mode biased = attn::out_mode::bf16;
  attn::out_mode remedy = attn::out_mode::fp32;
};
[[nodiscard]] nlohmann::json run_bisect(const preset& p, const bisect_spec& b, const run_options& ro,
                                        const std::string& preset_name);

}  // namespace tiebreak::experiment
