// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the .npy reader/writer: NumPy's own bytes, round trips, and hostile inputs.
#include "npy_golden.hpp"

#include <tiebreak/io/npy.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using tiebreak::io::npy_error;
namespace io = tiebreak::io;
namespace golden = tiebreak::test_golden;

std::span<const std::byte> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// A v1.0 file with the given header dict (padded like NumPy) and raw data bytes.
std::string make_npy(std::string dict, const std::string& data, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t hlen = dict.size();
  for (std::size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((hlen >> (8 * i)) & 0xff);
  return out + dict + data;
}

template <class T>
std::string raw(std::initializer_list<T> v) {
  std::string s(v.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST(NpyGolden, FloatMatrixFromNumpy) {
  const auto a = io::parse_npy<double>(bytes_of(golden::f4_2x3), "f4");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(a.data, (std::vector<double>{-1, -0.5, 0, 0.5, 1, 1.5}));
}

TEST(NpyGolden, FortranOrderIsReturnedInCOrder) {
  const auto a = io::parse_npy<double>(bytes_of(golden::f8_fortran_3x2), "f");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{3, 2}));
  EXPECT_EQ(a.data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  const auto h = io::parse_npy_header(bytes_of(golden::f8_fortran_3x2), "f");
  EXPECT_TRUE(h.fortran_order);
}

TEST(NpyGolden, BigEndianDoubles) {
  const auto a = io::parse_npy<double>(bytes_of(golden::be_f8_3), "be");
  EXPECT_EQ(a.data, (std::vector<double>{1.5, -2.25, 1e300}));
}

TEST(NpyGolden, HalfPrecisionIncludingSubnormalAndInfinity) {
  const auto a = io::parse_npy<double>(bytes_of(golden::f2_6), "f2");
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a.data[0], 1.0);
  EXPECT_EQ(a.data[1], -0.5);
  EXPECT_EQ(a.data[2], 65504.0);             // largest half
  EXPECT_EQ(a.data[3], std::ldexp(1.0, -24)); // smallest subnormal half
  EXPECT_EQ(a.data[4], std::numeric_limits<double>::infinity());
  EXPECT_EQ(a.data[5], std::ldexp(1.0, -14)); // smallest normal half
}

TEST(NpyGolden, Version2And3Headers) {
  const auto a = io::parse_npy<double>(bytes_of(golden::v2_i2_1x2), "v2");
  EXPECT_EQ(io::parse_npy_header(bytes_of(golden::v2_i2_1x2), "v2").major_version, 2);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(a.data, (std::vector<double>{-3, 7}));
  const auto b = io::parse_npy<float>(bytes_of(golden::v3_u1_3), "v3");
  EXPECT_EQ(io::parse_npy_header(bytes_of(golden::v3_u1_3), "v3").major_version, 3);
  EXPECT_EQ(b.data, (std::vector<float>{0, 255, 1}));
}

TEST(NpyGolden, ScalarEmptyAnd3d) {
  const auto s = io::parse_npy<double>(bytes_of(golden::f8_scalar), "s");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.data, std::vector<double>{3.25});
  const auto e = io::parse_npy<float>(bytes_of(golden::f4_empty_0x4), "e");
  EXPECT_EQ(e.shape, (std::vector<std::size_t>{0, 4}));
  EXPECT_TRUE(e.data.empty());
  const auto c = io::parse_npy<double>(bytes_of(golden::f8_2x2x2), "c");
  EXPECT_EQ(c.shape, (std::vector<std::size_t>{2, 2, 2}));
  EXPECT_EQ(c.data, (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(NpyWriter, BytesEqualNumpys) {
  // Our writer produces exactly what np.save writes for the same array.
  const std::vector<float> f{-1, -0.5f, 0, 0.5f, 1, 1.5f};
  const std::vector<std::size_t> shape{2, 3};
  const auto enc = io::encode_npy<float>(f, shape);
  ASSERT_EQ(enc.size(), golden::f4_2x3.size());
  EXPECT_EQ(std::memcmp(enc.data(), golden::f4_2x3.data(), enc.size()), 0);
  const std::vector<double> s{3.25};
  const auto enc_s = io::encode_npy<double>(s, std::span<const std::size_t>{});
  ASSERT_EQ(enc_s.size(), golden::f8_scalar.size());
  EXPECT_EQ(std::memcmp(enc_s.data(), golden::f8_scalar.data(), enc_s.size()), 0);
}

TEST(NpyWriter, RoundTripThroughAFileKeepsEveryBit) {
  std::mt19937_64 rng(1);
  std::vector<double> d(5 * 7 * 3);
  for (auto& x : d) x = std::bit_cast<double>(rng());  // arbitrary bits, NaN payloads included
  const std::vector<std::size_t> shape{5, 7, 3};
  const auto path = std::filesystem::temp_directory_path() / "tiebreak_npy_roundtrip_test.npy";
  io::write_npy<double>(path, d, shape);
  const auto back = io::read_npy<double>(path);
  std::filesystem::remove(path);
  EXPECT_EQ(back.shape, shape);
  ASSERT_EQ(back.data.size(), d.size());
  for (std::size_t i = 0; i < d.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint64_t>(back.data[i]), std::bit_cast<std::uint64_t>(d[i])) << i;
}

TEST(NpyWriter, FortranLabelledDataIsTransposedOnRead) {
  const std::vector<double> col_major{1, 3, 5, 2, 4, 6};  // [[1, 2], [3, 4], [5, 6]]
  const std::vector<std::size_t> shape{3, 2};
  const auto enc = io::encode_npy<double>(col_major, shape, true);
  const auto a = io::parse_npy<double>(enc, "mem");
  EXPECT_EQ(a.data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(NpyWriter, RejectsShapeThatDisagreesWithData) {
  const std::vector<float> f(5);
  const std::vector<std::size_t> shape{2, 3};
  EXPECT_THROW((void)io::encode_npy<float>(f, shape), npy_error);
}

TEST(NpyReader, FortranOrder3dMatchesCOrder) {
  // (2, 3, 4) with element value = C-order linear index, stored in Fortran order.
  std::vector<double> fort(24);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 4; ++k) fort[i + 2 * j + 6 * k] = static_cast<double>(i * 12 + j * 4 + k);
  const std::vector<std::size_t> shape{2, 3, 4};
  const auto a = io::parse_npy<double>(io::encode_npy<double>(fort, shape, true), "mem");
  for (std::size_t i = 0; i < 24; ++i) EXPECT_EQ(a.data[i], static_cast<double>(i));
}

TEST(NpyReader, HeaderVariantsNumpyAccepts) {
  // Key order, double quotes, no trailing comma, Python-2 long literals.
  const std::string d = raw<double>({1, 2});
  for (const char* dict : {"{'shape': (2,), 'fortran_order': False, 'descr': '<f8'}",
                           "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (2L,)}",
                           "{'descr':'<f8','fortran_order':False,'shape':(2,),}"}) {
    const auto a = io::parse_npy<double>(bytes_of(make_npy(dict, d)), "variant");
    EXPECT_EQ(a.data, (std::vector<double>{1, 2})) << dict;
  }
}

TEST(NpyReader, IntegerAndBoolDtypes) {
  EXPECT_EQ(io::parse_npy<double>(bytes_of(make_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                                                    raw<std::int64_t>({-5, 1LL << 40}))), "i8").data,
            (std::vector<double>{-5, 1099511627776.0}));
  EXPECT_EQ(io::parse_npy<double>(bytes_of(make_npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                                    std::string("\x00\x01\x02", 3))), "b1").data,
            (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(io::parse_npy<double>(bytes_of(make_npy("{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }",
                                                    raw<std::uint32_t>({4000000000u}))), "u4").data,
            (std::vector<double>{4e9}));
}

TEST(NpyReader, DoubleToFloatRoundsToNearest) {
  // 1 + 2^-24 is a tie between 1 and 1 + 2^-23: nearest-even gives 1; 1 + 3·2^-25 rounds up.
  const std::string d = raw<double>({1 + std::ldexp(1.0, -24), 1 + 3 * std::ldexp(1.0, -25)});
  const auto a = io::parse_npy<float>(bytes_of(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", d)), "x");
  EXPECT_EQ(a.data[0], 1.0f);
  EXPECT_EQ(a.data[1], 1.0f + std::ldexp(1.0f, -23));
}

// Every malformed input must throw npy_error whose message names the source, in one line.
void expect_rejected(const std::string& file, const std::string& fragment) {
  try {
    (void)io::parse_npy<double>(bytes_of(file), "bad.npy");
    ADD_FAILURE() << "accepted: " << fragment;
  } catch (const npy_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("bad.npy: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(NpyReader, RejectsMalformedHeaders) {
  const std::string d = raw<double>({1, 2});
  const std::string ok_dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  expect_rejected("not numpy at all", "bad magic");
  expect_rejected(std::string("\x93NUMPY\x04\x00\x10\x00", 10) + std::string(16, ' '), "version 4.0");
  expect_rejected(make_npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", d), "unsupported dtype");
  expect_rejected(make_npy("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", d), "unsupported dtype");
  expect_rejected(make_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", d), "structured");
  expect_rejected(make_npy("{'descr': '<f8', 'shape': (2,), }", d), "needs keys");
  expect_rejected(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1}", d), "unexpected key");
  expect_rejected(make_npy("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2,)}", d), "repeats");
  expect_rejected(make_npy("{'descr': '<f8', 'fortran_order': maybe, 'shape': (2,), }", d), "True or False");
  expect_rejected(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2), }", d), "not a tuple");
  expect_rejected(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (-2,), }", d), "non-negative");
  expect_rejected(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), } junk", d), "trailing");
  expect_rejected(make_npy("{'descr': '<f8, 'fortran_order': False, 'shape': (2,), }", d), "unsupported dtype");
  expect_rejected(make_npy("{'descr': '<f8", d), "unterminated");
  expect_rejected(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,), }", d),
                  "too large");
  expect_rejected(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", d),
                  "overflows");
  expect_rejected(make_npy(ok_dict, d + "x"), "size mismatch");
  expect_rejected(make_npy(ok_dict, d.substr(0, 15)), "truncated");
  expect_rejected(make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }", d), "truncated");
}

TEST(NpyReader, EveryTruncationOfAValidFileIsRejected) {
  const std::string full(golden::f8_fortran_3x2);
  for (std::size_t n = 0; n < full.size(); ++n) {
    EXPECT_THROW((void)io::parse_npy<double>(bytes_of(full.substr(0, n)), "cut"), npy_error) << n;
  }
}

TEST(NpyReader, RandomCorruptionNeverCrashes) {
  // Flip bytes of a valid file: the result is either a clean parse or npy_error (run under ASan
  // for out-of-bounds reads). 20000 mutations, fixed seed.
  const std::string base(golden::f4_2x3);
  std::mt19937_64 rng(2024);
  std::size_t parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) s[rng() % s.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) s.resize(rng() % s.size());
    try {
      const auto a = io::parse_npy<double>(bytes_of(s), "fuzz");
      std::size_t n = 1;
      for (auto d : a.shape) n *= d;
      EXPECT_EQ(n, a.data.size());
      ++parsed;
    } catch (const npy_error&) {
    }
  }
  EXPECT_GT(parsed, 0u);  // mutations inside the data bytes still parse
}

TEST(NpyFile, MissingDirectoryAndSpecialFiles) {
  EXPECT_THROW((void)io::read_npy<double>("/nonexistent/dir/x.npy"), npy_error);
  EXPECT_THROW((void)io::read_npy<double>(std::filesystem::temp_directory_path()), npy_error);
  if (std::filesystem::exists("/dev/zero")) {  // would never end if read
    EXPECT_THROW((void)io::read_npy<double>("/dev/zero"), npy_error);
  }
  try {
    (void)io::read_npy<double>("/nonexistent/dir/x.npy");
  } catch (const npy_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.npy"), std::string::npos);
  }
}

}  // namespace
