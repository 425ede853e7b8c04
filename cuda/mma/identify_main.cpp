// SPDX-License-Identifier: Apache-2.0
/// @file tiebreak_mma_identify: finds each tensor-core instruction's arithmetic on the device.
///
/// Per instruction: (1) a layout self-test (exact small-integer tiles; for wgmma it also picks the
/// descriptor variant), (2) the designed cases of emu::mma_identify_cases run on the hardware and fed
/// to the hypothesis elimination, each case printing the parameter values it rules out, (3) random
/// tiles for further elimination, (4) validation of the surviving parameter sets against the
/// hardware on >= --cases random and adversarial elements (model evaluated on the device),
/// (4b) the same validation with the model evaluated on the host (all cores): the hardware runs the
/// tiles, tiebreak's host emulator predicts them; (5) bit-identity of emu::gemm with the CUDA GEMM
/// kernel, (6) a table row for mma.hpp.
/// Needs only the core headers, the header-only tiebreak/host/mma_identify.hpp and the CUDA runtime
/// (no Boost, no GoogleTest).
///
/// Usage: tiebreak_mma_identify [--instr NAME|all] [--cases N] [--budget-s S] [--seed S] [--out DIR]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tiebreak/emu/mma.hpp"
#include "tiebreak/host/emu_gemm.hpp"
#include "tiebreak/emu/mma_gen.hpp"
#include "tiebreak/host/mma_identify.hpp"
#include "tiebreak/gpu/mma.hpp"

namespace {

using namespace tiebreak;
using namespace tiebreak::emu;

struct options {
  std::string instr = "all";
  std::uint64_t cases = 100000000;
  double budget_s = 240;  // validation time for all instructions together
  std::uint64_t seed = 20260101;
  std::string out = ".";
};

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
std::string val(const format_desc& f, std::uint64_t bits) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", to_double(f, bits));
  return b;
}

/// Puts each case in its own tile: every row of A is case.a, every column of B is case.b, C all c.
void pack_cases(const mma_model& s, const std::vector<mma_case>& cs, std::vector<std::uint32_t>& A,
                std::vector<std::uint32_t>& B, std::vector<std::uint32_t>& C) {
  const std::size_t ta = static_cast<std::size_t>(s.m) * s.k, tb = static_cast<std::size_t>(s.k) * s.n,
                    tc = static_cast<std::size_t>(s.m) * s.n;
  A.assign(cs.size() * ta, 0);
  B.assign(cs.size() * tb, 0);
  C.assign(cs.size() * tc, 0);
  for (std::size_t t = 0; t < cs.size(); ++t) {
    for (int r = 0; r < s.m; ++r)
      for (int i = 0; i < s.k; ++i) A[t * ta + static_cast<std::size_t>(r) * s.k + i] = static_cast<std::uint32_t>(cs[t].a[i]);
    for (int i = 0; i < s.k; ++i)
      for (int c = 0; c < s.n; ++c) B[t * tb + static_cast<std::size_t>(i) * s.n + c] = static_cast<std::uint32_t>(cs[t].b[i]);
    for (std::size_t e = 0; e < tc; ++e) C[t * tc + e] = static_cast<std::uint32_t>(cs[t].c);
  }
}

/// The case of output (row, col) of a tile.
mma_case tile_case(const mma_model& s, const std::uint32_t* A, const std::uint32_t* B, const std::uint32_t* C, int row,
                   int col) {
  mma_case cs;
  cs.family = "random";
  cs.c = C[row * s.n + col];
  for (int i = 0; i < s.k; ++i) {
    cs.a.push_back(A[row * s.k + i]);
    cs.b.push_back(B[i * s.n + col]);
  }
  return cs;
}

/// Layout self-test: exact small values; D must equal the exact sum. Returns the number of wrong
/// elements.
std::size_t layout_test(mma_instr id, std::ostream& log) {
  const mma_model& s = mma_entry(id).model;
  const int tiles = 8;
  std::vector<std::uint32_t> A(static_cast<std::size_t>(tiles) * s.m * s.k), B(static_cast<std::size_t>(tiles) * s.k * s.n),
      C(static_cast<std::size_t>(tiles) * s.m * s.n), D(C.size());
  const double vals[] = {0, 1, -1, 2, -2, 0.5, -0.5, 1.5};
  std::uint64_t r = 12345;
  std::vector<double> av(A.size()), bv(B.size()), cv(C.size());
  const auto enc = [](const format_desc& f, double x) {
    return static_cast<std::uint32_t>(f64_bits_to(f, f64_to_bits(x), rounding{round_mode::rne, 0}).bits);
  };
  for (std::size_t i = 0; i < A.size(); ++i) { r = splitmix64(r); av[i] = vals[r % 8]; A[i] = enc(s.a_fmt, av[i]); }
  for (std::size_t i = 0; i < B.size(); ++i) { r = splitmix64(r); bv[i] = vals[r % 8]; B[i] = enc(s.b_fmt, bv[i]); }
  for (std::size_t i = 0; i < C.size(); ++i) { r = splitmix64(r); cv[i] = static_cast<double>(static_cast<int>(r % 9) - 4); C[i] = enc(s.c_fmt, cv[i]); }
  gpu::mma_run_tiles(id, static_cast<std::size_t>(tiles), A.data(), B.data(), C.data(), D.data());
  std::size_t bad = 0;
  for (int t = 0; t < tiles; ++t)
    for (int row = 0; row < s.m; ++row)
      for (int col = 0; col < s.n; ++col) {
        double e = cv[(static_cast<std::size_t>(t) * s.m + row) * s.n + col];
        for (int i = 0; i < s.k; ++i)
          e += av[(static_cast<std::size_t>(t) * s.m + row) * s.k + i] * bv[(static_cast<std::size_t>(t) * s.k + i) * s.n + col];
        const std::uint32_t want = enc(s.c_fmt, e);
        const std::uint32_t got = D[(static_cast<std::size_t>(t) * s.m + row) * s.n + col];
        if (want != got) {
          if (bad < 4) log << "  layout mismatch tile " << t << " (" << row << "," << col << "): hw " << hex(got) << " want " << hex(want) << "\n";
          ++bad;
        }
      }
  return bad;
}

struct instr_summary {
  std::string name;
  std::string layout = "not run";
  std::size_t designed = 0, random_cases = 0, survivors = 0;
  std::size_t table_designed_wrong = 0, table_random_wrong = 0;
  std::string params;          ///< "group=16 align_bits=25 ..." with undecided ones as {a,b}
  std::uint64_t val_cases = 0;
  std::string val_result = "not run";
  std::string gemm = "not run";
  std::string table_val = "not run";  ///< validation of the table row (candidate 0)
  std::string host_val = "not run";   ///< the table row evaluated on the host vs the hardware
  std::string row;
};

/// Runs fn(i) for i in [0, n) on every hardware thread (contiguous chunks).
template <class F>
void parallel_for(std::size_t n, F&& fn) {
  const std::size_t nt = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> ts;
  for (std::size_t w = 0; w < nt; ++w)
    ts.emplace_back([&, w] {
      for (std::size_t i = n * w / nt; i < n * (w + 1) / nt; ++i) fn(i);
    });
  for (auto& t : ts) t.join();
}

struct host_validation {
  std::uint64_t cases = 0, tiles = 0, mismatches = 0;
  double seconds = 0;
  std::vector<std::string> first;  ///< the first mismatches, with their inputs
};

/// Validation with the model on the host: tiles of emu::mma_gen_element (the device validation's
/// generator and tile numbering), run on the hardware by the probe kernel, each output element
/// predicted by emu::mma_dot on the host. Stops after `min_cases` elements or `budget_s` seconds.
host_validation validate_on_host(mma_instr id, const mma_model& model, std::uint64_t min_cases, std::uint64_t seed,
                                 double budget_s) {
  const mma_model& shape = mma_entry(id).model;
  const std::size_t M = shape.m, N = shape.n, K = shape.k, ta = M * K, tb = K * N, tc = M * N;
  const std::uint64_t want_tiles = (min_cases + tc - 1) / tc;
  const std::size_t batch = std::size_t{1} << 15;
  std::vector<std::uint32_t> A(batch * ta), B(batch * tb), C(batch * tc), D(batch * tc);
  host_validation hv;
  std::vector<std::uint64_t> bad(batch);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t first = 0; first < want_tiles; first += batch) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > budget_s) break;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, want_tiles - first));
    parallel_for(n, [&](std::size_t t) { mma_gen_tile(shape, seed, first + t, &A[t * ta], &B[t * tb], &C[t * tc]); });
    gpu::mma_run_tiles(id, n, A.data(), B.data(), C.data(), D.data());
    parallel_for(n, [&](std::size_t t) {
      std::uint64_t b = 0;
      for (std::size_t i = 0; i < tc; ++i) {
        const std::size_t row = i / N, col = i % N;
        const auto r = mma_dot(model, C[t * tc + i], &A[t * ta + row * K], 1, &B[t * tb + col], static_cast<int>(N));
        b += static_cast<std::uint32_t>(r.bits) != D[t * tc + i];
      }
      bad[t] = b;
    });
    for (std::size_t t = 0; t < n; ++t) {
      hv.mismatches += bad[t];
      if (bad[t] == 0 || hv.first.size() >= 16) continue;
      for (std::size_t i = 0; i < tc && hv.first.size() < 16; ++i) {
        const std::size_t row = i / N, col = i % N;
        const auto r = mma_dot(model, C[t * tc + i], &A[t * ta + row * K], 1, &B[t * tb + col], static_cast<int>(N));
        if (static_cast<std::uint32_t>(r.bits) == D[t * tc + i]) continue;
        std::ostringstream line;
        line << "  host-validation mismatch: tile " << first + t << " (" << row << "," << col << ") hw " << hex(D[t * tc + i])
             << " model(host) " << hex(r.bits) << " c=" << hex(C[t * tc + i]) << " a=";
        for (std::size_t k = 0; k < K; ++k) line << hex(A[t * ta + row * K + k]) << ",";
        line << " b=";
        for (std::size_t k = 0; k < K; ++k) line << hex(B[t * tb + k * N + col]) << ",";
        hv.first.push_back(line.str());
      }
    }
    hv.tiles += n;
    hv.cases += static_cast<std::uint64_t>(n) * tc;
  }
  hv.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return hv;
}

instr_summary identify(mma_instr id, const options& opt, double budget_s, std::ostream& log) {
  instr_summary sum;
  const mma_model& shape = mma_entry(id).model;
  sum.name = std::string(mma_instr_name(id));
  std::printf("\n=== %s  (%s)\n", sum.name.c_str(), std::string(mma_entry(id).ptx).c_str());
  log << "\n=== " << sum.name << "\n";
  if (!gpu::mma_available(id)) {
    sum.layout = "unavailable";
    std::printf("  not available on this device\n");
    return sum;
  }
  // (1) Layout self-test (wgmma: descriptor variant 0, then 1).
  std::size_t bad = layout_test(id, log);
  if (bad != 0 && is_wgmma(id)) {
    log << "  descriptor variant 0 wrong (" << bad << " elements); trying variant 1\n";
    gpu::mma_set_wgmma_desc_variant(1 - gpu::mma_wgmma_desc_variant());
    bad = layout_test(id, log);
    if (bad != 0) gpu::mma_set_wgmma_desc_variant(1 - gpu::mma_wgmma_desc_variant());
  }
  sum.layout = bad == 0 ? (is_wgmma(id) ? "ok (desc variant " + std::to_string(gpu::mma_wgmma_desc_variant()) + ")" : std::string("ok"))
                        : "FAILED (" + std::to_string(bad) + " wrong elements)";
  std::printf("  layout self-test: %s\n", sum.layout.c_str());
  if (bad != 0) return sum;

  // (2) Designed cases.
  const std::vector<mma_case> cases = mma_identify_cases(shape);
  std::vector<std::uint32_t> A, B, C, D;
  pack_cases(shape, cases, A, B, C);
  D.assign(C.size(), 0);
  gpu::mma_run_tiles(id, cases.size(), A.data(), B.data(), C.data(), D.data());
  const std::size_t tc = static_cast<std::size_t>(shape.m) * shape.n;
  const std::vector<mma_hyp> grid = mma_hypotheses(shape);
  mma_eliminator el(shape, grid, 2);
  std::printf("  %zu hypotheses, %zu designed cases\n", grid.size(), cases.size());
  // Per case: which single-parameter changes of the table row (its neighbours in the grid) it rules
  // out. The whole grid is eliminated below in one batch: feeding 2.7 M FP8 hypotheses case by case
  // would cost minutes.
  const mma_hyp row = mma_hyp_of(mma_entry(id).model);
  std::vector<std::pair<int, mma_hyp>> neighbours;
  for (const mma_hyp& h : grid) {
    int diff = -1, nd = 0;
    for (int bit = 0; bit < mma_param_count; ++bit)
      if (mma_hyp_value(h, bit) != mma_hyp_value(row, bit)) { diff = bit; ++nd; }
    if (nd == 1) neighbours.emplace_back(diff, h);
  }
  std::vector<bool> neighbour_out(neighbours.size(), false);
  for (std::size_t t = 0; t < cases.size(); ++t) {
    const std::uint64_t hw = D[t * tc];
    bool uniform = true;
    for (std::size_t e = 1; e < tc; ++e) uniform = uniform && D[t * tc + e] == hw;
    std::vector<std::string> ruled;
    for (std::size_t q = 0; q < neighbours.size(); ++q) {
      if (neighbour_out[q]) continue;
      const mma_model nm = mma_apply(shape, neighbours[q].second);
      if (mma_dot(nm, cases[t].c, cases[t].a.data(), 1, cases[t].b.data(), 1).bits != hw) {
        neighbour_out[q] = true;
        ruled.push_back(std::string(mma_param_name(neighbours[q].first)) + "=" + mma_hyp_value(neighbours[q].second, neighbours[q].first));
      }
    }
    const std::uint64_t pred = mma_dot(mma_entry(id).model, cases[t].c, cases[t].a.data(), 1, cases[t].b.data(), 1).bits;
    std::ostringstream line;
    line << "  case " << t << " [" << cases[t].family << "] " << cases[t].what << ": hw " << hex(hw) << " = "
         << val(shape.c_fmt, hw) << (uniform ? "" : " (OUTPUTS OF THE TILE DIFFER)")
         << (pred == hw ? "; table row ok" : "; TABLE ROW WRONG (" + hex(pred) + ")");
    if (!ruled.empty()) {
      line << "; rules out (table row, one change)";
      for (const std::string& r : ruled) line << " " << r;
    }
    log << line.str() << "\n";
    if (!ruled.empty() || !uniform || pred != hw) std::printf("%s\n", line.str().c_str());
  }
  {
    // The whole grid, all designed cases at once, interleaved so that a wrong hypothesis meets a
    // case of every family early (it is dropped after 3 wrong predictions).
    std::vector<mma_case> mixed;
    std::vector<std::uint64_t> mixed_hw;
    std::size_t stride = 97;
    while (std::gcd(stride, cases.size()) != 1) ++stride;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::size_t t = (i * stride) % cases.size();
      mixed.push_back(cases[t]);
      mixed_hw.push_back(D[t * tc]);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto st = el.feed_batch(mixed, mixed_hw);
    std::printf("  grid elimination on the designed cases: consistent %zu -> %zu (%.1f s)\n", st.consistent_before,
                st.consistent_after, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    log << "  grid elimination on the designed cases: consistent " << st.consistent_before << " -> " << st.consistent_after << "\n";
  }
  sum.designed = cases.size();
  // The default row of mma_models on the same cases (what the replay test checks on the recorded run).
  {
    const mma_model& tm = mma_entry(id).model;
    std::size_t wrong = 0;
    for (std::size_t t = 0; t < cases.size(); ++t) {
      const std::uint64_t pred = mma_dot(tm, cases[t].c, cases[t].a.data(), 1, cases[t].b.data(), 1).bits;
      wrong += pred != D[t * tc];  // each printed above with its case
    }
    std::printf("  table model (mma.hpp): %zu of %zu designed cases wrong\n", wrong, cases.size());
    log << "  table model: " << wrong << " of " << cases.size() << " designed cases wrong\n";
    sum.table_designed_wrong = wrong;
  }

  // (3) Random tiles (the generator of the validation), all outputs.
  const std::size_t rtiles = 32;
  const std::size_t ta = static_cast<std::size_t>(shape.m) * shape.k, tb = static_cast<std::size_t>(shape.k) * shape.n;
  A.assign(rtiles * ta, 0);
  B.assign(rtiles * tb, 0);
  C.assign(rtiles * tc, 0);
  D.assign(rtiles * tc, 0);
  for (std::size_t t = 0; t < rtiles; ++t) {
    for (int r = 0; r < shape.m; ++r)
      for (int i = 0; i < shape.k; ++i)
        A[t * ta + static_cast<std::size_t>(r) * shape.k + i] =
            static_cast<std::uint32_t>(mma_gen_element(shape, opt.seed + 1, t, mma_operand_kind::a, r, i));
    for (int i = 0; i < shape.k; ++i)
      for (int c = 0; c < shape.n; ++c)
        B[t * tb + static_cast<std::size_t>(i) * shape.n + c] =
            static_cast<std::uint32_t>(mma_gen_element(shape, opt.seed + 1, t, mma_operand_kind::b, i, c));
    for (int r = 0; r < shape.m; ++r)
      for (int c = 0; c < shape.n; ++c)
        C[t * tc + static_cast<std::size_t>(r) * shape.n + c] =
            static_cast<std::uint32_t>(mma_gen_element(shape, opt.seed + 1, t, mma_operand_kind::c, r, c));
  }
  gpu::mma_run_tiles(id, rtiles, A.data(), B.data(), C.data(), D.data());
  for (std::size_t t = 0; t < rtiles; ++t) {
    std::vector<mma_case> batch;
    std::vector<std::uint64_t> hw;
    for (int r = 0; r < shape.m; ++r)
      for (int c = 0; c < shape.n; ++c) {
        batch.push_back(tile_case(shape, &A[t * ta], &B[t * tb], &C[t * tc], r, c));
        hw.push_back(D[t * tc + static_cast<std::size_t>(r) * shape.n + c]);
      }
    const auto st = el.feed_batch(batch, hw);
    for (std::size_t e = 0; e < batch.size(); ++e) {
      const mma_model& tm = mma_entry(id).model;
      const std::uint64_t pred = mma_dot(tm, batch[e].c, batch[e].a.data(), 1, batch[e].b.data(), 1).bits;
      if (pred != hw[e] && ++sum.table_random_wrong <= 4) {
        std::ostringstream ml;
        ml << "  table model wrong on random tile " << t << " element " << e << ": hw " << hex(hw[e]) << " model " << hex(pred)
           << " c=" << hex(batch[e].c) << " a=";
        for (auto x : batch[e].a) ml << hex(x) << ",";
        ml << " b=";
        for (auto x : batch[e].b) ml << hex(x) << ",";
        log << ml.str() << "\n";
        std::printf("%s\n", ml.str().c_str());
      }
    }
    std::ostringstream line;
    line << "  random tile " << t << " (" << batch.size() << " elements, scenario "
         << static_cast<int>(mma_tile_scenario(opt.seed + 1, t)) << "): consistent " << st.consistent_before << " -> "
         << st.consistent_after;
    if (!st.ruled_out.empty()) {
      line << "; rules out";
      for (const std::string& r : st.ruled_out) line << " " << r;
    }
    log << line.str() << "\n";
    if (!st.ruled_out.empty()) std::printf("%s\n", line.str().c_str());
    sum.random_cases += batch.size();
  }

  std::printf("  table model (mma.hpp): %zu of %zu random elements wrong\n", sum.table_random_wrong, sum.random_cases);
  log << "  table model: " << sum.table_random_wrong << " of " << sum.random_cases << " random elements wrong\n";

  // (4) Survivors and validation.
  std::vector<mma_hyp> surv = el.survivors();
  sum.survivors = surv.size();
  bool exact_fit = !surv.empty();
  if (surv.empty()) {
    int fails = 0;
    surv = el.best(fails);
    std::printf("  NO hypothesis predicts every case; %zu come closest with %d wrong case(s)\n", surv.size(), fails);
  }
  if (surv.empty()) surv.push_back(mma_hyp_of(mma_entry(id).model));  // validate the table row anyway
  std::ostringstream ps;
  for (int bit = 0; bit < mma_param_count; ++bit) {
    std::vector<std::string> v;
    for (const mma_hyp& h : surv) {
      const std::string x = mma_hyp_value(h, bit);
      if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
    }
    ps << (bit ? " " : "") << mma_param_name(bit) << "=";
    if (v.size() == 1) ps << v[0];
    else {
      ps << "{";
      for (std::size_t i = 0; i < v.size(); ++i) ps << (i ? "," : "") << v[i];
      ps << "}";
    }
  }
  sum.params = ps.str();
  std::printf("  %s: %zu parameter set(s): %s\n", exact_fit ? "consistent" : "closest", surv.size(), sum.params.c_str());
  // Candidate 0: the table row of mma.hpp; then up to 3 other survivors spread over the list.
  std::vector<mma_model> cands{mma_entry(id).model};
  std::vector<std::size_t> pick;
  for (std::size_t q = 0; q < 4 && q < surv.size(); ++q) pick.push_back(q * (surv.size() - 1) / std::max<std::size_t>(1, std::min<std::size_t>(3, surv.size() - 1)));
  std::sort(pick.begin(), pick.end());
  pick.erase(std::unique(pick.begin(), pick.end()), pick.end());
  std::vector<std::size_t> cand_of_pick;  // index into cands of each pick (0 when it is the table row)
  for (std::size_t q : pick) {
    const mma_model mq = mma_apply(shape, surv[q]);
    if (mq == cands[0]) { cand_of_pick.push_back(0); continue; }
    if (cands.size() < 4) { cand_of_pick.push_back(cands.size()); cands.push_back(mq); }
    else cand_of_pick.push_back(~std::size_t{0});
  }
  const auto v = gpu::mma_validate(id, cands, opt.cases, opt.seed, budget_s);
  sum.val_cases = v.cases;
  std::ostringstream vr;
  int best = -1;
  for (std::size_t j = 0; j < cands.size(); ++j) {
    const mma_hyp h = mma_hyp_of(cands[j]);
    std::ostringstream hs;
    for (int bit = 0; bit < mma_param_count; ++bit) hs << (bit ? " " : "") << mma_param_name(bit) << "=" << mma_hyp_value(h, bit);
    std::printf("  validation of candidate %zu [%s]: %llu cases, %llu mismatches (%.1f s)\n", j, hs.str().c_str(),
                static_cast<unsigned long long>(v.cases), static_cast<unsigned long long>(v.mismatches[j]), v.seconds);
    log << "  validation candidate " << j << " [" << hs.str() << "]: " << v.cases << " cases, " << v.mismatches[j] << " mismatches\n";
    if (v.mismatches[j] == 0 && best < 0) best = static_cast<int>(j);
  }
  for (const auto& mm : v.first) {
    // Regenerate the inputs of the mismatching element on the host.
    mma_case cs;
    cs.c = mma_gen_element(shape, opt.seed, mm.tile, mma_operand_kind::c, mm.row, mm.col);
    for (int i = 0; i < shape.k; ++i) {
      cs.a.push_back(mma_gen_element(shape, opt.seed, mm.tile, mma_operand_kind::a, mm.row, i));
      cs.b.push_back(mma_gen_element(shape, opt.seed, mm.tile, mma_operand_kind::b, i, mm.col));
    }
    const auto host = mma_dot(cands[static_cast<std::size_t>(mm.model)], cs.c, cs.a.data(), 1, cs.b.data(), 1).bits;
    std::ostringstream line;
    line << "  mismatch: candidate " << mm.model << " tile " << mm.tile << " scenario "
         << static_cast<int>(mma_tile_scenario(opt.seed, mm.tile)) << " (" << mm.row << "," << mm.col << ") hw " << hex(mm.hw)
         << " model(device) " << hex(mm.predicted) << " model(host) " << hex(host) << " c=" << hex(cs.c) << " a=";
    for (auto x : cs.a) line << hex(x) << ",";
    line << " b=";
    for (auto x : cs.b) line << hex(x) << ",";
    log << line.str() << "\n";
  }
  if (!v.first.empty()) std::printf("  (first %zu mismatches with their inputs in the log)\n", v.first.size());
  sum.val_result = best < 0 ? "every candidate mismatches"
                            : std::to_string(v.cases) + " cases, 0 mismatches (candidate " + std::to_string(best) +
                                  (best == 0 ? ": the table row" : "") + ")";
  sum.table_val = std::to_string(v.cases) + " cases, " + std::to_string(v.mismatches[0]) + " mismatches";
  // (4b) The table row evaluated on the host, against the hardware.
  {
    const host_validation hv = validate_on_host(id, mma_entry(id).model, opt.cases, opt.seed, budget_s);
    std::printf("  host-evaluated validation of the table row: %llu cases (%llu tiles), %llu mismatches (%.1f s)\n",
                static_cast<unsigned long long>(hv.cases), static_cast<unsigned long long>(hv.tiles),
                static_cast<unsigned long long>(hv.mismatches), hv.seconds);
    log << "  host-evaluated validation of the table row: " << hv.cases << " cases, " << hv.mismatches << " mismatches\n";
    for (const auto& l : hv.first) log << l << "\n";
    if (!hv.first.empty()) std::printf("%s\n", hv.first.front().c_str());
    sum.host_val = std::to_string(hv.cases) + " cases, " + std::to_string(hv.mismatches) + " mismatches";
  }
  // The GEMM check runs with the validated candidate, or with the table row when none validated.
  const mma_model chosen = cands[static_cast<std::size_t>(best < 0 ? 0 : best)];
  // Parameters still undecided: those on which the survivors not refuted by validation differ.
  std::vector<mma_hyp> alive;
  for (std::size_t q = 0; q < surv.size(); ++q) {
    const auto it = std::find(pick.begin(), pick.end(), q);
    if (it != pick.end()) {
      const std::size_t ci = cand_of_pick[static_cast<std::size_t>(it - pick.begin())];
      if (ci < cands.size() && v.mismatches[ci] != 0) continue;
    }
    alive.push_back(surv[q]);
  }
  const std::uint32_t unknown = (exact_fit && best >= 0) ? mma_undecided(alive) : mma_param_all;

  // (5) GEMM bit-identity (device kernel vs emu::gemm with the chosen model).
  {
    const int M = shape.m * 4, N = 32, K = shape.k * 8;
    std::vector<std::uint32_t> GA(static_cast<std::size_t>(M) * K), GB(static_cast<std::size_t>(K) * N), GC(static_cast<std::size_t>(M) * N),
        GD(GC.size()), HD(GC.size());
    mma_gen_gemm(shape, opt.seed + 7, M, N, K, GA.data(), GB.data(), GC.data());
    gpu::mma_gemm(id, M, N, K, GA.data(), GB.data(), GC.data(), GD.data());
    gemm(chosen, M, N, K, GA.data(), GB.data(), GC.data(), HD.data());
    std::size_t diff = 0;
    for (std::size_t e = 0; e < GD.size(); ++e) diff += GD[e] != HD[e];
    // Host throughput of the emulated GEMM (one thread) on typical data.
    const int BM = 64, BN = 64, BK = shape.k * 32;
    std::vector<std::uint32_t> XA(static_cast<std::size_t>(BM) * BK), XB(static_cast<std::size_t>(BK) * BN), XC(static_cast<std::size_t>(BM) * BN), XD(XC.size());
    for (std::size_t e = 0; e < XA.size(); ++e) XA[e] = static_cast<std::uint32_t>(mma_gen_element(shape, 99, 0x1000 + e / 64 * 8, mma_operand_kind::a, 0, static_cast<int>(e % 64)));
    for (std::size_t e = 0; e < XB.size(); ++e) XB[e] = static_cast<std::uint32_t>(mma_gen_element(shape, 99, 0x1000 + e / 64 * 8, mma_operand_kind::b, static_cast<int>(e % 64), 0));
    for (std::size_t e = 0; e < XC.size(); ++e) XC[e] = static_cast<std::uint32_t>(mma_gen_element(shape, 99, 0x1000, mma_operand_kind::c, 0, static_cast<int>(e % 8)));
    const auto t0 = std::chrono::steady_clock::now();
    gemm(chosen, BM, BN, BK, XA.data(), XB.data(), XC.data(), XD.data());
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char b[256];
    std::snprintf(b, sizeof b, "%dx%dx%d: %zu of %zu elements differ; host emu::gemm %.2f GFLOP/s on one core (mixed scenarios)",
                  M, N, K, diff, GD.size(), 2.0 * BM * BN * BK / sec / 1e9);
    sum.gemm = b;
    std::printf("  gemm identity %s\n", b);
  }
  if (best < 0) return sum;
  std::ostringstream ev;
  ev << "identification + " << v.cases << " validation cases, 0 mismatches (" << gpu::mma_device_description() << ")";
  sum.row = mma_table_row(id, chosen, unknown, ev.str());
  std::printf("  table row:\n%s\n", sum.row.c_str());
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "tiebreak_mma_identify: %s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--instr") opt.instr = next();
    else if (a == "--cases") opt.cases = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--budget-s") opt.budget_s = std::atof(next().c_str());
    else if (a == "--seed") opt.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--out") opt.out = next();
    else {
      std::fprintf(stderr, "usage: tiebreak_mma_identify [--instr NAME|all] [--cases N] [--budget-s S] [--seed S] [--out DIR]\n");
      return 2;
    }
  }
  std::vector<mma_instr> todo;
  for (mma_instr i : all_mma_instrs)
    if (opt.instr == "all" || opt.instr == mma_instr_name(i)) todo.push_back(i);
  if (todo.empty()) { std::fprintf(stderr, "tiebreak_mma_identify: unknown instruction %s\n", opt.instr.c_str()); return 2; }
  std::printf("device: %s\n", gpu::mma_device_description().c_str());
  std::ofstream log(opt.out + "/mma-identify.log");
  std::vector<instr_summary> sums;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t n = 0; n < todo.size(); ++n) {
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double left = std::max(5.0, (opt.budget_s - spent) / static_cast<double>(todo.size() - n));
    try {
      sums.push_back(identify(todo[n], opt, left, log));
    } catch (const std::exception& e) {
      std::printf("  ERROR: %s\n", e.what());
      instr_summary s;
      s.name = std::string(mma_instr_name(todo[n]));
      s.layout = std::string("error: ") + e.what();
      sums.push_back(s);
    }
    log.flush();
    std::fflush(stdout);
  }
  std::ofstream md(opt.out + "/mma-summary.md");
  md << "| instruction | layout | designed cases | random cases | table row wrong (designed, random) | table row validation | "
        "table row validation (host-evaluated) | consistent sets | parameters | validation | gemm identity |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& s : sums)
    md << "| " << s.name << " | " << s.layout << " | " << s.designed << " | " << s.random_cases << " | " << s.table_designed_wrong
       << ", " << s.table_random_wrong << " | " << s.table_val << " | " << s.host_val << " | " << s.survivors << " | " << s.params << " | " << s.val_result
       << " | " << s.gemm << " |\n";
  std::ofstream rows(opt.out + "/mma-table.txt");
  for (const auto& s : sums) rows << (s.row.empty() ? "    // " + s.name + ": no validated model" : s.row) << "\n";
  std::printf("\nsummary written to %s/mma-summary.md, table rows to %s/mma-table.txt\n", opt.out.c_str(), opt.out.c_str());
  return 0;
}
