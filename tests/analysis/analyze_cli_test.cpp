// SPDX-License-Identifier: Apache-2.0
/// @file End-to-end tests of `tiebreak analyze`: the built binary on .npy files written here.
#include <tiebreak/io/npy.hpp>

#include <Eigen/QR>
#include <Eigen/SVD>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace io = tiebreak::io;
using nlohmann::json;
using Eigen::MatrixXd;
using row_major = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct run_result {
  int code = -1;
  std::string out, err;
};

class AnalyzeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tiebreak_analyze_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string save(const std::string& name, const MatrixXd& m, bool fortran = false) {
    const std::vector<std::size_t> shape{static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())};
    if (fortran) {
      io::write_npy<double>(path(name), std::span<const double>(m.data(), m.size()), shape, true);
    } else {
      const row_major r = m;
      io::write_npy<double>(path(name), std::span<const double>(r.data(), r.size()), shape);
    }
    return path(name);
  }
  std::string save_array(const std::string& name, const std::vector<double>& v, std::vector<std::size_t> shape) {
    io::write_npy<double>(path(name), v, shape);
    return path(name);
  }

  run_result run(const std::string& args) const {
    const std::string err_file = (dir_ / "stderr.txt").string();
    const std::string cmd = std::string(TIEBREAK_CLI_PATH) + " " + args + " 2>" + err_file;
    run_result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream e(err_file);
    std::stringstream ss;
    ss << e.rdbuf();
    r.err = ss.str();
    return r;
  }

  // Bad input: exit code 2, one stderr line "tiebreak: error: ..." mentioning `fragment`.
  void expect_error(const std::string& args, const std::string& fragment) const {
    const auto r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("tiebreak: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  }

  fs::path dir_;
};

MatrixXd orthonormal(Eigen::Index n, Eigen::Index k, std::mt19937_64& rng) {
  std::normal_distribution<double> g;
  Eigen::HouseholderQR<MatrixXd> qr(MatrixXd::NullaryExpr(n, k, [&] { return g(rng); }));
  return qr.householderQ() * MatrixXd::Identity(n, k);
}

json parse_line(const std::string& s) { return json::parse(s.substr(0, s.find('\n'))); }

TEST_F(AnalyzeCli, SpectralNormAndPerSliceNormsMatchTheSvd) {
  std::mt19937_64 rng(1);
  Eigen::VectorXd s = Eigen::VectorXd::LinSpaced(40, 3.0, 0.1);
  s[0] = 5.0;
  const MatrixXd w = orthonormal(128, 40, rng) * s.asDiagonal() * orthonormal(96, 40, rng).transpose();
  const auto r = run("analyze spectral --json --rows-per-slice 32 --exact " + save("w.npy", w));
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = parse_line(r.out);
  EXPECT_NEAR(j["spectral_norm"].get<double>(), 5.0, 5e-6);
  EXPECT_NEAR(j["exact"]["spectral_norm"].get<double>(), 5.0, 1e-12);
  EXPECT_NEAR(j["frobenius_norm"].get<double>(), s.norm(), 1e-10);
  ASSERT_EQ(j["slice_spectral_norms"].size(), 4u);
  for (int h = 0; h < 4; ++h) {
    const double exact = Eigen::JacobiSVD<MatrixXd>(w.middleRows(32 * h, 32)).singularValues()[0];
    EXPECT_NEAR(j["slice_spectral_norms"][h].get<double>(), exact, 1e-6 * exact) << h;
    EXPECT_EQ(j["slices"][h]["rows"][0].get<int>(), 32 * h);
  }
  // Same matrix stored in Fortran order: same answer; two files give two JSON lines.
  const auto r2 = run("analyze spectral --json " + save("w.npy", w) + " " + save("wf.npy", w, true));
  ASSERT_EQ(r2.code, 0) << r2.err;
  std::istringstream lines(r2.out);
  std::string l1, l2;
  std::getline(lines, l1);
  std::getline(lines, l2);
  EXPECT_NEAR(json::parse(l2)["spectral_norm"].get<double>(), json::parse(l1)["spectral_norm"].get<double>(), 1e-9);
  // Text output works too.
  const auto t = run("analyze spectral " + save("w.npy", w));
  EXPECT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("spectral_norm"), std::string::npos);
}

TEST_F(AnalyzeCli, StackOfMatricesGivesOneNormPerMember) {
  // diag(1, 2), diag(3, 1), diag(0.5, 0.25) stacked as (3, 2, 2).
  const auto f = save_array("stack.npy", std::vector<double>{1, 0, 0, 2, 3, 0, 0, 1, 0.5, 0, 0, 0.25}, {3, 2, 2});
  const auto r = run("analyze spectral --json " + f);
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = parse_line(r.out);
  ASSERT_EQ(j["slice_spectral_norms"].size(), 3u);
  EXPECT_NEAR(j["slice_spectral_norms"][0].get<double>(), 2.0, 1e-12);
  EXPECT_NEAR(j["slice_spectral_norms"][1].get<double>(), 3.0, 1e-12);
  EXPECT_NEAR(j["slice_spectral_norms"][2].get<double>(), 0.5, 1e-12);
  EXPECT_NEAR(j["spectral_norm"].get<double>(), 3.0, 1e-12);
}

TEST_F(AnalyzeCli, AlignFindsPlantedPrincipalAnglesAndCoherence) {
  // A and B share their top right vector; B's top left vector is A's rotated by 30 degrees.
  std::mt19937_64 rng(2);
  const MatrixXd u = orthonormal(20, 3, rng), v = orthonormal(15, 2, rng);
  const double angle = 30.0 * M_PI / 180;
  const Eigen::VectorXd ub = std::cos(angle) * u.col(0) + std::sin(angle) * u.col(2);
  const MatrixXd a = 4.0 * u.col(0) * v.col(0).transpose() + 0.5 * u.col(1) * v.col(1).transpose();
  const MatrixXd b = 4.0 * ub * v.col(0).transpose() + 0.5 * u.col(1) * v.col(1).transpose();
  const auto r = run("analyze align --json -k 1 " + save("a.npy", a) + " " + save("b.npy", b));
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = parse_line(r.out);
  ASSERT_EQ(j["principal_angles_deg"].size(), 1u);
  EXPECT_NEAR(j["principal_angles_deg"][0].get<double>(), 30.0, 1e-9);
  EXPECT_NEAR(j["principal_angles_right_deg"][0].get<double>(), 0.0, 1e-5);
  EXPECT_NEAR(j["steps"][1]["stable_rank"].get<double>(), (16 + 0.25) / 16, 1e-10);
  EXPECT_NEAR(j["cosine"].get<double>(), (16 * std::cos(angle) + 0.25) / 16.25, 1e-12);

  // Rank-1 coherence: every token pushes the same direction (up to sign) → 1.
  const int T = 6;
  std::vector<double> e(T), uu(T * 3), vv(T * 4);
  for (int t = 0; t < T; ++t) {
    e[t] = (t % 2 ? -1.0 : 1.0) * (t + 1);
    for (int i = 0; i < 3; ++i) uu[t * 3 + i] = (t % 2 ? -1.0 : 1.0) * (i + 1);
    for (int i = 0; i < 4; ++i) vv[t * 4 + i] = 0.5 * (i - 1.5);
  }
  const auto rc = run("analyze align --json --rank1 " + save_array("e.npy", e, {T}) + " " + save_array("u.npy", uu, {T, 3}) + " " +
                      save_array("v.npy", vv, {T, 4}));
  ASSERT_EQ(rc.code, 0) << rc.err;
  EXPECT_NEAR(parse_line(rc.out)["coherence"]["coherence"].get<double>(), 1.0, 1e-12);
}

TEST_F(AnalyzeCli, BiasStatisticsOfASmallVector) {
  const auto r = run("analyze bias --json " + save_array("e.npy", std::vector<double>{1, 2, 3, 4, 5}, {5}));
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = parse_line(r.out);
  EXPECT_DOUBLE_EQ(j["mean"].get<double>(), 3.0);
  EXPECT_NEAR(j["t"].get<double>(), 3 * std::sqrt(2.0), 1e-12);
  EXPECT_EQ(j["n"].get<int>(), 5);
  EXPECT_EQ(j["sign_test"]["positive"].get<int>(), 5);
  EXPECT_NEAR(j["sign_test"]["p_value"].get<double>(), 2.0 / 32, 1e-15);
  EXPECT_DOUBLE_EQ(j["drift"]["cumulative_sum_final"].get<double>(), 15.0);
  // Per-row groups on a (2, 3) array; --series adds the cumulative sums.
  const auto g = run("analyze bias --json --per-row --series " + save_array("g.npy", std::vector<double>{1, 1, 1, -1, 0, 1}, {2, 3}));
  ASSERT_EQ(g.code, 0) << g.err;
  const json jg = parse_line(g.out);
  ASSERT_EQ(jg["groups"].size(), 2u);
  EXPECT_DOUBLE_EQ(jg["groups"][0]["mean"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(jg["groups"][1]["mean"].get<double>(), 0.0);
  EXPECT_EQ(jg["drift"]["cumulative_sum"], (json{1.0, 2.0, 3.0, 2.0, 2.0, 3.0}));
  EXPECT_EQ(run("analyze bias " + save_array("e.npy", std::vector<double>{1, 2, 3, 4, 5}, {5})).code, 0);
}

TEST_F(AnalyzeCli, BadInputExitsWithCodeTwoAndOneLine) {
  expect_error("analyze spectral " + path("missing.npy"), "no such file");
  {
    std::ofstream(path("trunc.npy"), std::ios::binary) << std::string("\x93NUMPY\x01\x00\x76\x00{'descr'", 19);
  }
  expect_error("analyze spectral --json " + path("trunc.npy"), "truncated");
  {
    std::ofstream(path("text.npy")) << "hello, I am not a numpy file\n";
  }
  expect_error("analyze bias " + path("text.npy"), "bad magic");
  const auto a = save("a.npy", MatrixXd::Ones(4, 3));
  const auto b = save("b.npy", MatrixXd::Ones(3, 4));
  expect_error("analyze align " + a + " " + b, "differs");
  expect_error("analyze align " + a, "at least two");
  expect_error("analyze align " + save_array("vec.npy", std::vector<double>{1, 2, 3}, {3}) + " " + a, "2-d");
  expect_error("analyze spectral --rows-per-slice 3 " + save("m.npy", MatrixXd::Ones(4, 4)), "do not split");
  MatrixXd nan_m = MatrixXd::Ones(3, 3);
  nan_m(1, 1) = NAN;
  expect_error("analyze spectral " + save("nan.npy", nan_m), "NaN");
  expect_error("analyze bias " + save_array("empty.npy", std::vector<double>{}, {0}), "no values");
  expect_error("analyze align --json --rank1 " + save_array("e.npy", std::vector<double>{1, 2}, {2}) + " " + save_array("u.npy", std::vector<double>{1, 2, 3}, {1, 3}) +
                   " " + save_array("v.npy", std::vector<double>{1, 2}, {2, 1}),
               "one row per term");
}

}  // namespace
