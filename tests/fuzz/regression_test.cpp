// SPDX-License-Identifier: Apache-2.0
/// @file Replays every committed fuzz input (tests/fuzz/regressions/<target>/ and the seed corpora
/// tests/fuzz/corpus/<target>/) through the fuzzers' own entry points, in the normal test suite.
///
/// An input passes when the entry point returns: the parser accepted it consistently or rejected it
/// with its documented error. Each must also finish within a time budget, since the fuzzers run
/// with -timeout=5 under ASan (several times slower than the ordinary build).
#include "entry.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using entry_fn = void (*)(const std::uint8_t*, std::size_t);

#if defined(__SANITIZE_ADDRESS__)
#define TIEBREAK_FUZZ_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TIEBREAK_FUZZ_UNDER_ASAN 1
#endif
#endif

// 2 s in the ordinary build; under ASan (tools/sanitize.sh, -O1, several times slower) the fuzzers'
// own limit, -timeout=5.
#ifdef TIEBREAK_FUZZ_UNDER_ASAN
constexpr auto budget = std::chrono::seconds(5);
#else
constexpr auto budget = std::chrono::seconds(2);
#endif

/// Replays every file under tests/fuzz/<kind>/<target>; returns how many there were.
std::size_t replay(const std::string& kind, const std::string& target, entry_fn fn) {
  const fs::path dir = fs::path(TIEBREAK_FUZZ_DIR) / kind / target;
  if (!fs::is_directory(dir)) return 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.string());
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_NO_THROW(fn(reinterpret_cast<const std::uint8_t*>(c.data()), c.size()));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, budget);
  }
  return files.size();
}

TEST(FuzzRegression, Npy) {
  EXPECT_GT(replay("corpus", "npy", tiebreak::fuzz::npy_one_input), 10u);
  replay("regressions", "npy", tiebreak::fuzz::npy_one_input);
}

TEST(FuzzRegression, Safetensors) {
  EXPECT_GT(replay("corpus", "safetensors", tiebreak::fuzz::safetensors_one_input), 5u);
  replay("regressions", "safetensors", tiebreak::fuzz::safetensors_one_input);
}

TEST(FuzzRegression, Json) {
  EXPECT_GT(replay("corpus", "json", tiebreak::fuzz::json_one_input), 10u);
  EXPECT_GE(replay("regressions", "json", tiebreak::fuzz::json_one_input), 1u);
}

TEST(FuzzRegression, Report) {
  EXPECT_GE(replay("corpus", "report", tiebreak::fuzz::report_one_input), 6u);
}

TEST(FuzzRegression, Number) {
  EXPECT_GT(replay("corpus", "number", tiebreak::fuzz::number_one_input), 10u);
  EXPECT_GE(replay("regressions", "number", tiebreak::fuzz::number_one_input), 3u);
}

}  // namespace
