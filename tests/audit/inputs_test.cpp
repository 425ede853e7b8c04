// SPDX-License-Identifier: Apache-2.0
/// @file Tests of the dump readers: safetensors parsing, exact decoding of bf16/f16/f32, both
/// layouts, .npy folders, tensors in memory (the Python package's arrays), and the bad-input matrix
/// (each error names the tensor and the problem).
#include "audit_fixtures.hpp"

#include <tiebreak/audit/audit.hpp>
#include <tiebreak/audit/inputs.hpp>
#include <tiebreak/io/safetensors.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace {

namespace audit = tiebreak::audit;
namespace io = tiebreak::io;
namespace ref = tiebreak::reference;
using namespace tiebreak::test;
using testing::HasSubstr;

audit::kernel_dump small_dump(bool with_grads = false) {
  const ref::attention_shape s{2, 4, 2, 5, 6, 3, 4};
  auto in = make_problem(s, 17, 0.0, with_grads);
  auto d = emulate_kernel(in, false, [](std::size_t, std::size_t) { return tiebreak::round_mode::rne; });
  if (with_grads) {
    const auto g = ref::attention_f64(in);
    auto bf = [](std::vector<double> x) {
      for (double& e : x) e = round_to(tiebreak::formats::bf16, e, tiebreak::round_mode::rne);
      return x;
    };
    d.dq = bf(g.dq);
    d.dk = bf(g.dk);
    d.dv = bf(g.dv);
    d.lse.assign(g.lse.begin(), g.lse.end());
    for (double& e : d.lse) e = round_to(tiebreak::formats::f32, e, tiebreak::round_mode::rne);
  }
  return d;
}

void write_bytes(const std::filesystem::path& p, const std::vector<std::byte>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
std::vector<std::byte> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}
/// A safetensors file with the given header text and `data_bytes` zero bytes of data.
std::vector<std::byte> raw_st(const std::string& header, std::size_t data_bytes) {
  std::vector<std::byte> out(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out[i] = std::byte{static_cast<unsigned char>((header.size() >> (8 * i)) & 0xff)};
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

std::string load_error(const std::filesystem::path& p, audit::layout L = audit::layout::bhsd) {
  try {
    audit::load_options o;
    o.tensor_layout = L;
    (void)audit::load_kernel_dump(p, o);
  } catch (const audit::input_error& e) {
    return e.what();
  }
  return "no error";
}

TEST(AuditInputs, SafetensorsRoundTripEveryDtypeAndLayout) {
  const auto dir = temp_dir("st_roundtrip");
  const auto d = small_dump(true);
  for (bool bshd : {false, true}) {
    for (auto dt : {io::st_dtype::bf16, io::st_dtype::f32}) {
      SCOPED_TRACE(testing::Message() << "bshd " << bshd << " dtype " << io::st_dtype_name(dt));
      const auto path = dir / "dump.safetensors";
      write_dump_safetensors(path, d, bshd, dt);
      audit::load_options o;
      o.tensor_layout = bshd ? audit::layout::bshd : audit::layout::bhsd;
      const auto r = audit::load_kernel_dump(path, o);
      EXPECT_EQ(r.container, "safetensors");
      EXPECT_EQ(r.inputs.shape.batch, 2u);
      EXPECT_EQ(r.inputs.shape.heads, 4u);
      EXPECT_EQ(r.inputs.shape.kv_heads, 2u);
      EXPECT_EQ(r.inputs.shape.seq_q, 5u);
      EXPECT_EQ(r.inputs.shape.seq_k, 6u);
      EXPECT_EQ(r.inputs.shape.dim, 3u);
      EXPECT_EQ(r.inputs.shape.dim_v, 4u);
      EXPECT_EQ(r.inputs.q, d.inputs.q);
      EXPECT_EQ(r.inputs.k, d.inputs.k);
      EXPECT_EQ(r.inputs.v, d.inputs.v);
      EXPECT_EQ(r.inputs.d_o, d.inputs.d_o);
      EXPECT_EQ(r.o, d.o);
      EXPECT_EQ(r.dq, d.dq);
      EXPECT_EQ(r.dk, d.dk);
      EXPECT_EQ(r.dv, d.dv);
      EXPECT_EQ(r.lse, d.lse);
      // f32 storage of bf16 values is recognised as bf16 output.
      EXPECT_EQ(r.info("o")->format.name, "bf16");
      EXPECT_EQ(r.info("o")->dtype, dt == io::st_dtype::bf16 ? "bf16" : "f32");
      EXPECT_EQ(r.info("lse")->format.name, "f32");
    }
  }
}

TEST(AuditInputs, F16AndNonFiniteValuesDecodeExactly) {
  const auto dir = temp_dir("st_f16");
  auto d = small_dump();
  d.o[0] = NAN;
  d.o[5] = INFINITY;
  d.inputs.v[2] = -INFINITY;
  d.o[1] = 0x1p-24;  // smallest f16 subnormal
  write_dump_safetensors(dir / "a.safetensors", d, false, io::st_dtype::f16);
  const auto r = audit::load_kernel_dump(dir / "a.safetensors");
  EXPECT_TRUE(std::isnan(r.o[0]));
  EXPECT_EQ(r.o[5], INFINITY);
  EXPECT_EQ(r.o[1], 0x1p-24);
  EXPECT_EQ(r.inputs.v[2], -INFINITY);
  EXPECT_EQ(r.info("o")->nonfinite, 2u);
  EXPECT_EQ(r.info("v")->nonfinite, 1u);
  EXPECT_EQ(r.info("q")->nonfinite, 0u);
  EXPECT_EQ(r.info("o")->format.name, "f16");
}

TEST(AuditInputs, NpyFolderBothLayouts) {
  const auto d = small_dump(true);
  for (bool bshd : {false, true}) {
    const auto dir = temp_dir(bshd ? "npy_bshd" : "npy_bhsd");
    write_dump_npy(dir, d, bshd);
    audit::load_options o;
    o.tensor_layout = bshd ? audit::layout::bshd : audit::layout::bhsd;
    const auto r = audit::load_kernel_dump(dir, o);
    EXPECT_EQ(r.container, "npy");
    EXPECT_EQ(r.inputs.q, d.inputs.q);
    EXPECT_EQ(r.inputs.v, d.inputs.v);
    EXPECT_EQ(r.o, d.o);
    EXPECT_EQ(r.dk, d.dk);
    EXPECT_EQ(r.lse, d.lse);
    EXPECT_EQ(r.info("o")->format.name, "bf16");
    EXPECT_EQ(r.info("o")->dtype, "f32");
  }
  // An explicit output format wins; genuine f32 values stay f32.
  const auto dir = temp_dir("npy_f32");
  auto e = small_dump();
  e.o[3] = 1.0 + 0x1p-20;
  write_dump_npy(dir, e, false);
  EXPECT_EQ(audit::load_kernel_dump(dir).info("o")->format.name, "f32");
  audit::load_options o;
  o.value_format = tiebreak::formats::bf16;
  EXPECT_EQ(audit::load_kernel_dump(dir, o).info("o")->format.name, "bf16");
}

TEST(AuditInputs, SafetensorsHeaderIsBoundsChecked) {
  auto err = [](const std::vector<std::byte>& b) {
    try {
      (void)io::parse_safetensors(b, "x.st");
    } catch (const io::safetensors_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(err({}), HasSubstr("truncated file"));
  auto huge = raw_st("{}", 0);
  huge[7] = std::byte{0x7f};
  EXPECT_THAT(err(huge), HasSubstr("exceeds the 100 MB limit"));
  auto longer = raw_st("{}", 0);
  longer[0] = std::byte{50};
  EXPECT_THAT(err(longer), HasSubstr("truncated file: header says 50 bytes"));
  EXPECT_THAT(err(raw_st("{\"q\": [1,", 0)), HasSubstr("not valid JSON"));
  EXPECT_THAT(err(raw_st("[1, 2]", 0)), HasSubstr("not a JSON object"));
  EXPECT_THAT(err(raw_st(R"({"q": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4)),
              HasSubstr("tensor 'q': data_offsets [0, 8] out of range"));
  EXPECT_THAT(err(raw_st(R"({"q": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8)),
              HasSubstr("tensor 'q': shape needs 12 bytes of F32, data_offsets hold 8"));
  EXPECT_THAT(err(raw_st(R"({"q": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8)),
              HasSubstr("tensor 'q': data_offsets begin 8 > end 0"));
  EXPECT_THAT(err(raw_st(R"({"q": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8)),
              HasSubstr("tensor 'q': shape entries must be non-negative integers"));
  EXPECT_THAT(err(raw_st(R"({"q": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})", 8)),
              HasSubstr("tensor 'q': shape overflows"));
  EXPECT_THAT(err(raw_st(R"({"k": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", 8)),
              HasSubstr("tensor 'k': unknown dtype 'Q4'"));
  EXPECT_THAT(err(raw_st(R"({"k": {"shape": [2], "data_offsets": [0, 8]}})", 8)), HasSubstr("tensor 'k': missing"));
  EXPECT_THAT(err(raw_st(R"({"__metadata__": 3})", 0)), HasSubstr("__metadata__"));
  EXPECT_EQ(err(raw_st(R"({"__metadata__": {"a": "b"}, "q": {"dtype": "BF16", "shape": [2, 0], "data_offsets": [0, 0]}})", 0)),
            "no error");
}

// The bad-input matrix of the loader: each message names the tensor and the problem.
TEST(AuditInputs, BadInputMatrix) {
  const auto dir = temp_dir("bad");
  const auto d = small_dump(true);
  const auto good = dir / "good.safetensors";
  write_dump_safetensors(good, d, false);
  const auto bytes = read_bytes(good);

  EXPECT_THAT(load_error(dir / "absent.safetensors"), HasSubstr("no such file"));
  // Truncated: the data section is cut.
  write_bytes(dir / "cut.safetensors", std::vector<std::byte>(bytes.begin(), bytes.end() - 10));
  EXPECT_THAT(load_error(dir / "cut.safetensors"), HasSubstr("out of range (truncated file?"));
  // Truncated inside the header.
  write_bytes(dir / "cut2.safetensors", std::vector<std::byte>(bytes.begin(), bytes.begin() + 40));
  EXPECT_THAT(load_error(dir / "cut2.safetensors"), HasSubstr("truncated file: header says"));

  auto with = [&](const std::string& name, auto edit) {
    auto t = dump_tensors(d, false);
    edit(t);
    std::map<std::string, io::st_tensor_data> st;
    for (auto& [n, nt] : t) st[n] = {io::st_dtype::f32, nt.shape, encode_as(tiebreak::formats::f32, nt.values)};
    const auto p = dir / (name + ".safetensors");
    io::write_safetensors(p, st);
    return load_error(p);
  };
  using T = std::map<std::string, named_tensor>;
  EXPECT_THAT(with("no_v", [](T& t) { t.erase("v"); }), HasSubstr("missing tensor 'v'"));
  EXPECT_THAT(with("no_o", [](T& t) { t.erase("o"); }), HasSubstr("missing tensor 'o'"));
  EXPECT_THAT(with("rank3", [](T& t) { t["q"].shape = {2, 4, 15}; }),
              HasSubstr("tensor 'q' has shape [2, 4, 15], expected 4 dimensions"));
  EXPECT_THAT(with("kdim", [](T& t) {
                t["k"].shape = {2, 2, 3, 6};
              }),
              HasSubstr("tensor 'k' [2, 2, 3, 6] has dim 6, q has 3"));
  EXPECT_THAT(with("oseq", [](T& t) { t["o"].shape = {2, 4, 4, 5}; }), HasSubstr("shape mismatch: tensor 'o'"));
  EXPECT_THAT(with("kvheads", [](T& t) {
                t["k"].shape = {2, 3, 4, 3};
                t["v"].shape = {2, 3, 4, 4};
                t["dk"].shape = {2, 3, 4, 3};
                t["dv"].shape = {2, 3, 4, 4};
              }),
              HasSubstr("3 key/value heads, which do not divide q's 4 heads"));
  EXPECT_THAT(with("dq_no_do", [](T& t) { t.erase("do"); }), HasSubstr("tensor 'dq' needs the upstream gradient 'do'"));
  EXPECT_THAT(with("dk_shape", [](T& t) { t["dk"].shape = {2, 2, 3, 6}; }),
              HasSubstr("tensor 'dk' [2, 2, 3, 6] must have the shape of 'k'"));
  EXPECT_THAT(with("lse_shape", [](T& t) { t["lse"].shape = {2, 20}; }), HasSubstr("tensor 'lse' [2, 20] must be [batch, heads, seq_q]"));
  EXPECT_THAT(with("empty", [](T& t) {
                t["q"].shape = {2, 4, 0, 3};
                t["q"].values.clear();
              }),
              HasSubstr("tensor 'q' has an empty dimension"));
  // A tensor of an unsupported dtype.
  {
    std::map<std::string, io::st_tensor_data> st;
    for (auto& [n, nt] : dump_tensors(d, false)) st[n] = {io::st_dtype::f32, nt.shape, encode_as(tiebreak::formats::f32, nt.values)};
    st["k"].dtype = io::st_dtype::i32;
    io::write_safetensors(dir / "int.safetensors", st);
    EXPECT_THAT(load_error(dir / "int.safetensors"), HasSubstr("tensor 'k': dtype I32 is not supported"));
  }
  // Huge sequence: seq_q · seq_k beyond 2^28 scores per head (small files: dim 1, f16).
  {
    std::map<std::string, io::st_tensor_data> st;
    const std::size_t sq = std::size_t{1} << 15, sk = std::size_t{1} << 14;
    st["q"] = {io::st_dtype::f16, {1, 1, sq, 1}, std::vector<std::byte>(sq * 2)};
    st["o"] = {io::st_dtype::f16, {1, 1, sq, 1}, std::vector<std::byte>(sq * 2)};
    st["k"] = {io::st_dtype::f16, {1, 1, sk, 1}, std::vector<std::byte>(sk * 2)};
    st["v"] = {io::st_dtype::f16, {1, 1, sk, 1}, std::vector<std::byte>(sk * 2)};
    io::write_safetensors(dir / "huge.safetensors", st);
    EXPECT_THAT(load_error(dir / "huge.safetensors"), HasSubstr("too large for the host reference"));
  }
}

// Big-endian .npy files (descr '>f4', '>f2') decode to the same values.
// inputs_only (tiebreak attention --inputs): q, k, v and do are read, o is neither needed nor read,
// outputs of any shape are ignored, and do must have the shape q and v imply.
TEST(AuditInputs, InputsOnlyReadsTheKernelInputs) {
  const auto d = small_dump(true);
  const auto dir = temp_dir("inputs_only");
  auto t = dump_tensors(d, false);
  t.erase("o");
  t["dq"].shape = {1, 1, 1, 1};  // broken outputs: ignored
  t["dq"].values.resize(1);
  std::map<std::string, io::st_tensor_data> st;
  for (auto& [n, nt] : t) st[n] = {io::st_dtype::f32, nt.shape, encode_as(tiebreak::formats::f32, nt.values)};
  io::write_safetensors(dir / "no_o.safetensors", st);
  audit::load_options o;
  o.inputs_only = true;
  const auto r = audit::load_kernel_dump(dir / "no_o.safetensors", o);
  EXPECT_EQ(r.inputs.q, d.inputs.q);
  EXPECT_EQ(r.inputs.k, d.inputs.k);
  EXPECT_EQ(r.inputs.v, d.inputs.v);
  EXPECT_EQ(r.inputs.d_o, d.inputs.d_o);
  EXPECT_TRUE(r.o.empty() && r.dq.empty() && r.lse.empty());
  EXPECT_EQ(r.info("o"), nullptr);
  EXPECT_THAT(load_error(dir / "no_o.safetensors"), HasSubstr("missing tensor 'o'"));
  st["do"].shape = {2, 4, 5, 3};
  st["do"].bytes.resize(2 * 4 * 5 * 3 * 4);
  io::write_safetensors(dir / "do_shape.safetensors", st);
  try {
    (void)audit::load_kernel_dump(dir / "do_shape.safetensors", o);
    ADD_FAILURE() << "no error";
  } catch (const audit::input_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor 'do' [2, 4, 5, 3] must be [batch, heads, seq_q, dim_v] = [2, 4, 5, 4]"));
  }
}

TEST(AuditInputs, NpyBigEndian) {
  const auto d = small_dump();
  const auto dir = temp_dir("npy_be");
  write_dump_npy(dir, d, false);
  const auto little = audit::load_kernel_dump(dir);
  for (const char* name : {"q", "k", "v", "o"}) {
    auto b = read_bytes(dir / (std::string(name) + ".npy"));
    const std::string text(reinterpret_cast<const char*>(b.data()), 64);
    const auto pos = text.find("'<f4'");
    ASSERT_NE(pos, std::string::npos);
    b[pos + 1] = std::byte{'>'};
    ASSERT_EQ(static_cast<int>(b[6]), 1);  // format 1.0: 2-byte header length at offset 8
    const std::size_t data = 10 + (static_cast<std::size_t>(b[8]) | static_cast<std::size_t>(b[9]) << 8);
    for (std::size_t i = data; i + 4 <= b.size(); i += 4) std::reverse(b.begin() + static_cast<long>(i), b.begin() + static_cast<long>(i) + 4);
    write_bytes(dir / (std::string(name) + ".npy"), b);
  }
  const auto big = audit::load_kernel_dump(dir);
  EXPECT_EQ(big.inputs.q, little.inputs.q);
  EXPECT_EQ(big.inputs.k, little.inputs.k);
  EXPECT_EQ(big.inputs.v, little.inputs.v);
  EXPECT_EQ(big.o, little.o);
  EXPECT_EQ(big.o, d.o);
}

TEST(AuditInputs, NpyBadInputs) {
  const auto d = small_dump();
  const auto dir = temp_dir("npy_bad");
  write_dump_npy(dir, d, false);
  std::filesystem::remove(dir / "k.npy");
  EXPECT_THAT(load_error(dir), HasSubstr("missing tensor 'k' (no k.npy in the folder)"));
  write_dump_npy(dir, d, false);
  // Truncated data.
  auto b = read_bytes(dir / "v.npy");
  b.resize(b.size() - 4);
  write_bytes(dir / "v.npy", b);
  EXPECT_THAT(load_error(dir), HasSubstr("truncated file: tensor 'v'"));
  // Integer dtype.
  write_dump_npy(dir, d, false);
  b = read_bytes(dir / "q.npy");
  const std::string text(reinterpret_cast<const char*>(b.data()), 64);
  const auto pos = text.find("<f4");
  ASSERT_NE(pos, std::string::npos);
  b[pos + 1] = std::byte{'i'};
  write_bytes(dir / "q.npy", b);
  EXPECT_THAT(load_error(dir), HasSubstr("tensor 'q': dtype i4 is not supported"));
  // Not a .npy file at all.
  write_bytes(dir / "q.npy", std::vector<std::byte>(100, std::byte{'x'}));
  EXPECT_THAT(load_error(dir), testing::AllOf(HasSubstr("bad magic"), HasSubstr("tensor 'q'")));
}

// --- tensors in memory (tiebreak.audit on arrays: python/src/core.cpp builds tensor_buffers) -------

/// The dump's tensors encoded in `f` (lse in f32), as the file writer stores them: the bytes the
/// in-memory buffers view (kept alive by the returned map).
std::map<std::string, std::pair<std::vector<std::size_t>, std::vector<std::byte>>> encoded(const audit::kernel_dump& d,
                                                                                           bool bshd,
                                                                                           const tiebreak::format_desc& f) {
  std::map<std::string, std::pair<std::vector<std::size_t>, std::vector<std::byte>>> out;
  for (auto& [name, nt] : dump_tensors(d, bshd))
    out[name] = {nt.shape, encode_as(name == "lse" ? tiebreak::formats::f32 : f, nt.values)};
  return out;
}
std::map<std::string, audit::tensor_buffer> buffers_of(
    const std::map<std::string, std::pair<std::vector<std::size_t>, std::vector<std::byte>>>& enc, const std::string& dtype) {
  std::map<std::string, audit::tensor_buffer> out;
  for (const auto& [name, sb] : enc) out[name] = {name == "lse" ? "f32" : dtype, sb.first, sb.second};
  return out;
}
/// The report without what names the input (source, container) or measures time.
nlohmann::json comparable(nlohmann::json j) {
  j.erase("source");
  j.erase("container");
  j.erase("timing_s");
  return j;
}
std::string memory_error(const std::map<std::string, audit::tensor_buffer>& t, audit::layout L = audit::layout::bhsd) {
  try {
    audit::load_options o;
    o.tensor_layout = L;
    (void)audit::load_kernel_dump(t, "arrays", o);
  } catch (const audit::input_error& e) {
    return e.what();
  }
  return "no error";
}

// Good arrays load to the same dump as the same tensors in a safetensors file, in both layouts and
// in bf16 and f32, non-finite values included, and audit to the same report.
TEST(AuditInputs, MemoryTensorsAuditAsTheFile) {
  const auto dir = temp_dir("memory");
  auto d = small_dump(true);
  d.o[3] = NAN;
  d.o[7] = -INFINITY;
  d.dv[2] = NAN;
  for (bool bshd : {false, true}) {
    for (auto dt : {io::st_dtype::bf16, io::st_dtype::f32}) {
      SCOPED_TRACE(testing::Message() << "bshd " << bshd << " dtype " << io::st_dtype_name(dt));
      const bool bf = dt == io::st_dtype::bf16;
      const auto path = dir / "dump.safetensors";
      write_dump_safetensors(path, d, bshd, dt);
      const auto enc = encoded(d, bshd, bf ? tiebreak::formats::bf16 : tiebreak::formats::f32);
      audit::load_options o;
      o.tensor_layout = bshd ? audit::layout::bshd : audit::layout::bhsd;
      const auto file = audit::load_kernel_dump(path, o);
      const auto mem = audit::load_kernel_dump(buffers_of(enc, bf ? "bf16" : "f32"), "arrays", o);
      EXPECT_EQ(mem.container, "memory");
      EXPECT_EQ(mem.source, "arrays");
      EXPECT_EQ(mem.inputs.shape.heads, file.inputs.shape.heads);
      EXPECT_EQ(mem.inputs.shape.kv_heads, file.inputs.shape.kv_heads);
      EXPECT_EQ(mem.inputs.q, file.inputs.q);
      EXPECT_EQ(mem.inputs.k, file.inputs.k);
      EXPECT_EQ(mem.inputs.v, file.inputs.v);
      EXPECT_EQ(mem.inputs.d_o, file.inputs.d_o);
      EXPECT_EQ(mem.dq, file.dq);
      EXPECT_EQ(mem.dk, file.dk);
      EXPECT_EQ(mem.lse, file.lse);
      // NaN != NaN: compare the encodings.
      ASSERT_EQ(mem.o.size(), file.o.size());
      for (std::size_t i = 0; i < mem.o.size(); ++i)
        EXPECT_EQ(tiebreak::f64_to_bits(mem.o[i]), tiebreak::f64_to_bits(file.o[i])) << i;
      EXPECT_EQ(mem.info("o")->nonfinite, 2u);
      EXPECT_EQ(mem.info("dv")->nonfinite, 1u);
      EXPECT_EQ(mem.info("o")->format.name, "bf16");
      EXPECT_EQ(mem.info("o")->dtype, bf ? "bf16" : "f32");
      audit::audit_options ao;
      ao.threads = 1;
      const auto jm = audit::to_json(audit::run_audit(mem, ao));
      const auto jf = audit::to_json(audit::run_audit(file, ao));
      EXPECT_EQ(jm["container"], "memory");
      EXPECT_EQ(jm["tensors"]["o"]["nonfinite"], 2);
      EXPECT_EQ(comparable(jm).dump(), comparable(jf).dump());
    }
  }
}

// Bad arrays fail as the file path fails, with the same message after the source.
TEST(AuditInputs, MemoryTensorsBadInputAsTheFile) {
  const auto dir = temp_dir("memory_bad");
  const auto d = small_dump(true);
  using T = std::map<std::string, named_tensor>;
  // One edit of the tensors, loaded from memory and from a file: the messages agree past the source.
  auto both = [&](const std::string& name, auto edit) {
    auto t = dump_tensors(d, false);
    edit(t);
    std::map<std::string, io::st_tensor_data> st;
    std::map<std::string, std::vector<std::byte>> bytes;
    std::map<std::string, audit::tensor_buffer> mem;
    for (auto& [n, nt] : t) {
      bytes[n] = encode_as(tiebreak::formats::f32, nt.values);
      st[n] = {io::st_dtype::f32, nt.shape, bytes[n]};
    }
    for (auto& [n, nt] : t) mem[n] = {"f32", nt.shape, bytes[n]};
    const auto p = dir / (name + ".safetensors");
    io::write_safetensors(p, st);
    const std::string f = load_error(p), m = memory_error(mem);
    EXPECT_EQ(f.substr(0, p.string().size()), p.string()) << f;
    EXPECT_EQ(m.substr(0, 8), "arrays: ") << m;
    return std::make_pair(f.substr(std::min(f.size(), p.string().size())), m.substr(std::min<std::size_t>(m.size(), 6)));
  };
  auto expect_same = [&](const std::string& name, auto edit, const std::string& what) {
    SCOPED_TRACE(name);
    const auto [f, m] = both(name, edit);
    EXPECT_THAT(m, HasSubstr(what));
    EXPECT_EQ(m, f);
  };
  {
    const auto [f, m] = both("no_v", [](T& t) { t.erase("v"); });
    EXPECT_EQ(f, ": missing tensor 'v' (not in the safetensors header)");
    EXPECT_EQ(m, ": missing tensor 'v' (not among the arrays given)");
  }
  expect_same("rank3", [](T& t) { t["q"].shape = {2, 4, 15}; }, "tensor 'q' has shape [2, 4, 15], expected 4 dimensions");
  expect_same("kdim", [](T& t) { t["k"].shape = {2, 2, 3, 6}; }, "tensor 'k' [2, 2, 3, 6] has dim 6, q has 3");
  expect_same("oseq", [](T& t) { t["o"].shape = {2, 4, 4, 5}; }, "shape mismatch: tensor 'o'");
  expect_same("dq_no_do", [](T& t) { t.erase("do"); }, "tensor 'dq' needs the upstream gradient 'do'");
  expect_same("lse_shape", [](T& t) { t["lse"].shape = {2, 20}; }, "tensor 'lse' [2, 20] must be [batch, heads, seq_q]");
  expect_same("empty", [](T& t) {
    t["q"].shape = {2, 4, 0, 3};
    t["q"].values.clear();
  }, "tensor 'q' has an empty dimension");

  // What only memory can get wrong: a dtype name, a tensor name, a buffer of the wrong size.
  const auto enc = encoded(d, false, tiebreak::formats::f32);
  auto mem = buffers_of(enc, "f32");
  EXPECT_EQ(memory_error(mem), "no error");
  mem["k"].dtype = "i32";
  EXPECT_EQ(memory_error(mem), "arrays: tensor 'k': dtype i32 is not supported (expected bf16, f16, f32 or f64)");
  mem = buffers_of(enc, "f32");
  mem["kk"] = mem["k"];
  EXPECT_THAT(memory_error(mem), HasSubstr("arrays: unknown tensor 'kk'"));
  mem = buffers_of(enc, "f32");
  mem["v"].bytes = mem["v"].bytes.first(mem["v"].bytes.size() - 4);
  EXPECT_THAT(memory_error(mem), HasSubstr("arrays: tensor 'v' of shape [2, 2, 6, 4] needs 384 data bytes, the buffer has 380"));
  mem = buffers_of(enc, "f32");
  mem["q"].dtype = "bf16";  // half the bytes a bf16 tensor of this shape would need: refused, never over-read
  EXPECT_THAT(memory_error(mem), HasSubstr("tensor 'q' of shape [2, 4, 5, 3] needs 240 data bytes, the buffer has 480"));
}

}  // namespace
