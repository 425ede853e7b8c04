// SPDX-License-Identifier: Apache-2.0
/// @file Reads a kernel dump (safetensors or .npy folder): validation, exact decoding, bhsd re-layout.
#include <tiebreak/audit/inputs.hpp>

#include <tiebreak/fp/round.hpp>
#include <tiebreak/fp/value.hpp>
#include <tiebreak/io/npy.hpp>
#include <tiebreak/io/safetensors.hpp>

#include "reference/parallel.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

#include <unistd.h>

namespace tiebreak::audit {
namespace {

enum class elem { bf16, f16, f32, f64 };

const char* elem_name(elem e) {
  switch (e) {
    case elem::bf16: return "bf16";
    case elem::f16: return "f16";
    case elem::f32: return "f32";
    case elem::f64: return "f64";
  }
  return "?";
}
format_desc elem_format(elem e) {
  switch (e) {
    case elem::bf16: return formats::bf16;
    case elem::f16: return formats::f16;
    case elem::f32: return formats::f32;
    case elem::f64: return formats::f64;
  }
  return formats::f64;
}
std::size_t elem_size(elem e) { return e == elem::f64 ? 8 : e == elem::f32 ? 4 : 2; }

/// One stored tensor: its bytes (a view into a mapping), element type, byte order and shape.
struct raw_tensor {
  std::string name;
  elem type = elem::f32;
  bool big_endian = false;
  std::vector<std::size_t> shape;
  std::span<const std::byte> bytes;
};

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
  throw input_error(source + ": " + problem);
}

/// Holds the mappings and the raw tensors found in one input.
class tensor_store {
 public:
  tensor_store(const std::filesystem::path& path) : source_(path.string()) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      container_ = "npy";
      for (const char* name : {"q", "k", "v", "o", "do", "dq", "dk", "dv", "lse"}) {
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
      if (!is_known(key)) continue;  // other tensors may share the file
      raw_tensor r;
      r.name = key;
      r.shape = t.shape;
      r.bytes = t.data;
      switch (t.dtype) {
        case io::st_dtype::bf16: r.type = elem::bf16; break;
        case io::st_dtype::f16: r.type = elem::f16; break;
        case io::st_dtype::f32: r.type = elem::f32; break;
        case io::st_dtype::f64: r.type = elem::f64; break;
        default:
          fail(source_, "tensor '" + key + "': dtype " + std::string(io::st_dtype_name(t.dtype)) +
                            " is not supported (expected BF16, F16, F32 or F64)");
      }
      tensors_.emplace(key, std::move(r));
    }
  }

  /// In-memory tensors (the Python package's arrays): views into the caller's buffers.
  tensor_store(const std::map<std::string, tensor_buffer>& buffers, std::string source)
      : source_(std::move(source)), container_("memory") {
    for (const auto& [name, b] : buffers) {
      if (!is_known(name))
        fail(source_, "unknown tensor '" + name + "' (expected q, k, v, o, do, dq, dk, dv, lse)");
      raw_tensor r;
      r.name = name;
      if (b.dtype == "bf16") r.type = elem::bf16;
      else if (b.dtype == "f16") r.type = elem::f16;
      else if (b.dtype == "f32") r.type = elem::f32;
      else if (b.dtype == "f64") r.type = elem::f64;
      else fail(source_, "tensor '" + name + "': dtype " + b.dtype + " is not supported (expected bf16, f16, f32 or f64)");
      r.shape = b.shape;
      std::size_t count = 1;
      for (std::size_t d : b.shape) count *= d;
      if (b.bytes.size() != count * elem_size(r.type))
        fail(source_, "tensor '" + name + "' of shape " + shape_text(b.shape) + " needs " +
                          std::to_string(count * elem_size(r.type)) + " data bytes, the buffer has " +
                          std::to_string(b.bytes.size()));
      r.bytes = b.bytes;
      tensors_.emplace(name, std::move(r));
    }
  }

  [[nodiscard]] const raw_tensor* find(const std::string& name) const {
    const auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] const raw_tensor& need(const std::string& name) const {
    const raw_tensor* t = find(name);
    if (!t)
      fail(source_, "missing tensor '" + name + "'" +
                        (container_ == "npy"      ? " (no " + name + ".npy in the folder)"
                         : container_ == "memory" ? " (not among the arrays given)"
                                                  : " (not in the safetensors header)"));
    return *t;
  }
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  [[nodiscard]] const std::string& container() const noexcept { return container_; }

 private:
  static bool is_known(const std::string& k) {
    for (const char* n : {"q", "k", "v", "o", "do", "dq", "dk", "dv", "lse"})
      if (k == n) return true;
    return false;
  }

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
    raw_tensor r;
    r.name = name;
    switch (h.dtype) {
      case io::npy_dtype::f2: r.type = elem::f16; break;
      case io::npy_dtype::f4: r.type = elem::f32; break;
      case io::npy_dtype::f8: r.type = elem::f64; break;
      default:
        fail(fname, "tensor '" + name + "': dtype " + std::string(io::npy_dtype_name(h.dtype)) +
                        " is not supported (expected f2, f4 or f8; store bf16 as f4)");
    }
    if (h.fortran_order && h.shape.size() > 1)
      fail(fname, "tensor '" + name + "': Fortran-order arrays are not supported (save np.ascontiguousarray)");
    r.big_endian = h.big_endian;
    r.shape = h.shape;
    const std::size_t need = h.element_count() * elem_size(r.type);
    const std::size_t have = map.bytes().size() - h.data_offset;
    if (have != need)
      fail(fname, std::string(have < need ? "truncated file" : "size mismatch") + ": tensor '" + name + "' of shape " +
                      shape_text(h.shape) + " needs " + std::to_string(need) + " data bytes, file has " +
                      std::to_string(have));
    r.bytes = map.bytes().subspan(h.data_offset, need);
    maps_.push_back(std::move(map));
    tensors_.emplace(name, std::move(r));
  }

  std::string source_;
  std::string container_;
  std::unique_ptr<io::safetensors_file> st_;
  std::vector<io::mapped_file> maps_;  // moving a mapping keeps its address: spans stay valid
  std::map<std::string, raw_tensor> tensors_;
};

template <class U>
U load_le(const std::byte* p, bool big_endian) {
  U v;
  std::memcpy(&v, p, sizeof(U));
  if (big_endian != (std::endian::native == std::endian::big)) {
    unsigned char b[sizeof(U)];
    std::memcpy(b, &v, sizeof(U));
    std::reverse(b, b + sizeof(U));
    std::memcpy(&v, b, sizeof(U));
  }
  return v;
}

double decode(const std::byte* p, elem t, bool be) {
  switch (t) {
    case elem::bf16: return to_double(formats::bf16, load_le<std::uint16_t>(p, be));
    case elem::f16: return to_double(formats::f16, load_le<std::uint16_t>(p, be));
    case elem::f32: return to_double(formats::f32, load_le<std::uint32_t>(p, be));
    case elem::f64: return to_double(formats::f64, load_le<std::uint64_t>(p, be));
  }
  return 0;
}

/// Logical dims of a rank-4 tensor: batch, heads, seq, dim (whatever the layout).
struct dims4 {
  std::size_t b = 0, h = 0, s = 0, d = 0;
};

dims4 dims_of(const std::string& source, const raw_tensor& t, layout L) {
  if (t.shape.size() != 4)
    fail(source, "tensor '" + t.name + "' has shape " + shape_text(t.shape) + ", expected 4 dimensions (" +
                     (L == layout::bhsd ? "batch, heads, seq, dim" : "batch, seq, heads, dim") + ")");
  for (std::size_t d : t.shape)
    if (d == 0) fail(source, "tensor '" + t.name + "' has an empty dimension: shape " + shape_text(t.shape));
  for (std::size_t d : t.shape)
    if (d > (std::size_t{1} << 31))
      fail(source, "tensor '" + t.name + "': dimension " + std::to_string(d) + " is too large (limit 2^31)");
  if (L == layout::bhsd) return {t.shape[0], t.shape[1], t.shape[2], t.shape[3]};
  return {t.shape[0], t.shape[2], t.shape[1], t.shape[3]};
}

/// Decodes `t` (logical dims `d`) into dense bhsd doubles; counts non-finite values. Threaded over
/// (batch, head) slices: at B=4, H=16, S=4096, D=128 one tensor is 33.5 M values (~0.3 s on one core).
std::vector<double> decode_bhsd(const raw_tensor& t, const dims4& d, layout L, std::size_t& nonfinite) {
  std::vector<double> out(d.b * d.h * d.s * d.d);
  const std::size_t item = elem_size(t.type);
  const std::byte* base = t.bytes.data();
  const std::size_t slices = d.b * d.h, slice = d.s * d.d;
  std::vector<std::size_t> bad(slices, 0);
  reference::detail::parallel_for(slices, 0, [&](std::size_t bh) {
    const std::size_t b = bh / d.h, h = bh % d.h;
    std::size_t n = 0;
    for (std::size_t s = 0; s < d.s; ++s) {
      // bhsd: the slice is contiguous in the file; bshd: row s of head h is at ((b·S + s)·H + h)·D.
      const std::size_t src = L == layout::bhsd ? bh * slice + s * d.d : ((b * d.s + s) * d.h + h) * d.d;
      double* dst = out.data() + bh * slice + s * d.d;
      for (std::size_t x = 0; x < d.d; ++x) {
        const double v = decode(base + (src + x) * item, t.type, t.big_endian);
        n += !std::isfinite(v);
        dst[x] = v;
      }
    }
    bad[bh] = n;
  });
  nonfinite = 0;
  for (std::size_t n : bad) nonfinite += n;
  return out;
}

bool all_fit(const std::vector<double>& xs, const format_desc& f) {
  for (double x : xs) {
    if (!std::isfinite(x)) continue;
    const round_result r = f64_bits_to(f, f64_to_bits(x), rounding{round_mode::rne, 0});
    if (r.inexact() || r.overflow()) return false;
  }
  return true;
}

format_desc value_format_of(const raw_tensor& t, const std::vector<double>& values, const load_options& o) {
  if (o.value_format) return *o.value_format;
  if (t.type == elem::f32 || t.type == elem::f64) {
    if (all_fit(values, formats::bf16)) return formats::bf16;
    if (all_fit(values, formats::f16)) return formats::f16;
  }
  return elem_format(t.type);
}

}  // namespace

namespace {
kernel_dump load_from_store(const tensor_store& store, const load_options& opt);
}  // namespace

kernel_dump load_kernel_dump(const std::filesystem::path& path, const load_options& opt) {
  return load_from_store(tensor_store(path), opt);
}

kernel_dump load_kernel_dump(const std::map<std::string, tensor_buffer>& tensors, const std::string& source,
                             const load_options& opt) {
  return load_from_store(tensor_store(tensors, source), opt);
}

namespace {
kernel_dump load_from_store(const tensor_store& store, const load_options& opt) {
  const std::string& src = store.source();
  const layout L = opt.tensor_layout;
  kernel_dump out;
  out.source = src;
  out.container = store.container();
  out.layout = L == layout::bhsd ? "bhsd" : "bshd";

  const raw_tensor& rq = store.need("q");
  const raw_tensor& rk = store.need("k");
  const raw_tensor& rv = store.need("v");
  const dims4 q = dims_of(src, rq, L), k = dims_of(src, rk, L), v = dims_of(src, rv, L);
  auto mismatch = [&](const raw_tensor& t, const std::string& what, std::size_t have, const std::string& other,
                      std::size_t want) {
    if (have != want)
      fail(src, "shape mismatch: tensor '" + t.name + "' " + shape_text(t.shape) + " has " + what + " " +
                    std::to_string(have) + ", " + other + " " + std::to_string(want));
  };
  mismatch(rk, "batch", k.b, "q has", q.b);
  mismatch(rk, "dim", k.d, "q has", q.d);
  mismatch(rv, "batch", v.b, "q has", q.b);
  mismatch(rv, "heads", v.h, "k has", k.h);
  mismatch(rv, "seq", v.s, "k has", k.s);
  // O's shape: as stored, or (inputs only) the one q and v imply, which `do` must have.
  const raw_tensor* ro = opt.inputs_only ? nullptr : &store.need("o");
  const dims4 o = ro ? dims_of(src, *ro, L) : dims4{q.b, q.h, q.s, v.d};
  if (ro) {
    mismatch(*ro, "batch", o.b, "q has", q.b);
    mismatch(*ro, "heads", o.h, "q has", q.h);
    mismatch(*ro, "seq", o.s, "q has", q.s);
    mismatch(*ro, "dim", o.d, "v has", v.d);
  }
  if (q.h % k.h != 0)
    fail(src, "shape mismatch: tensor 'k' has " + std::to_string(k.h) + " key/value heads, which do not divide q's " +
                  std::to_string(q.h) + " heads");
  if (!opt.inputs_only && q.s > max_scores_per_head / k.s)
    fail(src, "tensors 'q' and 'k': seq_q " + std::to_string(q.s) + " x seq_k " + std::to_string(k.s) +
                  " is too large for the host reference (limit 2^28 scores per head)");

  reference::attention_shape& sh = out.inputs.shape;
  sh = {q.b, q.h, k.h, q.s, k.s, q.d, v.d};

  // The tensors are decoded to doubles: refuse what cannot fit before allocating (a sparse file of
  // a few TiB maps fine; its decoded copy would throw bad_alloc, or abort under ASan).
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  const std::size_t memory = pages > 0 && page_size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size) : 0;
  auto read = [&](const raw_tensor& t, const dims4& d, bool output) {
    tensor_info info;
    info.name = t.name;
    info.dtype = elem_name(t.type);
    info.shape = t.shape;
    info.elements = d.b * d.h * d.s * d.d;
    if (memory != 0 && info.elements > memory / sizeof(double))
      fail(src, "tensor '" + t.name + "' of shape " + shape_text(t.shape) + " is too large: " +
                    std::to_string(info.elements) + " elements need more than the machine's " + std::to_string(memory) +
                    " bytes of memory as f64");
    std::vector<double> values = decode_bhsd(t, d, L, info.nonfinite);
    info.format = output ? value_format_of(t, values, opt) : elem_format(t.type);
    out.tensors[t.name] = info;
    return values;
  };
  auto same_as = [&](const raw_tensor& t, const dims4& want, const std::string& like) {
    const dims4 d = dims_of(src, t, L);
    if (d.b != want.b || d.h != want.h || d.s != want.s || d.d != want.d) {
      if (like == "o" && !ro)  // inputs only: `do` against the shape q and v imply
        fail(src, "shape mismatch: tensor '" + t.name + "' " + shape_text(t.shape) + " must be " +
                      (L == layout::bhsd ? "[batch, heads, seq_q, dim_v] = " : "[batch, seq_q, heads, dim_v] = ") +
                      shape_text(L == layout::bhsd ? std::vector<std::size_t>{want.b, want.h, want.s, want.d}
                                                   : std::vector<std::size_t>{want.b, want.s, want.h, want.d}));
      fail(src, "shape mismatch: tensor '" + t.name + "' " + shape_text(t.shape) + " must have the shape of '" + like +
                    "' " + shape_text(store.need(like).shape));
    }
    return d;
  };

  out.inputs.q = read(rq, q, false);
  out.inputs.k = read(rk, k, false);
  out.inputs.v = read(rv, v, false);
  if (ro) out.o = read(*ro, o, true);
  if (const raw_tensor* t = store.find("do")) out.inputs.d_o = read(*t, same_as(*t, o, "o"), false);
  if (opt.inputs_only) return out;
  for (const char* name : {"dq", "dk", "dv"}) {
    const raw_tensor* t = store.find(name);
    if (!t) continue;
    if (out.inputs.d_o.empty())
      fail(src, std::string("tensor '") + name + "' needs the upstream gradient 'do', which is missing");
    const std::string like = name == std::string("dq") ? "q" : name == std::string("dk") ? "k" : "v";
    const dims4 want = like == "q" ? q : like == "k" ? k : v;
    std::vector<double> values = read(*t, same_as(*t, want, like), true);
    (like == "q" ? out.dq : like == "k" ? out.dk : out.dv) = std::move(values);
  }
  if (const raw_tensor* t = store.find("lse")) {
    if (t->shape.size() != 3 || t->shape[0] != q.b || t->shape[1] != q.h || t->shape[2] != q.s)
      fail(src, "shape mismatch: tensor 'lse' " + shape_text(t->shape) + " must be [batch, heads, seq_q] = [" +
                    std::to_string(q.b) + ", " + std::to_string(q.h) + ", " + std::to_string(q.s) + "]");
    tensor_info info;
    info.name = "lse";
    info.dtype = elem_name(t->type);
    info.format = elem_format(t->type);
    info.shape = t->shape;
    info.elements = q.b * q.h * q.s;
    out.lse.resize(info.elements);
    const std::size_t item = elem_size(t->type);
    for (std::size_t i = 0; i < info.elements; ++i) {
      out.lse[i] = decode(t->bytes.data() + i * item, t->type, t->big_endian);
      if (!std::isfinite(out.lse[i])) ++info.nonfinite;
    }
    out.tensors["lse"] = info;
  }
  return out;
}
}  // namespace

}  // namespace tiebreak::audit
