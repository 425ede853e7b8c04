// SPDX-License-Identifier: Apache-2.0
// The causal experiment's harness: the model's gradients against finite differences, the data,
// checkpoints and resume (bit-identical), the bisect search, and the CLI's answers to bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "model.hpp"
#include "run_cli.hpp"
#include "tiebreak/experiment/causal.hpp"

namespace ex = tiebreak::experiment;
namespace fs = std::filesystem;
using tiebreak::attn::out_mode;

namespace {

/// Training steps of the tests' runs: 4, and 2 at the smoke level (the sanitizer build, where one
/// call of the twin costs about a second).
constexpr std::size_t kSteps = TIEBREAK_TEST_LEVEL_SMOKE ? 2 : 4;
const std::string kStepsText = std::to_string(kSteps);

/// A model small enough for the sanitizer build: one sequence of 32 tokens, two heads.
ex::config small() {
  ex::config c;
  c.vocab = 16;
  c.d_model = 32;
  c.heads = 2;
  c.seq = 32;
  c.batch = 1;
  c.steps = kSteps;
  c.log_every = 2;
  c.checkpoint_every = kSteps / 2;
  return c;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("tiebreak_experiment_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

// The backward pass through the kernels (mode fp32) against central differences of the reference
// loss (the same model, attention in f32): equal up to the bf16 rounding of Q, K, V, dO and the
// gradients inside the kernels (a few per mille), far below what a wrong sign, transpose or
// missing term gives (order one).
TEST(Experiment, GradientsMatchFiniteDifferences) {
  ex::config c = small();
  c.init_std = 0.3;  // scores of order one, so the attention's own gradient matters
  const auto w = ex::detail::init_weights(c, 7);
  const auto tokens = ex::detail::make_batch(c, ex::data_kind::isotropic, 7, 0);
  auto be = ex::make_twin_backend();
  ex::detail::weights g;
  const ex::head_modes modes(c.layers * c.heads, out_mode::fp32);
  const auto st = ex::detail::train_step(c, w, tokens, modes, 1, *be, g);
  EXPECT_NEAR(st.loss, ex::detail::reference_loss(c, w, tokens), 2e-3);

  auto wa = w;
  const auto params = wa.all();
  const auto grads = g.all();
  int checked = 0;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const double rms = std::sqrt(grads[k]->squaredNorm() / static_cast<double>(grads[k]->size()));
    ASSERT_GT(rms, 0) << "matrix " << k << " has no gradient";
    // the three largest gradient entries of each matrix
    std::vector<Eigen::Index> idx(static_cast<std::size_t>(grads[k]->size()));
    for (Eigen::Index i = 0; i < grads[k]->size(); ++i) idx[static_cast<std::size_t>(i)] = i;
    std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](auto a, auto b) {
      return std::abs(grads[k]->data()[a]) > std::abs(grads[k]->data()[b]);
    });
    for (int t = 0; t < 3; ++t) {
      const Eigen::Index i = idx[static_cast<std::size_t>(t)];
      float& x = params[k]->data()[i];
      const float x0 = x;
      const float h = 1e-2f * std::max(1.0f, std::abs(x0));
      x = x0 + h;
      const double lp = ex::detail::reference_loss(c, wa, tokens);
      x = x0 - h;
      const double lm = ex::detail::reference_loss(c, wa, tokens);
      x = x0;
      const double fd = (lp - lm) / (2.0 * static_cast<double>(h));
      const double an = grads[k]->data()[i];
      EXPECT_NEAR(an, fd, 0.03 * std::abs(fd) + 0.02 * rms) << "matrix " << k << " element " << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * static_cast<int>(params.size()));
}

// Mode bf16 against fp32 on the same weights: the probes see what the mechanism needs (rounded O,
// a non-zero delta error), fp32 none, and the losses agree to the rounding.
TEST(Experiment, ModesDifferOnlyByTheRoundingOfO) {
  const ex::config c = small();
  const auto w = ex::detail::init_weights(c, 3);
  const auto tokens = ex::detail::make_batch(c, ex::data_kind::lowrank, 3, 0);
  auto be = ex::make_twin_backend();
  ex::detail::weights g1, g2;
  const auto b = ex::detail::train_step(c, w, tokens, ex::head_modes(2, out_mode::bf16), 1, *be, g1);
  const auto f = ex::detail::train_step(c, w, tokens, ex::head_modes(2, out_mode::fp32), 1, *be, g2);
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(f.delta_error[h], 0.0);
    EXPECT_NE(b.delta_error[h], 0.0);
    EXPECT_EQ(f.output_error_mean[h], 0.0);
    EXPECT_GT(b.repeated_max_rows[h], 0);  // the sink token recurs: equal keys, repeated maxima
    EXPECT_EQ(b.repeated_max_rows[h], f.repeated_max_rows[h]);
  }
  EXPECT_NEAR(b.loss, f.loss, 1e-3);
  EXPECT_NE(b.loss, f.loss);
}

// The SFU's exponential (config::exp): the same step to within rounding, other bits; its own
// fingerprint, while the software one keeps the fingerprint configurations had before `exp`.
TEST(Experiment, SfuExponentialIsAnotherRoundingOfTheSameStep) {
  ex::config c = small();
  const auto w = ex::detail::init_weights(c, 3);
  const auto tokens = ex::detail::make_batch(c, ex::data_kind::lowrank, 3, 0);
  auto be = ex::make_twin_backend();
  ex::detail::weights g1, g2;
  const auto sw = ex::detail::train_step(c, w, tokens, ex::head_modes(2, out_mode::bf16), 1, *be, g1);
  ex::config cs = c;
  cs.exp = tiebreak::attn::exp2_policy::sfu;
  const auto sfu = ex::detail::train_step(cs, w, tokens, ex::head_modes(2, out_mode::bf16), 1, *be, g2);
  EXPECT_NEAR(sw.loss, sfu.loss, 1e-3);
  bool differ = sw.loss != sfu.loss;
  for (int h = 0; h < 2; ++h) {
    differ = differ || sw.delta_error[h] != sfu.delta_error[h];
    EXPECT_EQ(sw.repeated_max_rows[h], sfu.repeated_max_rows[h]);
  }
  EXPECT_TRUE(differ) << "the two exponentials gave the same step";
  EXPECT_EQ(c.to_json()["exp"], "software");
  EXPECT_EQ(cs.to_json()["exp"], "sfu");
  EXPECT_NE(c.fingerprint(), cs.fingerprint());
  // The smoke preset's fingerprint as it was before `exp` (commit ae63737): its checkpoints resume.
  ex::preset smoke;
  ASSERT_TRUE(ex::find_preset("smoke", smoke));
  EXPECT_EQ(smoke.cfg.fingerprint(), 0x624dc0a18bcacbc7ull) << std::hex << smoke.cfg.fingerprint();
}

TEST(Experiment, DataIsAFunctionOfSeedAndStep) {
  const ex::config c = small();
  EXPECT_EQ(ex::detail::make_batch(c, ex::data_kind::lowrank, 1, 5), ex::detail::make_batch(c, ex::data_kind::lowrank, 1, 5));
  EXPECT_NE(ex::detail::make_batch(c, ex::data_kind::isotropic, 1, 5), ex::detail::make_batch(c, ex::data_kind::isotropic, 1, 6));
  const auto lr = ex::detail::make_batch(c, ex::data_kind::lowrank, 1, 0);
  const std::set<std::uint32_t> distinct(lr.begin(), lr.end());
  EXPECT_LE(distinct.size(), 4u);  // the sink and a 3-token motif
  for (std::size_t s = 0; s < c.seq; s += 4) EXPECT_EQ(lr[s], 0u);
  const auto iso = ex::detail::make_batch(c, ex::data_kind::isotropic, 1, 0);
  EXPECT_GT(std::set<std::uint32_t>(iso.begin(), iso.end()).size(), 8u);
}

// An interrupted run resumed from its checkpoints gives the same bits as one that ran through,
// whatever the number of threads; every cell is judged against its fp32 pair. (One test: the runs
// are the expensive part, under the sanitizers most of all.)
TEST(Experiment, ResumeIsBitIdenticalAndCellsArePaired) {
  ex::preset p{small(), {out_mode::bf16, out_mode::fp32}, {ex::data_kind::lowrank}, {1}};
  ex::run_options ro;
  ro.threads = 1;
  ex::grid_result straight = ex::run_grid(p, ro);
  ASSERT_TRUE(straight.complete);
  {
    ex::grid_result& g = straight;
    ASSERT_EQ(g.cells.size(), 2u);
    const ex::cell_result& b = g.cells[0];
    const ex::cell_result& f = g.cells[1];
    EXPECT_EQ(f.verdict, "reference");
    ASSERT_TRUE(b.excess_log_sigma.has_value());
    EXPECT_DOUBLE_EQ(*b.excess_log_sigma, b.final_log_sigma_wq(0) - f.final_log_sigma_wq(0));
    const double keep = g.cfg.growth_threshold;
    g.cfg.growth_threshold = *b.excess_log_sigma - 1e-12;  // the threshold decides the verdict
    ex::judge(g);
    EXPECT_EQ(g.cells[0].verdict, "growth");
    g.cfg.growth_threshold = std::abs(*b.excess_log_sigma) + 1e-12;
    ex::judge(g);
    EXPECT_EQ(g.cells[0].verdict, "stable");
    g.cfg.growth_threshold = keep;
    ex::judge(g);
  }

  const fs::path dir = fresh_dir("resume");
  ex::run_options cut;
  cut.threads = 2;
  cut.checkpoint_dir = dir.string();
  cut.stop_after_steps = kSteps / 2;
  const ex::grid_result first = ex::run_grid(p, cut);
  EXPECT_FALSE(first.complete);
  EXPECT_EQ(first.cells[0].steps_run, kSteps / 2);
  cut.stop_after_steps = 0;
  const ex::grid_result resumed = ex::run_grid(p, cut);
  ASSERT_TRUE(resumed.complete);
  const auto a = ex::to_json(straight, "t", ex::device_kind::cpu), b = ex::to_json(resumed, "t", ex::device_kind::cpu);
  ASSERT_EQ(a["cells"].size(), b["cells"].size());
  for (std::size_t i = 0; i < a["cells"].size(); ++i) {
    EXPECT_EQ(a["cells"][i]["series"], b["cells"][i]["series"]) << i;
    EXPECT_EQ(a["cells"][i]["spectral_growth_rate"], b["cells"][i]["spectral_growth_rate"]);
  }
  EXPECT_EQ(a["conclusion"], b["conclusion"]);

  // A checkpoint of another configuration is refused, not silently restarted over.
  p.cfg.lr *= 2;
  EXPECT_THROW((void)ex::run_grid(p, cut), std::runtime_error);
  // A damaged checkpoint is refused with a message naming it.
  p.cfg.lr /= 2;
  for (const auto& e : fs::directory_iterator(dir)) std::ofstream(e.path(), std::ios::trunc) << "not cbor";
  try {
    (void)ex::run_grid(p, cut);
    ADD_FAILURE() << "a damaged checkpoint was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("damaged"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// The search over a synthetic response: growth unless the culprit heads are remedied.
TEST(Experiment, BisectFindsAMinimalHeadSet) {
  using head_set = std::vector<std::pair<std::size_t, std::size_t>>;
  auto has = [](const head_set& s, std::size_t l, std::size_t h) {
    return std::find(s.begin(), s.end(), std::make_pair(l, h)) != s.end();
  };
  // one culprit: layer 1, head 2
  int calls = 0;
  auto one = ex::bisect_heads(3, 4, 0.05, [&](const head_set& s) { ++calls; return has(s, 1, 2) ? 0.0 : 0.2; });
  EXPECT_TRUE(one.baseline_growth);
  EXPECT_EQ(one.heads, (head_set{{1, 2}}));
  EXPECT_EQ(static_cast<std::size_t>(calls), one.trials.size() + 1);
  // two culprits in layer 0: both needed
  auto two = ex::bisect_heads(2, 4, 0.05, [&](const head_set& s) { return has(s, 0, 1) && has(s, 0, 3) ? 0.01 : 0.3; });
  EXPECT_EQ(two.heads, (head_set{{0, 1}, {0, 3}}));
  // culprits in two layers: no single layer suffices, the search starts from every head
  auto spread = ex::bisect_heads(2, 2, 0.05, [&](const head_set& s) { return has(s, 0, 0) && has(s, 1, 1) ? 0.0 : 0.3; });
  EXPECT_EQ(spread.heads, (head_set{{0, 0}, {1, 1}}));
  // a diverged trial (NaN) counts as growth
  auto nan = ex::bisect_heads(1, 2, 0.05, [&](const head_set& s) { return has(s, 0, 0) ? 0.0 : std::nan(""); });
  EXPECT_EQ(nan.heads, (head_set{{0, 0}}));
  // nothing to localise
  auto none = ex::bisect_heads(2, 2, 0.05, [](const head_set&) { return 0.01; });
  EXPECT_FALSE(none.baseline_growth);
  EXPECT_TRUE(none.heads.empty());
  EXPECT_NE(none.text.find("no growth"), std::string::npos);
}

TEST(Experiment, ConfigurationErrors) {
  ex::config c = small();
  EXPECT_EQ(c.validate(), "");
  c.head_dim = 96;
  EXPECT_NE(c.validate().find("head_dim"), std::string::npos);
  c = small();
  c.lr = std::nan("");
  EXPECT_NE(c.validate(), "");
  c = small();
  c.steps = 1;
  EXPECT_NE(c.validate(), "");
  ex::preset p;
  EXPECT_TRUE(ex::find_preset("smoke", p));
  EXPECT_FALSE(ex::find_preset("nonesuch", p));
  EXPECT_EQ(p.cfg.validate(), "");
}

// --- the command line ------------------------------------------------------------------------------

TEST(ExperimentCli, TinyGridAndBisectEndToEnd) {
  const fs::path dir = fresh_dir("cli");
  const std::string out = (dir / "t.json").string();
  auto r = tiebreak::test::run_cli({"experiment", "causal", "--preset", "tiny", "--steps", kStepsText, "--data", "lowrank", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("step " + std::to_string(kSteps - 1) + "/" + kStepsText), std::string::npos) << r.err;  // progress
  EXPECT_NE(r.out.find("bf16"), std::string::npos);
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["kind"], "experiment_causal");
  EXPECT_EQ(j["cells"].size(), 2u);
  EXPECT_TRUE(fs::is_directory(out + ".ckpt"));
  EXPECT_NE(j["command_line"].get<std::string>().find("experiment causal"), std::string::npos);

  const std::string bo = (dir / "b.json").string();
  r = tiebreak::test::run_cli({"experiment", "bisect", "--preset", "tiny", "--steps", kStepsText, "-q", "-o", bo});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream bf(bo);
  const auto b = nlohmann::json::parse(bf);
  EXPECT_EQ(b["kind"], "experiment_bisect");
  EXPECT_TRUE(b["result"]["text"].is_string());
  EXPECT_GE(b["runs"].size(), 2u);  // the all-remedied reference and the unremedied baseline at least
  fs::remove_all(dir);
}

TEST(ExperimentCli, BadInputExitsTwoWithOneLine) {
  const fs::path dir = fresh_dir("bad");
  const std::string out = (dir / "x.json").string();
  struct bad {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<bad> cases = {
      {{"experiment", "causal", "--preset", "nonesuch", "-o", out}, "unknown preset"},
      {{"experiment", "causal", "--modes", "bf8", "-o", out}, "unknown mode"},
      {{"experiment", "causal", "--data", "gaussian", "-o", out}, "unknown data"},
      {{"experiment", "causal", "-o", (dir / "no" / "x.json").string()}, "does not exist"},
      {{"experiment", "bisect", "--remedy", "bf16", "-o", out}, "--remedy"},
      {{"experiment", "causal", "--exp", "mufu", "-o", out}, "unknown exponential 'mufu'"},
  };
  for (const bad& b : cases) {
    const auto r = tiebreak::test::run_cli(b.args);
    EXPECT_EQ(r.exit_code, 2) << b.says << ": " << r.err;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
  }
  // --device gpu where no kernels run: a clear error, not a crash
  const auto r = tiebreak::test::run_cli({"experiment", "causal", "--preset", "tiny", "--device", "gpu", "-q", "-o", out});
  if (r.exit_code != 0) {
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--device gpu"), std::string::npos) << r.err;
  }
  fs::remove_all(dir);
}

// On the H200: the experiment through the kernels gives the same bits as through the host twin
// (the kernels are bit-identical to it), so a cell's whole series — losses, spectral norms, delta
// errors, counters — agree exactly. Skips where no GPU runs the kernels.
TEST(ExperimentGpu, KernelsAndTwinGiveTheSameRun) {
  try {
    (void)ex::make_gpu_backend();
  } catch (const std::runtime_error& e) {
    GTEST_SKIP() << e.what();
  }
  ex::config c = small();
  c.seq = 80;  // a partial second key tile
  ex::preset p{c, {out_mode::bf16, out_mode::fp32, out_mode::debias, out_mode::stochastic}, {ex::data_kind::lowrank}, {4}};
  ex::run_options cpu, gpu;
  gpu.device = ex::device_kind::gpu;
  const auto a = ex::to_json(ex::run_grid(p, cpu), "t", ex::device_kind::cpu);
  const auto b = ex::to_json(ex::run_grid(p, gpu), "t", ex::device_kind::gpu);
  ASSERT_EQ(a["cells"].size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(a["cells"][i]["series"], b["cells"][i]["series"]) << a["cells"][i]["label"];
}
