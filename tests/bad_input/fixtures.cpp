// SPDX-License-Identifier: Apache-2.0
/// @file Writes the matrix's fixture files: good, truncated, malformed, huge, empty and odd inputs.
#include "fixtures.hpp"

#include "../audit/audit_fixtures.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <sys/stat.h>
#include <unistd.h>

namespace tiebreak::test {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::vector<std::byte>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write fixture " + p.string());
}

void write_text(const fs::path& p, const std::string& s) {
  write(p, std::vector<std::byte>(reinterpret_cast<const std::byte*>(s.data()),
                                  reinterpret_cast<const std::byte*>(s.data()) + s.size()));
}

std::vector<std::byte> read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  std::memcpy(out.data(), c.data(), c.size());
  return out;
}

std::vector<double> iota(std::size_t n, double start = 1) {
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = start + static_cast<double>(i) * 0.25;
  return x;
}

/// A small kernel dump (bhsd bf16 values, exact in every dtype used here).
audit::kernel_dump small_dump() {
  const reference::attention_shape s{1, 2, 2, 8, 8, 4, 4};
  return emulate_kernel(make_problem(s, 7), false, [](std::size_t, std::size_t) { return round_mode::rne; });
}

/// The dump's tensors as BF16 safetensors entries, for editing before they are written.
std::map<std::string, io::st_tensor_data> st_tensors(const audit::kernel_dump& d) {
  std::map<std::string, io::st_tensor_data> t;
  for (auto& [name, nt] : dump_tensors(d, false)) t[name] = {io::st_dtype::bf16, nt.shape, encode_as(formats::bf16, nt.values)};
  return t;
}

/// A .npy folder with the dump's tensors, then `edit` applied to the folder.
template <class F>
void npy_folder(const fs::path& dir, const audit::kernel_dump& d, F&& edit) {
  write_dump_npy(dir, d, false);
  edit(dir);
}

void make_npy_fixtures(const fs::path& D) {
  const std::vector<double> good = iota(12);
  write(D / "good.npy", npy_bytes("<f8", false, "(3, 4)", f64_bytes(good)));
  std::vector<double> other = iota(12, -2);
  other[5] = 7;
  write(D / "good_b.npy", npy_bytes("<f8", false, "(3, 4)", f64_bytes(other)));
  std::vector<double> nan = good;
  nan[1] = std::numeric_limits<double>::quiet_NaN();
  nan[6] = std::numeric_limits<double>::infinity();
  nan[11] = -std::numeric_limits<double>::infinity();
  write(D / "nan.npy", npy_bytes("<f8", false, "(3, 4)", f64_bytes(nan)));  // 3 non-finite, 9 finite
  write(D / "all_nan.npy", npy_bytes("<f8", false, "(5,)", f64_bytes(std::vector<double>(5, NAN))));
  write(D / "vec.npy", npy_bytes("<f8", false, "(4,)", f64_bytes(iota(4))));
  write(D / "vec3.npy", npy_bytes("<f8", false, "(3,)", f64_bytes(iota(3))));
  write(D / "scalar.npy", npy_bytes("<f8", false, "()", f64_bytes({2.5})));
  write(D / "empty0.npy", npy_bytes("<f8", false, "(0,)", {}));
  write(D / "empty0x4.npy", npy_bytes("<f8", false, "(0, 4)", {}));
  write(D / "empty3x0.npy", npy_bytes("<f8", false, "(3, 0)", {}));
  write(D / "empty0x0.npy", npy_bytes("<f8", false, "(0, 0)", {}));
  write(D / "stack.npy", npy_bytes("<f8", false, "(2, 3, 4)", f64_bytes(iota(24))));
  write(D / "mat4x4.npy", npy_bytes("<f8", false, "(4, 4)", f64_bytes(iota(16))));
  write(D / "int.npy", npy_bytes("<i4", false, "(3, 4)", std::vector<std::byte>(48, std::byte{1})));
  write(D / "fortran.npy", npy_bytes("<f8", true, "(3, 4)", f64_bytes(good)));

  const std::vector<std::byte> g = read(D / "good.npy");
  write(D / "empty_file.npy", {});
  write(D / "trunc_magic.npy", std::vector<std::byte>(g.begin(), g.begin() + 5));
  write(D / "trunc_header.npy", std::vector<std::byte>(g.begin(), g.begin() + 40));
  write(D / "trunc_data.npy", std::vector<std::byte>(g.begin(), g.end() - 3));
  std::vector<std::byte> extra = g;
  extra.resize(extra.size() + 8, std::byte{0});
  write(D / "extra_data.npy", extra);
  std::vector<std::byte> magic = g;
  magic[1] = std::byte{'X'};
  write(D / "bad_magic.npy", magic);
  std::vector<std::byte> version = g;
  version[6] = std::byte{9};
  write(D / "bad_version.npy", version);
  // Header dicts that do not parse, or parse to something unsupported.
  auto raw_dict = [&](const std::string& name, const std::string& dict) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::vector<std::byte> b(10 + h.size());
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(h.size() & 0xff),
                                   static_cast<unsigned char>(h.size() >> 8)};
    std::memcpy(b.data(), pre, 10);
    std::memcpy(b.data() + 10, h.data(), h.size());
    const std::vector<std::byte> data = f64_bytes(good);
    b.insert(b.end(), data.begin(), data.end());
    write(D / name, b);
  };
  raw_dict("bad_dict.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4}");
  raw_dict("missing_key.npy", "{'descr': '<f8', 'fortran_order': False, }");
  raw_dict("neg_dim.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (-3, 4), }");
  std::string dims65 = "(";
  for (int i = 0; i < 65; ++i) dims65 += "1, ";
  raw_dict("dims65.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': " + dims65 + "), }");
  write(D / "complex.npy", npy_bytes("<c16", false, "(3, 4)", std::vector<std::byte>(192)));
  write(D / "string.npy", npy_bytes("|S4", false, "(3,)", std::vector<std::byte>(12)));
  write(D / "object.npy", npy_bytes("|O", false, "(3,)", std::vector<std::byte>(24)));
  // Huge claims: 2^62 one-byte elements (the byte count fits in size_t, the file holds none),
  // 2^62 eight-byte elements (the byte count overflows), a shape product that overflows, a
  // dimension beyond size_t.
  write(D / "huge_2p62_u1.npy", npy_bytes("|u1", false, "(4611686018427387904,)", {}));
  write(D / "huge_2p62_f8.npy", npy_bytes("<f8", false, "(4611686018427387904,)", {}));
  write(D / "huge_product.npy", npy_bytes("<f8", false, "(4294967296, 4294967296, 2)", {}));
  write(D / "huge_dim.npy", npy_bytes("<f8", false, "(99999999999999999999999,)", {}));
  write(D / "huge_stack_empty.npy", npy_bytes("<f8", false, "(4611686018427387904, 0, 5)", {}));  // 2^62 empty matrices
  write(D / "stack_empty.npy", npy_bytes("<f8", false, "(2, 0, 5)", {}));
  write(D / "huge_2p62_zero.npy", npy_bytes("<f8", false, "(4611686018427387904, 0)", {}));  // legal: empty
  // Sparse files (no disk space): 2^40 one-byte elements whose header agrees with the file size.
  write(D / "sparse_1t.npy", npy_bytes("|u1", false, "(1099511627776,)", {}));
  fs::resize_file(D / "sparse_1t.npy", fs::file_size(D / "sparse_1t.npy") + (std::uintmax_t{1} << 40));
  fs::create_directories(D / "dir.npy");
  ::mkfifo((D / "fifo.npy").c_str(), 0600);
  write(D / "unreadable.npy", g);
  fs::permissions(D / "unreadable.npy", fs::perms::none);
}

void make_audit_fixtures(const fs::path& D) {
  const audit::kernel_dump d = small_dump();
  write_dump_safetensors(D / "good.safetensors", d, false);
  npy_folder(D / "good_npy", d, [](const fs::path&) {});
  {
    audit::kernel_dump n = d;
    n.o[3] = NAN;
    n.o[9] = INFINITY;
    n.o[40] = -INFINITY;  // head 1
    write_dump_safetensors(D / "nan_o.safetensors", n, false);
    audit::kernel_dump q = d;
    q.inputs.q[0] = NAN;
    write_dump_safetensors(D / "nan_q.safetensors", q, false);
  }
  const std::vector<std::byte> g = read(D / "good.safetensors");
  write(D / "st_short.safetensors", std::vector<std::byte>(g.begin(), g.begin() + 5));
  write(D / "st_trunc_header.safetensors", std::vector<std::byte>(g.begin(), g.begin() + 60));
  write(D / "st_trunc_data.safetensors", std::vector<std::byte>(g.begin(), g.end() - 3));
  write_text(D / "st_text.safetensors", "this is not a safetensors file at all");
  {
    std::vector<std::byte> h(8, std::byte{0});
    h[7] = std::byte{0x40};  // header length 2^62
    write(D / "st_hlen_2p62.safetensors", h);
  }
  const std::vector<std::byte> data64(64, std::byte{0});
  auto st = [&](const std::string& name, const std::string& header) {
    write(D / name, safetensors_bytes(header, data64));
  };
  st("st_bad_json.safetensors", R"({"q": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16])");
  st("st_array.safetensors", R"([1, 2, 3])");
  st("st_entry_number.safetensors", R"({"q": 5})");
  st("st_no_dtype.safetensors", R"({"q": {"shape": [4], "data_offsets": [0, 16]}})");
  st("st_unknown_dtype.safetensors", R"({"q": {"dtype": "F128", "shape": [4], "data_offsets": [0, 64]}})");
  st("st_neg_dim.safetensors", R"({"q": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})");
  st("st_float_dim.safetensors", R"({"q": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 16]}})");
  st("st_offsets_reversed.safetensors", R"({"q": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}})");
  st("st_offsets_past_end.safetensors", R"({"q": {"dtype": "F32", "shape": [32], "data_offsets": [0, 128]}})");
  st("st_offsets_size.safetensors", R"({"q": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}})");
  st("st_huge_2p62.safetensors", R"({"q": {"dtype": "U8", "shape": [4611686018427387904], "data_offsets": [0, 0]}})");
  st("st_huge_product.safetensors",
     R"({"q": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 0]}})");
  st("st_huge_dim.safetensors", R"({"q": {"dtype": "F32", "shape": [99999999999999999999999], "data_offsets": [0, 0]}})");
  st("st_metadata_array.safetensors", R"({"__metadata__": [1]})");
  st("st_dup_key.safetensors",
     R"({"q": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "q": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}})");
  {
    auto t = st_tensors(d);
    t["q"] = {io::st_dtype::i32, t["q"].shape, std::vector<std::byte>(t["q"].bytes.size() * 2)};
    io::write_safetensors(D / "st_int_q.safetensors", t);
  }
  {
    auto t = st_tensors(d);
    t["q"].shape = {1, 2, 32};  // same bytes, 3-d
    io::write_safetensors(D / "st_q_3d.safetensors", t);
  }
  {
    auto t = st_tensors(d);
    t["q"] = {io::st_dtype::bf16, {1, 0, 8, 4}, {}};
    io::write_safetensors(D / "st_q_empty.safetensors", t);
  }
  {
    auto t = st_tensors(d);
    t.erase("k");
    io::write_safetensors(D / "st_no_k.safetensors", t);
  }
  {
    auto t = st_tensors(d);
    t["k"].shape = {1, 2, 4, 8};  // dim 8 instead of q's 4
    io::write_safetensors(D / "st_k_dim.safetensors", t);
  }
  {
    // 3 key/value heads for 2 query heads (every other shape agreeing).
    std::map<std::string, io::st_tensor_data> t;
    auto zeros = [](std::vector<std::size_t> shape) {
      std::size_t n = 2;
      for (std::size_t x : shape) n *= x;
      return io::st_tensor_data{io::st_dtype::bf16, shape, std::vector<std::byte>(n)};
    };
    t["q"] = zeros({1, 2, 8, 4});
    t["k"] = zeros({1, 3, 8, 4});
    t["v"] = zeros({1, 3, 8, 4});
    t["o"] = zeros({1, 2, 8, 4});
    io::write_safetensors(D / "st_heads.safetensors", t);
    // seq_q x seq_k = 2^15 x 2^14 = 2^29 scores per head, beyond the 2^28 limit (files of 64 KiB).
    t["q"] = zeros({1, 1, 32768, 1});
    t["k"] = zeros({1, 1, 16384, 1});
    t["v"] = zeros({1, 1, 16384, 1});
    t["o"] = zeros({1, 1, 32768, 1});
    io::write_safetensors(D / "st_seq_limit.safetensors", t);
  }
  {
    auto t = st_tensors(d);
    t["lse"] = {io::st_dtype::f32, {1, 2}, std::vector<std::byte>(8)};
    io::write_safetensors(D / "st_lse_shape.safetensors", t);
  }
  {
    auto t = st_tensors(d);
    t["dq"] = t["q"];  // a gradient without the upstream gradient 'do'
    io::write_safetensors(D / "st_dq_no_do.safetensors", t);
  }
  {
    // A sparse 1 TiB safetensors file whose shapes all agree: q holds 2^39 bf16 values (4 TiB as
    // f64), k 2^29; the other tensors are small.
    const std::uint64_t q_end = std::uint64_t{1} << 40, k_end = q_end + (std::uint64_t{1} << 30);
    const std::string h = R"({"q":{"dtype":"BF16","shape":[1024,1024,1,524288],"data_offsets":[0,)" + std::to_string(q_end) +
                          R"(]},"k":{"dtype":"BF16","shape":[1024,1,1,524288],"data_offsets":[)" + std::to_string(q_end) + "," +
                          std::to_string(k_end) + R"(]},"v":{"dtype":"BF16","shape":[1024,1,1,1],"data_offsets":[)" +
                          std::to_string(k_end) + "," + std::to_string(k_end + 2048) +
                          R"(]},"o":{"dtype":"BF16","shape":[1024,1024,1,1],"data_offsets":[)" + std::to_string(k_end + 2048) +
                          "," + std::to_string(k_end + 2048 + 2097152) + "]}}";
    write(D / "st_sparse_1t.safetensors", safetensors_bytes(h, {}));
    fs::resize_file(D / "st_sparse_1t.safetensors", 8 + h.size() + k_end + 2048 + 2097152);
  }
  fs::create_directories(D / "st_dir.safetensors");
  ::mkfifo((D / "st_fifo.safetensors").c_str(), 0600);
  write(D / "st_unreadable.safetensors", g);
  fs::permissions(D / "st_unreadable.safetensors", fs::perms::none);

  // .npy folders with one bad tensor.
  fs::create_directories(D / "empty_folder");
  npy_folder(D / "npy_q_trunc", d, [&](const fs::path& p) {
    const auto b = read(p / "q.npy");
    write(p / "q.npy", std::vector<std::byte>(b.begin(), b.end() - 5));
  });
  npy_folder(D / "npy_q_int", d, [&](const fs::path& p) {
    write(p / "q.npy", npy_bytes("<i4", false, "(1, 2, 8, 4)", std::vector<std::byte>(256)));
  });
  npy_folder(D / "npy_q_fortran", d, [&](const fs::path& p) {
    write(p / "q.npy", npy_bytes("<f4", true, "(1, 2, 8, 4)", std::vector<std::byte>(256)));
  });
  npy_folder(D / "npy_q_dir", d, [&](const fs::path& p) {
    fs::remove(p / "q.npy");
    fs::create_directories(p / "q.npy");
  });
  npy_folder(D / "npy_q_fifo", d, [&](const fs::path& p) {
    fs::remove(p / "q.npy");
    ::mkfifo((p / "q.npy").c_str(), 0600);
  });
  npy_folder(D / "npy_q_huge", d, [&](const fs::path& p) {
    write(p / "q.npy", npy_bytes("<f4", false, "(1, 2, 4611686018427387904, 4)", {}));
  });
  npy_folder(D / "npy_v_bad_magic", d, [&](const fs::path& p) { write_text(p / "v.npy", "not a npy file, just text"); });
}

/// Inputs of `tiebreak attention`: bf16 q, k, v of [1, 2, 64, D] (values from make_problem), edited.
void make_attention_fixtures(const fs::path& D) {
  auto inputs = [](std::size_t dim, std::size_t dim_v) {
    const reference::attention_inputs in = make_problem(reference::attention_shape{1, 2, 2, 64, 64, dim, dim_v}, 11);
    std::map<std::string, io::st_tensor_data> t;
    t["q"] = {io::st_dtype::bf16, {1, 2, 64, dim}, encode_as(formats::bf16, in.q)};
    t["k"] = {io::st_dtype::bf16, {1, 2, 64, dim}, encode_as(formats::bf16, in.k)};
    t["v"] = {io::st_dtype::bf16, {1, 2, 64, dim_v}, encode_as(formats::bf16, in.v)};
    return std::make_pair(in, t);
  };
  {
    auto [in, t] = inputs(64, 64);
    io::write_safetensors(D / "attn_no_do.safetensors", t);  // legal: dO is drawn from the seed
    std::vector<double> k = in.k;
    k[3] = std::numeric_limits<double>::quiet_NaN();
    k[100] = -std::numeric_limits<double>::infinity();
    t["k"].bytes = encode_as(formats::bf16, k);
    io::write_safetensors(D / "attn_nan_k.safetensors", t);  // legal: counted
    t["k"].bytes = encode_as(formats::bf16, in.k);
    std::vector<double> q = in.q;
    q[7] = 0.1;  // not a bf16 value
    t["q"] = {io::st_dtype::f32, {1, 2, 64, 64}, encode_as(formats::f32, q)};
    io::write_safetensors(D / "attn_q_not_bf16.safetensors", t);
    t["q"] = {io::st_dtype::bf16, {1, 2, 64, 64}, encode_as(formats::bf16, in.q)};
    t["do"] = {io::st_dtype::bf16, {1, 2, 64, 32}, encode_as(formats::bf16, std::vector<double>(64 * 64, 1.0))};
    io::write_safetensors(D / "attn_do_shape.safetensors", t);
  }
  io::write_safetensors(D / "attn_dim32.safetensors", inputs(32, 32).second);
  io::write_safetensors(D / "attn_dim_v.safetensors", inputs(64, 128).second);
}

/// audit-gemm fixtures: a 4 x 32 x 8 bf16 product with an f32 D, and its malformed variants.
void make_gemm_fixtures(const fs::path& D) {
  constexpr std::size_t M = 4, K = 32, N = 8;
  auto enc = [](const format_desc& f, double x) {
    return f64_bits_to(f, f64_to_bits(x), rounding{round_mode::rne, 0}).bits;
  };
  auto bytes = [](const std::vector<std::uint64_t>& bits, std::size_t item) {
    std::vector<std::byte> b(bits.size() * item);
    for (std::size_t i = 0; i < bits.size(); ++i)
      for (std::size_t k = 0; k < item; ++k) b[i * item + k] = std::byte{static_cast<unsigned char>(bits[i] >> (8 * k))};
    return b;
  };
  std::vector<double> a(M * K), b(K * N), d(M * N, 0.0);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::ldexp(static_cast<double>(static_cast<int>(i * 37 % 29) - 14), -3);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::ldexp(static_cast<double>(static_cast<int>(i * 53 % 31) - 15), -2);
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j)
      for (std::size_t k = 0; k < K; ++k) d[i * N + j] += a[i * K + k] * b[k * N + j];  // exact: small integers times 2^-5
  auto bits_of = [&](const format_desc& f, const std::vector<double>& xs) {
    std::vector<std::uint64_t> o;
    for (double x : xs) o.push_back(enc(f, x));
    return o;
  };
  using T = std::map<std::string, io::st_tensor_data>;
  const T good = {{"a", {io::st_dtype::bf16, {M, K}, bytes(bits_of(formats::bf16, a), 2)}},
                  {"b", {io::st_dtype::bf16, {K, N}, bytes(bits_of(formats::bf16, b), 2)}},
                  {"d", {io::st_dtype::f32, {M, N}, bytes(bits_of(formats::f32, d), 4)}}};
  io::write_safetensors(D / "gemm_good.safetensors", good);
  {
    T t = good;
    std::vector<double> an = a, dn = d;
    an[0] = NAN;  // row 0 of the product is NaN: 8 elements excluded
    dn[3 * N + 7] = INFINITY;
    t["a"].bytes = bytes(bits_of(formats::bf16, an), 2);
    t["d"].bytes = bytes(bits_of(formats::f32, dn), 4);
    io::write_safetensors(D / "gemm_nan.safetensors", t);
  }
  {
    T t = good;
    t["b"] = {io::st_dtype::bf16, {16, N}, bytes(bits_of(formats::bf16, std::vector<double>(b.begin(), b.begin() + 16 * N)), 2)};
    io::write_safetensors(D / "gemm_inner.safetensors", t);
  }
  {
    T t = good;
    t["d"] = {io::st_dtype::f32, {M, 4}, bytes(bits_of(formats::f32, std::vector<double>(d.begin(), d.begin() + M * 4)), 4)};
    io::write_safetensors(D / "gemm_d_shape.safetensors", t);
  }
  {
    T t = good;
    t["a"].shape = {1, M, K};
    io::write_safetensors(D / "gemm_a_3d.safetensors", t);
  }
  {
    T t = good;
    t["a"] = {io::st_dtype::i32, {M, K}, std::vector<std::byte>(M * K * 4, std::byte{0})};
    io::write_safetensors(D / "gemm_a_i32.safetensors", t);
  }
  {
    T t = good;
    t.erase("d");
    io::write_safetensors(D / "gemm_no_d.safetensors", t);
  }
  {
    // 2^20 x 2^20 x 2^16 described by a 20-byte header of sparse tensors: refused before allocating.
    T t;
    t["a"] = {io::st_dtype::bf16, {std::size_t{1} << 20, std::size_t{1} << 16}, {}};
    t["b"] = {io::st_dtype::bf16, {std::size_t{1} << 16, std::size_t{1} << 20}, {}};
    t["d"] = {io::st_dtype::f32, {std::size_t{1} << 20, std::size_t{1} << 20}, {}};
    std::string h = "{";
    std::size_t off = 0;
    for (const auto& [name, td] : t) {
      std::size_t n = td.dtype == io::st_dtype::f32 ? 4 : 2;
      for (std::size_t x : td.shape) n *= x;
      h += (h.size() > 1 ? "," : "");
      h += "\"" + name + "\":{\"dtype\":\"" + (td.dtype == io::st_dtype::f32 ? "F32" : "BF16") + "\",\"shape\":[" +
           std::to_string(td.shape[0]) + "," + std::to_string(td.shape[1]) + "],\"data_offsets\":[" + std::to_string(off) + "," +
           std::to_string(off + n) + "]}";
      off += n;
    }
    h += "}";
    write(D / "gemm_huge.safetensors", safetensors_bytes(h, {}));
    fs::resize_file(D / "gemm_huge.safetensors", 8 + h.size() + off);  // sparse: no blocks written
  }
  {
    // Per-row and per-column scales (powers of two: D stays exact), and scales of no accepted shape.
    const std::vector<double> sa = {2, 0.5, 1, 4}, sb = {1, 2, 4, 8, 0.25, 0.5, 1, 2};
    std::vector<double> ds = d;
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) ds[i * N + j] *= sa[i] * sb[j];
    T t = good;
    t["scale_a"] = {io::st_dtype::f32, {M, 1}, bytes(bits_of(formats::f32, sa), 4)};
    t["scale_b"] = {io::st_dtype::f32, {N}, bytes(bits_of(formats::f32, sb), 4)};
    t["d"].bytes = bytes(bits_of(formats::f32, ds), 4);
    io::write_safetensors(D / "gemm_rowscale.safetensors", t);
    t["scale_a"] = {io::st_dtype::f32, {3}, bytes(bits_of(formats::f32, std::vector<double>(sa.begin(), sa.begin() + 3)), 4)};
    io::write_safetensors(D / "gemm_scale_a_shape.safetensors", t);
    t = good;
    t["scale_b"] = {io::st_dtype::f32, {2, N}, bytes(bits_of(formats::f32, std::vector<double>(2 * N, 1.0)), 4)};
    io::write_safetensors(D / "gemm_scale_b_shape.safetensors", t);
  }
  {
    // Block scales along K (--scale-block 32): 4 x 64 x 8, scale_a [4, 2], scale_b [2, 1]; powers of
    // two and small integers, so D = Σ_b sa sb S_b is exact.
    constexpr std::size_t K2 = 64;
    std::vector<double> a2(M * K2), b2(K2 * N), d2(M * N, 0.0);
    for (std::size_t i = 0; i < a2.size(); ++i) a2[i] = static_cast<double>(static_cast<int>(i * 37 % 9) - 4);
    for (std::size_t i = 0; i < b2.size(); ++i) b2[i] = static_cast<double>(static_cast<int>(i * 53 % 7) - 3);
    const std::vector<double> sa = {2, 0.5, 1, 4, 0.25, 8, 1, 2}, sb = {4, 0.125};  // sa[i * 2 + kb], sb[kb]
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t k = 0; k < K2; ++k) d2[i * N + j] += sa[i * 2 + k / 32] * sb[k / 32] * a2[i * K2 + k] * b2[k * N + j];
    const T t = {{"a", {io::st_dtype::f8_e4m3, {M, K2}, bytes(bits_of(formats::e4m3, a2), 1)}},
                 {"b", {io::st_dtype::f8_e4m3, {K2, N}, bytes(bits_of(formats::e4m3, b2), 1)}},
                 {"d", {io::st_dtype::f32, {M, N}, bytes(bits_of(formats::f32, d2), 4)}},
                 {"scale_a", {io::st_dtype::f32, {M, 2}, bytes(bits_of(formats::f32, sa), 4)}},
                 {"scale_b", {io::st_dtype::f32, {2, 1}, bytes(bits_of(formats::f32, sb), 4)}}};
    io::write_safetensors(D / "gemm_blockscale.safetensors", t);
  }
  const std::vector<std::byte> g = read(D / "gemm_good.safetensors");
  write(D / "gemm_trunc.safetensors", std::vector<std::byte>(g.begin(), g.end() - 5));
  fs::create_directories(D / "gemm_npy_f8");
  write(D / "gemm_npy_f8" / "a.npy", npy_bytes("<f8", false, "(4, 32)", f64_bytes(a)));
  write(D / "gemm_npy_f8" / "b.npy", npy_bytes("<f8", false, "(32, 8)", f64_bytes(b)));
  write(D / "gemm_npy_f8" / "d.npy", npy_bytes("<f8", false, "(4, 8)", f64_bytes(d)));
}

}  // namespace

std::vector<std::byte> npy_bytes(const std::string& descr, bool fortran, const std::string& shape,
                                 const std::vector<std::byte>& payload) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::vector<std::byte> b(10 + h.size());
  const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(h.size() & 0xff),
                                 static_cast<unsigned char>(h.size() >> 8)};
  std::memcpy(b.data(), pre, 10);
  std::memcpy(b.data() + 10, h.data(), h.size());
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

std::vector<std::byte> safetensors_bytes(const std::string& header, const std::vector<std::byte>& data) {
  std::vector<std::byte> b(8 + header.size());
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = std::byte{static_cast<unsigned char>((header.size() >> (8 * i)) & 0xff)};
  std::memcpy(b.data() + 8, header.data(), header.size());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<std::byte> f64_bytes(const std::vector<double>& xs) {
  std::vector<std::byte> b(xs.size() * 8);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::uint64_t u = std::bit_cast<std::uint64_t>(xs[i]);
    for (int k = 0; k < 8; ++k) b[i * 8 + static_cast<std::size_t>(k)] = std::byte{static_cast<unsigned char>(u >> (8 * k))};
  }
  return b;
}

const std::filesystem::path& fixture_dir() {
  static const struct holder {
    fs::path dir;
    holder() {
      dir = fs::temp_directory_path() / ("tiebreak_bad_input_" + std::to_string(::getpid()));
      fs::remove_all(dir);
      fs::create_directories(dir);
      make_npy_fixtures(dir);
      make_audit_fixtures(dir);
      make_attention_fixtures(dir);
      make_gemm_fixtures(dir);
    }
    ~holder() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } h;
  return h.dir;
}

}  // namespace tiebreak::test
