// SPDX-License-Identifier: Apache-2.0
/// @file Reads a GEMM dump (safetensors or .npy folder) into encodings: validation, layouts, formats.
#include <tiebreak/audit/gemm.hpp>

#include <tiebreak/fp/round.hpp>
#include <tiebreak/fp/value.hpp>
#include <tiebreak/io/npy.hpp>
#include <tiebreak/io/safetensors.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

#include <unistd.h>

namespace tiebreak::audit {
using emu::same_format;
namespace {

constexpr const char* gemm_names[] = {"a", "b", "c", "d", "scale_a", "scale_b"};

struct raw {
  std::string name;
  format_desc fmt = formats::f32;
  std::string dtype;
  std::size_t item = 4;
  std::vector<std::size_t> shape;
  std::span<const std::byte> bytes;
};

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

[[noreturn]] void fail(const std::string& source, const std::string& problem) { throw input_error(source + ": " + problem); }

std::uint32_t load_item(const std::byte* p, std::size_t item) {
  // Little-endian on disk (safetensors always; .npy big-endian files are refused below).
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < item; ++i) v |= static_cast<std::uint32_t>(std::to_integer<unsigned>(p[i])) << (8 * i);
  return v;
}

class gemm_store {
 public:
  explicit gemm_store(const std::filesystem::path& path) : source_(path.string()) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      container_ = "npy";
      for (const char* name : gemm_names) {
        const auto file = path / (std::string(name) + ".npy");
        if (std::filesystem::exists(file, ec)) add_npy(name, file);
      }
      return;
    }
    container_ = "safetensors";
    try {
      st_ = std::make_unique<io::safetensors_file>(path);
    } catch (const std::exception& e) {
      throw input_error(e.what());
    }
    for (const auto& [key, t] : st_->tensors()) {
      const std::string& k = key;  // structured bindings cannot be captured before C++20 in clang 15
      if (std::find_if(std::begin(gemm_names), std::end(gemm_names), [&](const char* n) { return k == n; }) ==
          std::end(gemm_names))
        continue;
      raw r;
      r.name = key;
      r.shape = t.shape;
      r.bytes = t.data;
      switch (t.dtype) {
        case io::st_dtype::bf16: r.fmt = formats::bf16; r.item = 2; break;
        case io::st_dtype::f16: r.fmt = formats::f16; r.item = 2; break;
        case io::st_dtype::f32: r.fmt = formats::f32; r.item = 4; break;
        case io::st_dtype::f8_e4m3: r.fmt = formats::e4m3; r.item = 1; break;
        case io::st_dtype::f8_e5m2: r.fmt = formats::e5m2; r.item = 1; break;
        default:
          fail(source_, "tensor '" + key + "': dtype " + std::string(io::st_dtype_name(t.dtype)) +
                            " is not supported (expected BF16, F16, F32, F8_E4M3 or F8_E5M2)");
      }
      r.dtype = std::string(r.fmt.name);
      tensors_.emplace(key, std::move(r));
    }
  }

  [[nodiscard]] const raw* find(const std::string& n) const {
    const auto it = tensors_.find(n);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] const raw& need(const std::string& n) const {
    const raw* t = find(n);
    if (!t)
      fail(source_, "missing tensor '" + n + "'" +
                        (container_ == "npy" ? " (no " + n + ".npy in the folder)" : " (not in the safetensors header)"));
    return *t;
  }
  [[nodiscard]] const std::string& source() const { return source_; }
  [[nodiscard]] const std::string& container() const { return container_; }

 private:
  void add_npy(const std::string& name, const std::filesystem::path& file) {
    const std::string fname = file.string();
    io::mapped_file map;
    io::npy_header h;
    try {
      map = io::mapped_file(file);
      h = io::parse_npy_header(map.bytes(), fname);
    } catch (const std::exception& e) {
      throw input_error(std::string(e.what()) + " (tensor '" + name + "')");
    }
    raw r;
    r.name = name;
    switch (h.dtype) {
      case io::npy_dtype::f2: r.fmt = formats::f16; r.item = 2; break;
      case io::npy_dtype::f4: r.fmt = formats::f32; r.item = 4; break;
      default:
        fail(fname, "tensor '" + name + "': dtype " + std::string(io::npy_dtype_name(h.dtype)) +
                        " is not supported (expected f2 or f4; store bf16 as f4)");
    }
    r.dtype = std::string(r.fmt.name);
    if (h.big_endian && r.item > 1) fail(fname, "tensor '" + name + "': big-endian arrays are not supported");
    if (h.fortran_order && h.shape.size() > 1)
      fail(fname, "tensor '" + name + "': Fortran-order arrays are not supported (use the layout options)");
    r.shape = h.shape;
    const std::size_t need = h.element_count() * r.item;
    const std::size_t have = map.bytes().size() - h.data_offset;
    if (have != need)
      fail(fname, std::string(have < need ? "truncated file" : "size mismatch") + ": tensor '" + name + "' of shape " +
                      shape_text(h.shape) + " needs " + std::to_string(need) + " data bytes, file has " + std::to_string(have));
    r.bytes = map.bytes().subspan(h.data_offset, need);
    maps_.push_back(std::move(map));
    tensors_.emplace(name, std::move(r));
  }

  std::string source_, container_;
  std::unique_ptr<io::safetensors_file> st_;
  std::vector<io::mapped_file> maps_;
  std::map<std::string, raw> tensors_;
};

/// A rank-2 tensor's (rows, cols) as stored.
std::pair<std::size_t, std::size_t> dims2(const std::string& src, const raw& t) {
  if (t.shape.size() != 2)
    fail(src, "tensor '" + t.name + "' has shape " + shape_text(t.shape) + ", expected 2 dimensions");
  for (std::size_t d : t.shape) {
    if (d == 0) fail(src, "tensor '" + t.name + "' has an empty dimension: shape " + shape_text(t.shape));
    if (d > (std::size_t{1} << 31)) fail(src, "tensor '" + t.name + "': dimension " + std::to_string(d) + " is too large (limit 2^31)");
  }
  return {t.shape[0], t.shape[1]};
}

/// Decodes `t` (stored rows x cols) into a rows' x cols' row-major array of encodings, transposed
/// when `transpose`; counts NaN and Inf.
std::vector<std::uint32_t> read_matrix(const raw& t, std::size_t rows, std::size_t cols, bool transpose,
                                       std::size_t& nonfinite) {
  std::vector<std::uint32_t> out(rows * cols);
  nonfinite = 0;
  const std::byte* base = t.bytes.data();
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t src = transpose ? c * rows + r : r * cols + c;
      const std::uint32_t v = load_item(base + src * t.item, t.item);
      nonfinite += !std::isfinite(to_double(t.fmt, v));
      out[r * cols + c] = v;
    }
  return out;
}

/// f32 encodings whose finite values all fit `to` exactly, re-encoded in `to`; else unchanged.
bool narrow_if_exact(std::vector<std::uint32_t>& v, const format_desc& to) {
  for (std::uint32_t x : v) {
    const round_result r = f32_bits_to(to, x, rounding{round_mode::rne, 0});
    if (std::isfinite(bits_to_f32(x)) && (r.inexact() || r.overflow())) return false;
  }
  for (std::uint32_t& x : v) x = static_cast<std::uint32_t>(f32_bits_to(to, x, rounding{round_mode::rne, 0}).bits);
  return true;
}

}  // namespace

gemm_dump load_gemm_dump(const std::filesystem::path& path, const gemm_load_options& o) {
  const gemm_store store(path);
  const std::string& src = store.source();
  gemm_dump out;
  out.source = src;
  out.container = store.container();
  out.a_layout = o.a_col_major ? "col" : "row";
  out.b_layout = o.b_col_major ? "col" : "row";
  const raw& ra = store.need("a");
  const raw& rb = store.need("b");
  const raw& rd = store.need("d");
  const auto [a0, a1] = dims2(src, ra);
  const auto [b0, b1] = dims2(src, rb);
  const auto [d0, d1] = dims2(src, rd);
  const std::size_t M = o.a_col_major ? a1 : a0, Ka = o.a_col_major ? a0 : a1;
  const std::size_t Kb = o.b_col_major ? b1 : b0, N = o.b_col_major ? b0 : b1;
  if (Ka != Kb)
    fail(src, "inner dimensions disagree: 'a' " + shape_text(ra.shape) + " (" + out.a_layout + "-major) has K = " +
                  std::to_string(Ka) + ", 'b' " + shape_text(rb.shape) + " (" + out.b_layout + "-major) has K = " +
                  std::to_string(Kb));
  if (d0 != M || d1 != N)
    fail(src, "shape mismatch: tensor 'd' " + shape_text(rd.shape) + " must be [M, N] = [" + std::to_string(M) + ", " +
                  std::to_string(N) + "]");
  if (Ka > gemm_max_k)
    fail(src, "K = " + std::to_string(Ka) + " is too large for the exact reference (limit " + std::to_string(gemm_max_k) + ")");
  // Refuse what cannot fit before allocating: encodings (4 bytes), decoded operands (8), the packed
  // leading slice of B (8) and, per output, the reference, Σ|ab| and D as doubles (about 28 bytes).
  {
    const long double need = 12.0L * (static_cast<long double>(M) * Ka + static_cast<long double>(Ka) * N) +
                              8.0L * Ka * N + 28.0L * static_cast<long double>(M) * N;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const long double have = pages > 0 && page > 0 ? static_cast<long double>(pages) * page : 0;
    if (have > 0 && need > have)
      fail(src, "M x N x K = " + std::to_string(M) + " x " + std::to_string(N) + " x " + std::to_string(Ka) +
                    " is too large: the reference needs about " + std::to_string(static_cast<unsigned long long>(need)) +
                    " bytes, the machine has " + std::to_string(static_cast<unsigned long long>(have)));
  }
  out.M = M;
  out.N = N;
  out.K = Ka;
  auto info = [&](const raw& t, std::size_t nonfinite, const format_desc& f) {
    tensor_info i;
    i.name = t.name;
    i.dtype = t.dtype;
    i.format = f;
    i.shape = t.shape;
    i.elements = 1;
    for (std::size_t s : t.shape) i.elements *= s;
    i.nonfinite = nonfinite;
    out.tensors[t.name] = i;
  };
  // f32 values that all fit bf16 (else f16) exactly are that format: inputs always (a bf16 GEMM fed
  // from f32 storage), outputs only from .npy (NumPy has no bf16).
  auto narrowed = [](std::vector<std::uint32_t>& v, const format_desc& f, bool allowed) {
    if (!allowed || !same_format(f, formats::f32)) return f;
    if (narrow_if_exact(v, formats::bf16)) return formats::bf16;
    if (narrow_if_exact(v, formats::f16)) return formats::f16;
    return f;
  };
  std::size_t nf = 0;
  out.a = read_matrix(ra, M, Ka, o.a_col_major, nf);
  out.a_fmt = narrowed(out.a, ra.fmt, true);
  info(ra, nf, out.a_fmt);
  out.b = read_matrix(rb, Kb, N, o.b_col_major, nf);
  out.b_fmt = narrowed(out.b, rb.fmt, true);
  info(rb, nf, out.b_fmt);
  out.d = read_matrix(rd, M, N, false, nf);
  out.d_fmt = narrowed(out.d, rd.fmt, out.container == "npy");
  info(rd, nf, out.d_fmt);
  if (const raw* rc = store.find("c")) {
    const auto [c0, c1] = dims2(src, *rc);
    if (c0 != M || c1 != N)
      fail(src, "shape mismatch: tensor 'c' " + shape_text(rc->shape) + " must be [M, N] = [" + std::to_string(M) + ", " +
                    std::to_string(N) + "]");
    out.c = read_matrix(*rc, M, N, false, nf);
    out.c_fmt = narrowed(out.c, rc->fmt, out.container == "npy");
    info(*rc, nf, out.c_fmt);
  }
  if (o.scale_block < 1 || o.scale_block > 8192)
    fail(src, "scale block " + std::to_string(o.scale_block) + " is out of range (1 to 8192)");
  out.scale_block = o.scale_block;
  const std::size_t nkb = (Ka + o.scale_block - 1) / o.scale_block, nnb = (N + o.scale_block - 1) / o.scale_block;
  for (const bool is_a : {true, false}) {
    const std::string sn = is_a ? "scale_a" : "scale_b";
    const raw* rs = store.find(sn);
    if (!rs) continue;
    // Accepted shapes, logical orientation first (A [M, K], B [K, N]); an operand stored transposed
    // (--a-layout/--b-layout col) may have its scale stored transposed too. The first match wins.
    struct form {
      std::vector<std::size_t> shape;
      gemm_scale_kind kind;
      bool transposed;  ///< stored [kblocks, outer] (A) / [outer-blocks, kblocks] (B)
    };
    const bool col = is_a ? o.a_col_major : o.b_col_major;
    const std::size_t outer = is_a ? M : N;
    std::vector<form> forms;
    if (is_a) {
      forms = {{{M}, gemm_scale_kind::outer, false}, {{M, 1}, gemm_scale_kind::outer, false},
               {{M, nkb}, gemm_scale_kind::block, false}};
      if (col) forms.insert(forms.end(), {{{1, M}, gemm_scale_kind::outer, true}, {{nkb, M}, gemm_scale_kind::block, true}});
    } else {
      forms = {{{N}, gemm_scale_kind::outer, false}, {{1, N}, gemm_scale_kind::outer, false},
               {{nkb, nnb}, gemm_scale_kind::block, false}};
      if (col) forms.insert(forms.end(), {{{N, 1}, gemm_scale_kind::outer, true}, {{nnb, nkb}, gemm_scale_kind::block, true}});
    }
    std::size_t n = 1;
    for (std::size_t s : rs->shape) n *= s;
    gemm_scale sc;
    std::vector<std::size_t> index;  // stored element of each table entry
    if (n == 1) {
      sc.kind = gemm_scale_kind::tensor;
      index = {0};
    } else {
      const form* hit = nullptr;
      for (const form& f : forms)
        if (f.shape == rs->shape) {
          hit = &f;
          break;
        }
      if (!hit) {
        std::string want;
        for (const form& f : forms)
          if (want.find(shape_text(f.shape)) == std::string::npos) want += (want.empty() ? "" : ", ") + shape_text(f.shape);
        fail(src, "tensor '" + sn + "' has shape " + shape_text(rs->shape) + ", expected one element or one of " + want +
                      " (scale block " + std::to_string(o.scale_block) + ")");
      }
      sc.kind = hit->kind == gemm_scale_kind::block && nkb == 1 ? gemm_scale_kind::outer : hit->kind;
      sc.outer = outer;
      sc.kblocks = hit->kind == gemm_scale_kind::block ? nkb : 1;
      index.resize(sc.outer * sc.kblocks);
      for (std::size_t q = 0; q < sc.outer; ++q)
        for (std::size_t kb = 0; kb < sc.kblocks; ++kb) {
          std::size_t at = 0;
          if (hit->kind == gemm_scale_kind::outer) at = q;
          else if (is_a) at = hit->transposed ? kb * M + q : q * nkb + kb;
          else at = hit->transposed ? (q / o.scale_block) * nkb + kb : kb * nnb + q / o.scale_block;
          index[q * sc.kblocks + kb] = at;
        }
    }
    std::size_t nonfinite = 0;
    sc.v.resize(index.size());
    for (std::size_t q = 0; q < index.size(); ++q) {
      const std::uint32_t v = load_item(rs->bytes.data() + index[q] * rs->item, rs->item);
      sc.v[q] = static_cast<std::uint32_t>(convert(formats::f32, rs->fmt, v, rounding{round_mode::rne, 0}).bits);
    }
    for (std::size_t q = 0; q < n; ++q) nonfinite += !std::isfinite(to_double(rs->fmt, load_item(rs->bytes.data() + q * rs->item, rs->item)));
    (is_a ? out.scale_a : out.scale_b) = std::move(sc);
    info(*rs, nonfinite, rs->fmt);
  }
  return out;
}

}  // namespace tiebreak::audit
