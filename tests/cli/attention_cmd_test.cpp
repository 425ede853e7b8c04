// SPDX-License-Identifier: Apache-2.0
/// @file Tests of `tiebreak attention` (src/cli/attention_cmd.cpp), run as a subprocess on the host twin:
/// the tensors and probe JSON it writes, their round trip through `tiebreak audit` and `--inputs`.
#ifdef TIEBREAK_HAVE_AUDIT

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "run_cli.hpp"
#include "tiebreak/io/safetensors.hpp"

namespace {

namespace fs = std::filesystem;
namespace io = tiebreak::io;
using nlohmann::json;
using testing::HasSubstr;
using tiebreak::test::lines_of;
using tiebreak::test::run_cli;

/// A fresh folder for one test, removed afterwards.
struct scratch {
  fs::path dir;
  explicit scratch(const std::string& tag)
      : dir(fs::temp_directory_path() / ("tiebreak_attention_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  [[nodiscard]] std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

json read_json(const std::string& p) {
  std::ifstream in(p);
  return json::parse(in);
}

/// A tensor's bytes, copied out of the mapping.
std::vector<std::byte> bytes_of(const io::safetensors_file& f, const std::string& name) {
  const io::st_tensor& t = f.tensors().at(name);
  return {t.data.begin(), t.data.end()};
}

void expect_tensor(const io::safetensors_file& f, const std::string& name, io::st_dtype dtype,
                   const std::vector<std::size_t>& shape) {
  ASSERT_TRUE(f.tensors().count(name)) << name;
  EXPECT_EQ(f.tensors().at(name).dtype, dtype) << name;
  EXPECT_EQ(f.tensors().at(name).shape, shape) << name;
}

// Causal, grouped-query (2 heads on 1 kv head), a ragged length (80: one full and one partial tile).
TEST(AttentionCmd, WritesTheTensorsAndTheProbeAndTheAuditReadsThemUnchanged) {
  const scratch s("roundtrip");
  const std::string out = s / "run.safetensors";
  const auto r = run_cli({"attention", "--mode", "bf16", "--emulate", "--causal", "--shape", "1,2,80,64", "--kv-heads", "1",
                          "--seed", "7", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).size(), 3u) << r.out;  // header + one line per head
  EXPECT_THAT(r.err, HasSubstr("tiebreak audit " + out + " --causal"));

  const io::safetensors_file f(out);
  using io::st_dtype;
  expect_tensor(f, "q", st_dtype::bf16, {1, 2, 80, 64});
  expect_tensor(f, "k", st_dtype::bf16, {1, 1, 80, 64});
  expect_tensor(f, "v", st_dtype::bf16, {1, 1, 80, 64});
  expect_tensor(f, "do", st_dtype::bf16, {1, 2, 80, 64});
  expect_tensor(f, "o", st_dtype::bf16, {1, 2, 80, 64});
  expect_tensor(f, "lse", st_dtype::f32, {1, 2, 80});
  expect_tensor(f, "delta", st_dtype::f32, {1, 2, 80});
  expect_tensor(f, "dq", st_dtype::bf16, {1, 2, 80, 64});
  expect_tensor(f, "dk", st_dtype::bf16, {1, 1, 80, 64});
  expect_tensor(f, "dv", st_dtype::bf16, {1, 1, 80, 64});

  const json p = read_json(s / "run.probe.json");
  EXPECT_EQ(p["schema"], "tiebreak.attention_probe/1");
  EXPECT_EQ(p["backend"], "host twin");
  EXPECT_EQ(p["options"]["mode"], "bf16");
  EXPECT_EQ(p["options"]["scaling"], "unfused");
  EXPECT_EQ(p["problem"]["causal"], true);
  EXPECT_EQ(p["problem"]["kv_heads"], 1);
  EXPECT_EQ(p["problem"]["scale"], 0.125);
  EXPECT_EQ(p["command_line"][1], "attention");
  EXPECT_EQ(p["inputs"]["do"], "drawn");
  EXPECT_GT(p["inputs"]["planted_rows"].get<int>(), 0);
  ASSERT_EQ(p["heads"].size(), 2u);
  std::uint64_t rep = 0;
  for (const json& h : p["heads"]) {
    // Every element of O is one output-error event, every row one delta-error event.
    EXPECT_EQ(h["output_error"]["count"], 80 * 64);
    EXPECT_EQ(h["delta_error"]["count"], 80);
    const auto& e = h["output_error"];
    EXPECT_EQ(e["positive"].get<std::uint64_t>() + e["negative"].get<std::uint64_t>() + e["zero"].get<std::uint64_t>(),
              e["count"].get<std::uint64_t>());
    EXPECT_LE(std::abs(e["mean"].get<double>()), 0.5);  // rounding to nearest: |error| <= 1/2 ulp
    // Unfused scaling: the maximum of every row gives P-bar = 1 (at least once per row).
    EXPECT_GE(h["p_one"].get<std::uint64_t>(), 80u);
    rep += h["repeated_max_exact"].get<std::uint64_t>();
  }
  EXPECT_GE(rep, p["inputs"]["planted_rows"].get<std::uint64_t>());
  EXPECT_EQ(p["total"]["repeated_max_exact"], rep);

  // `tiebreak audit` on the file as written (only the mask repeated): every tensor, every row.
  const auto a = run_cli({"audit", out, "--causal", "--json", "-q"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const json j = json::parse(a.out);
  ASSERT_EQ(j["heads"].size(), 2u);
  EXPECT_EQ(j["scale"], 0.125);
  for (const char* t : {"q", "k", "v", "do", "o", "lse", "dq", "dk", "dv"}) EXPECT_TRUE(j["tensors"].contains(t)) << t;
  std::uint64_t audit_ties = 0;
  for (const json& h : j["heads"]) {
    EXPECT_EQ(h["rows"], 80);
    audit_ties += h["tie_rows"].get<std::uint64_t>();
  }
  // The kernel's probe (f32 scores) and the audit (f64 scores) find the same repeated maxima here.
  EXPECT_EQ(audit_ties, rep);
}

// --near-tolerance: 0 makes "near" the exact repeats; a tolerance wider than every score's distance to
// its row maximum makes every row (64 keys each) a near repeat. Both written to the JSON's options.
TEST(AttentionCmd, NearToleranceSetsWhatCountsAsANearRepeat) {
  const scratch s("near");
  const std::string out = s / "n.safetensors";
  for (const auto& [tol, text] : {std::pair<double, std::string>{0.0, "0"}, {1000.0, "1000"}}) {
    SCOPED_TRACE(text);
    const auto r = run_cli({"attention", "--mode", "bf16", "--emulate", "--shape", "1,1,64,64", "--seed", "5",
                            "--near-tolerance", text, "-q", "-o", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json p = read_json(s / "n.probe.json");
    EXPECT_EQ(p["options"]["near_tolerance"].get<double>(), tol);
    const json& h = p["heads"][0];
    if (tol == 0.0) {
      EXPECT_EQ(h["repeated_max_near"], h["repeated_max_exact"]);
      EXPECT_GT(h["repeated_max_exact"].get<std::uint64_t>(), 0u);  // the drawn inputs plant repeated maxima
    } else {
      EXPECT_EQ(h["repeated_max_near"], 64);
    }
  }
}

TEST(AttentionCmd, InputsRoundTripReproducesTheRunBitForBit) {
  const scratch s("inputs");
  const std::string first = s / "a.safetensors", second = s / "b.safetensors";
  // Small on purpose: the twin runs every mma through the tensor-core model (~1 s per block of 64
  // rows under ASan at -O1). Two blocks in the stochastic case, so that --threads has work to split.
  for (const auto& [mode, shape] : {std::pair<std::string, std::string>{"stochastic", "1,2,64,64"}, {"fp32", "1,1,64,64"}}) {
    SCOPED_TRACE(mode);
    ASSERT_EQ(run_cli({"attention", "--mode", mode, "--emulate", "--shape", shape, "--seed", "3", "-q", "-o", first})
                  .exit_code, 0);
    // The written file as input (it holds do): same inputs, same seed, one thread: the same outputs.
    const auto r = run_cli({"attention", "--mode", mode, "--emulate", "--inputs", first, "--seed", "3", "--threads", "1",
                            "-o", second});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const io::safetensors_file fa(first), fb(second);
    for (const char* t : {"q", "k", "v", "do", "o", "lse", "delta", "dq", "dk", "dv"})
      EXPECT_EQ(bytes_of(fa, t), bytes_of(fb, t)) << t;
    EXPECT_EQ(fa.tensors().at("o").dtype, mode == "fp32" ? io::st_dtype::f32 : io::st_dtype::bf16);
    const json pa = read_json(s / "a.probe.json"), pb = read_json(s / "b.probe.json");
    EXPECT_EQ(pa["heads"], pb["heads"]);
    EXPECT_EQ(pb["inputs"]["source"], "file");
    EXPECT_EQ(pb["inputs"]["do"], "file");
  }
}

TEST(AttentionCmd, InputsWithoutDoAndWithNanAreRunAndCounted) {
  const scratch s("nodo");
  const std::string full = s / "full.safetensors";
  ASSERT_EQ(run_cli({"attention", "--mode", "bf16", "--emulate", "--shape", "1,1,64,64", "-q", "-o", full}).exit_code, 0);
  // q, k, v only, with a NaN in q and an Inf in v (bf16 encodings 0x7fc0 and 0xff80).
  std::map<std::string, io::st_tensor_data> t;
  {
    const io::safetensors_file f(full);
    for (const char* n : {"q", "k", "v"}) t[n] = {io::st_dtype::bf16, f.tensors().at(n).shape, bytes_of(f, n)};
  }
  t["q"].bytes[2 * 5] = std::byte{0xc0};
  t["q"].bytes[2 * 5 + 1] = std::byte{0x7f};
  t["v"].bytes[2 * 9] = std::byte{0x80};
  t["v"].bytes[2 * 9 + 1] = std::byte{0xff};
  const std::string in = s / "in.safetensors";
  io::write_safetensors(in, t);
  const auto r = run_cli({"attention", "--mode", "debias", "--emulate", "--inputs", in, "-o", s / "out.safetensors"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no 'do': dO drawn from the seed"));
  EXPECT_THAT(r.err, HasSubstr("NaN/Inf values (q 1, k 0, v 1, do 0)"));
  const json p = read_json(s / "out.probe.json");
  EXPECT_EQ(p["inputs"]["do"], "drawn");
  EXPECT_EQ(p["inputs"]["nonfinite"]["q"], 1);
  EXPECT_EQ(p["inputs"]["nonfinite"]["v"], 1);
  const io::safetensors_file f(s / "out.safetensors");
  EXPECT_TRUE(f.tensors().count("do"));
}

// One key tile (seq 64), every row planted: each row's maximum repeats exactly twice, so under bf16
// every row has exactly two P-bar == 1 events and under debias none.
TEST(AttentionCmd, DebiasRemovesEveryPOneEventOfRowsWithARepeatedMaximum) {
  const scratch s("debias");
  std::map<std::string, json> probe;
  for (const char* mode : {"bf16", "debias"}) {
    const auto r = run_cli({"attention", "--mode", mode, "--emulate", "--shape", "1,1,64,64", "--tie-share", "1", "-q",
                            "-o", s / (std::string(mode) + ".safetensors")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    probe[mode] = read_json(s / (std::string(mode) + ".probe.json"));
  }
  EXPECT_EQ(probe["bf16"]["heads"][0]["repeated_max_exact"], 64);
  EXPECT_EQ(probe["debias"]["heads"][0]["repeated_max_exact"], 64);
  EXPECT_EQ(probe["bf16"]["heads"][0]["p_one"], 128);
  EXPECT_EQ(probe["debias"]["heads"][0]["p_one"], 0);
}

// --exp sfu: the SFU's exponential (its model in the twin) changes the bits of O and dQ but not the
// P-bar == 1 count of planted ties (x = 0 at the maximum either way), and is recorded; a bad name is
// refused before anything is written.
TEST(AttentionCmd, ExpChoosesTheExponentialAndIsRecorded) {
  const scratch s("exp");
  std::map<std::string, json> probe;
  for (const char* e : {"software", "sfu"}) {
    const auto r = run_cli({"attention", "--mode", "bf16", "--emulate", "--shape", "1,1,192,64", "--exp", e, "-q", "-o", s / (std::string(e) + ".safetensors")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    probe[e] = read_json(s / (std::string(e) + ".probe.json"));
    EXPECT_EQ(probe[e]["options"]["exp"], e);
  }
  EXPECT_EQ(probe["sfu"]["heads"][0]["p_one"], probe["software"]["heads"][0]["p_one"]);
  EXPECT_GT(probe["sfu"]["heads"][0]["p_one"].get<std::uint64_t>(), 0u);  // the planted ties
  const io::safetensors_file fs_(s / "software.safetensors"), fx(s / "sfu.safetensors");
  EXPECT_EQ(bytes_of(fs_, "q"), bytes_of(fx, "q"));
  EXPECT_NE(bytes_of(fs_, "o"), bytes_of(fx, "o")) << "the two exponentials give the same O bits";
  EXPECT_NE(bytes_of(fs_, "dq"), bytes_of(fx, "dq")) << "the two exponentials give the same dQ bits";
  const auto bad = run_cli({"attention", "--mode", "bf16", "--emulate", "--shape", "1,1,64,64", "--exp", "mufu", "-o",
                            s / "bad.safetensors"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--exp: unknown exponential 'mufu' (expected software or sfu)"));
  EXPECT_FALSE(fs::exists(s / "bad.safetensors"));
}

TEST(AttentionCmd, WithoutEmulateRunsOnTheGpuOrSaysWhyNot) {
  const scratch s("gpu");
  const auto r = run_cli({"attention", "--mode", "bf16", "--shape", "1,1,64,64", "-o", s / "g.safetensors"});
  if (r.exit_code == 0) {  // a GPU build on a GPU machine
    EXPECT_EQ(read_json(s / "g.probe.json")["backend"], "gpu");
    return;
  }
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(lines_of(r.err).size(), 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no GPU to run the attention kernels on"));
  EXPECT_THAT(r.err, HasSubstr("--emulate"));
  EXPECT_FALSE(fs::exists(s / "g.safetensors"));
}

}  // namespace

#endif
