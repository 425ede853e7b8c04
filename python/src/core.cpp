// SPDX-License-Identifier: Apache-2.0
/// @file `tiebreak._core`: the nanobind extension over the core, tiebreak::host, ::audit and ::analysis.
///
/// Thin by design: every rounding is the core's round_pack (or the host library's bulk path, which
/// is pinned to it for all 2^32 inputs), every message is the CLI's (src/cli/common.cpp is compiled
/// into this module), and every JSON object is the one the CLI writes. The Python layer
/// (python/tiebreak/_api.py) converts inputs and names the results; docs/python.md.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attention.hpp"  // the attention kernels' host twin (attention.cpp)
#include "common.hpp"  // src/cli: format_by_name, mode_by_name, compare (the CLI's messages and reports)
#include "tiebreak/analysis/align.hpp"
#include "tiebreak/analysis/bias.hpp"
#include "tiebreak/analysis/json.hpp"
#include "tiebreak/analysis/spectral.hpp"
#include "tiebreak/audit/audit.hpp"
#include "tiebreak/audit/inputs.hpp"
#include "tiebreak/emu/mma.hpp"
#include "tiebreak/emu/sum.hpp"
#include "tiebreak/fp/names.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"
#include "tiebreak/host/bulk_convert.hpp"
#include "tiebreak/host/emu_gemm.hpp"
#include "tiebreak/host/exact.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace tiebreak::python {
namespace {

template <class T>
using in_array = nb::ndarray<const T, nb::c_contig, nb::device::cpu>;
template <class T>
using out_array = nb::ndarray<nb::numpy, T>;

/// A heap buffer for a result array, released to numpy. Large buffers are 2 MiB aligned and marked
/// for transparent huge pages, as numpy does for its own arrays: a fresh 64 MiB result otherwise
/// costs ~16 Ki page faults per call, which made a 16 Mi-element rounding 17x slower than the same
/// rounding of 1 Mi elements per element (docs/python.md, "Speed").
inline void* allocate_result(std::size_t bytes) {
  constexpr std::size_t huge = std::size_t{2} << 20;
  void* p = nullptr;
  if (bytes >= 2 * huge) {
    if (posix_memalign(&p, huge, (bytes + huge - 1) / huge * huge) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  } else {
    p = std::malloc(bytes == 0 ? 1 : bytes);
    if (!p) throw std::bad_alloc();
  }
  return p;
}

/// A new numpy array of `shape` owning a heap buffer (freed when the array is).
template <class T>
struct out_buffer {
  T* data = nullptr;
  std::vector<std::size_t> shape;
  std::size_t size = 0;

  explicit out_buffer(std::vector<std::size_t> s) : shape(std::move(s)) {
    size = 1;
    for (std::size_t d : shape) size *= d;
    data = static_cast<T*>(allocate_result(size * sizeof(T)));
  }
  out_buffer(const out_buffer&) = delete;
  out_buffer& operator=(const out_buffer&) = delete;
  ~out_buffer() { std::free(data); }
  T* get() const { return data; }
  /// Hands the buffer to numpy. Call with the GIL held.
  nb::object release() {
    T* p = std::exchange(data, nullptr);
    nb::capsule owner(p, [](void* q) noexcept { std::free(q); });
    return out_array<T>(p, shape.size(), shape.data(), owner).cast();
  }
};

/// Runs fn(begin, end) over [0, n) on up to `threads` threads (0: all cores) in chunks of at least
/// 64 Ki elements. Every result depends on the element index only, never on the split.
template <class Fn>
void parallel_for(std::size_t n, unsigned threads, Fn&& fn) {
  constexpr std::size_t min_chunk = std::size_t{1} << 16;
  unsigned t = threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads;
  t = static_cast<unsigned>(std::min<std::size_t>(t, (n + min_chunk - 1) / min_chunk));
  if (t <= 1) {
    fn(std::size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const std::size_t chunk = (n + t - 1) / t;
  for (unsigned i = 0; i < t; ++i) {
    const std::size_t b = i * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  for (std::thread& th : pool) th.join();
}

std::vector<std::size_t> shape_of(std::size_t ndim, const auto& a) {
  std::vector<std::size_t> s(ndim);
  for (std::size_t i = 0; i < ndim; ++i) s[i] = a.shape(i);
  return s;
}

// --- round ------------------------------------------------------------------------------------

struct round_args {
  format_desc to;
  round_mode mode = round_mode::rne;
  std::uint64_t seed = 0, stream = 0;
  convert_options conv;
};

/// Signed error in ulps of the result grid, as `tiebreak round` reports it: NaN where no error is
/// defined (NaN input or result), -+inf for an infinite input saturated to a finite result (it
/// lies infinitely far toward zero), otherwise round_result::error_ulps (exact for these inputs,
/// rounded once to double).
double error_ulps_of(const format_desc& to, const round_result& r, double x) noexcept {
  if (std::isnan(x) || to.is_nan(r.bits)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(x)) {
    if (to.is_inf(r.bits)) return 0.0;
    return x > 0 ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  return r.error_ulps();
}

template <class In, class Bits, class Val>
void round_range(const round_args& a, const In* x, std::size_t begin, std::size_t end, Bits* bits, Val* values,
                 double* err, std::uint8_t* flags) noexcept {
  for (std::size_t i = begin; i < end; ++i) {
    // Element i of the array is rounding number i of stream `stream`: the CLI's numbering.
    const rounding r{a.mode, a.mode == round_mode::sr ? philox_word(a.seed, a.stream, i) : 0u};
    round_result res;
    if constexpr (sizeof(In) == 4) res = f32_bits_to(a.to, f32_to_bits(x[i]), r, a.conv);
    else res = f64_bits_to(a.to, f64_to_bits(x[i]), r, a.conv);
    bits[i] = static_cast<Bits>(res.bits);
    values[i] = static_cast<Val>(to_double(a.to, res.bits));  // exact: Val holds every value of `to`
    if (err) err[i] = error_ulps_of(a.to, res, static_cast<double>(x[i]));
    if (flags) flags[i] = res.flags;
  }
}

/// philox_word(seed, stream, i) for i in [begin, end) into out[i - begin]: the same Philox blocks
/// philox_word computes, one per four consecutive words instead of one per word.
void philox_words(std::uint64_t seed, std::uint64_t stream, std::size_t begin, std::size_t end, std::uint32_t* out) noexcept {
  const philox gen{seed};
  for (std::size_t i = begin; i < end;) {
    const std::uint64_t block = i >> 2;
    const philox_block r = gen(static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                               static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32));
    for (; i < end && (i >> 2) == block; ++i) out[i - begin] = r.w[i & 3];
  }
}

/// The bulk path (tiebreak::host::convert_f32_to_bf16*): bits only, for f32 -> bf16 with default
/// options; equal to round_pack for every input (tests/host/fp/fast_exhaustive_test.cpp).
void round_bf16_bulk(const round_args& a, const float* x, std::size_t begin, std::size_t end, std::uint16_t* bits,
                     float* values) {
  const auto* in = reinterpret_cast<const std::uint32_t*>(x);
  if (a.mode == round_mode::sr) {
    std::vector<std::uint32_t> words(end - begin);
    philox_words(a.seed, a.stream, begin, end, words.data());
    host::convert_f32_to_bf16_sr(in + begin, words.data(), bits + begin, end - begin);
  } else {
    host::convert_f32_to_bf16(in + begin, bits + begin, end - begin, a.mode);
  }
  // A bf16 encoding is the upper half of the f32 encoding of the same value (exact widening).
  for (std::size_t i = begin; i < end; ++i) values[i] = bits_to_f32(std::uint32_t{bits[i]} << 16);
}

template <class In, class Bits, class Val>
nb::tuple round_typed(const round_args& a, const In* x, const std::vector<std::size_t>& shape, bool errors,
                      unsigned threads) {
  out_buffer<Bits> bits(shape);
  out_buffer<Val> values(shape);
  std::optional<out_buffer<double>> err;
  std::optional<out_buffer<std::uint8_t>> flags;
  if (errors) {
    err.emplace(shape);
    flags.emplace(shape);
  }
  const std::size_t n = bits.size;
  {
    nb::gil_scoped_release release;
    constexpr bool bulk_types = std::is_same_v<In, float> && std::is_same_v<Bits, std::uint16_t> && std::is_same_v<Val, float>;
    const bool default_options = !a.conv.saturate && !a.conv.flush_input && !a.conv.flush_output &&
                                 a.conv.nan == nan_policy::canonical;
    bool bulk = false;
    if constexpr (bulk_types) bulk = !errors && emu::same_format(a.to, formats::bf16) && default_options;
    if (bulk) {
      if constexpr (bulk_types)
        parallel_for(n, threads, [&](std::size_t b, std::size_t e) { round_bf16_bulk(a, x, b, e, bits.get(), values.get()); });
    } else {
      parallel_for(n, threads, [&](std::size_t b, std::size_t e) {
        round_range<In, Bits, Val>(a, x, b, e, bits.get(), values.get(), err ? err->get() : nullptr,
                                   flags ? flags->get() : nullptr);
      });
    }
  }
  nb::object e = err ? err->release() : nb::none();
  nb::object f = flags ? flags->release() : nb::none();
  return nb::make_tuple(values.release(), bits.release(), e, f);
}

template <class In>
nb::tuple round_array(in_array<In> x, const std::string& to, const std::string& mode, std::uint64_t seed,
                      std::uint64_t stream, bool saturate, bool errors, unsigned threads) {
  round_args a;
  a.to = cli::format_by_name("to", to);
  a.mode = cli::mode_by_name("mode", mode);
  a.seed = seed;
  a.stream = stream;
  a.conv.saturate = saturate;
  const std::vector<std::size_t> shape = shape_of(x.ndim(), x);
  const In* p = x.data();
  const bool wide = emu::same_format(a.to, formats::f64);
  switch (a.to.storage_bits()) {
    case 8: return round_typed<In, std::uint8_t, float>(a, p, shape, errors, threads);
    case 16: return round_typed<In, std::uint16_t, float>(a, p, shape, errors, threads);
    case 32: return round_typed<In, std::uint32_t, float>(a, p, shape, errors, threads);
    default:
      if (wide) return round_typed<In, std::uint64_t, double>(a, p, shape, errors, threads);
      throw std::invalid_argument(fmt::format("to: format '{}' has {} storage bits", to, a.to.storage_bits()));
  }
}

// --- sum --------------------------------------------------------------------------------------

emu::sum_order order_by_name(const std::string& name) {
  if (name == "sequential") return emu::sum_order::sequential;
  if (name == "pairwise") return emu::sum_order::pairwise;
  if (name == "blocked") return emu::sum_order::blocked;
  throw std::invalid_argument(fmt::format("order: unknown order '{}' (expected one of sequential pairwise blocked)", name));
}

/// Row sums of x [rows, n] as `tiebreak add` computes them: each value rounded into `format` (row r
/// draws stream 2r), loaded into `accumulate`, added in `order` (stream 2r + 1), narrowed back.
/// The error is against the exact sum of the values as read in `format` (host::rational).
nb::dict sum_rows(in_array<double> x, const std::string& format, const std::optional<std::string>& accumulate,
                  const std::string& mode, const std::string& order, std::size_t block, std::uint64_t seed,
                  bool saturate, unsigned threads) {
  if (x.ndim() != 2) throw std::invalid_argument("sum: x must be two-dimensional [rows, values]");
  const format_desc fmt_in = cli::format_by_name("format", format);
  const format_desc acc = accumulate ? cli::format_by_name("accumulate", *accumulate) : fmt_in;
  const round_mode m = cli::mode_by_name("mode", mode);
  const emu::sum_order ord = order_by_name(order);
  if (ord == emu::sum_order::blocked && block == 0) throw std::invalid_argument("block: must be at least 1");
  const std::size_t rows = x.shape(0), n = x.shape(1);
  if (n < 1) throw std::invalid_argument("sum: needs at least one value per row");
  convert_options conv;
  conv.saturate = saturate;
  out_buffer<std::uint64_t> bits({rows}), accum_bits({rows});
  out_buffer<double> values({rows}), err({rows});
  out_buffer<std::uint8_t> flags({rows});
  const double* px = x.data();
  {
    nb::gil_scoped_release release;
    const bool widen = !emu::same_format(acc, fmt_in);
    // One row per task; the exact total dominates the cost (rational additions).
    const unsigned t = threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads;
    std::vector<std::thread> pool;
    std::exception_ptr failure;
    std::mutex failure_mutex;
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      std::vector<std::uint64_t> xs(n);
      for (std::size_t r; (r = next++) < rows;) {
        try {
          for (std::size_t i = 0; i < n; ++i) {
            const rounding rr{m, m == round_mode::sr ? philox_word(seed, 2 * r, i) : 0u};
            xs[i] = f64_bits_to(fmt_in, f64_to_bits(px[r * n + i]), rr, conv).bits;
          }
          emu::sum_config cfg;
          cfg.input = fmt_in;
          cfg.accum = acc;
          cfg.output = fmt_in;
          cfg.accum_rounding = rounding{m};
          cfg.output_rounding = rounding{m};
          cfg.options = conv;
          cfg.order = ord;
          cfg.block = block;
          if (m == round_mode::sr) cfg.random = sr_source::philox(seed, 2 * r + 1);
          std::uint8_t last_add_flags = 0;
          const emu::sum_result res = emu::sum(cfg, xs.data(), n, [&](const emu::sum_step& st) {
            if (st.kind == emu::step_kind::add) last_add_flags = st.op.round.flags;
          });
          bits.get()[r] = res.bits;
          accum_bits.get()[r] = res.accum_bits;
          values.get()[r] = to_double(fmt_in, res.bits);
          flags.get()[r] = widen ? res.output.flags : last_add_flags;
          // The exact total of the values as read (the CLI's `add` report).
          bool nan = false;
          int inf = 0;  // +1, -1, or 2 for both signs
          host::rational total = 0;
          for (std::size_t i = 0; i < n; ++i) {
            const host::exact_number xi = host::from_bits(fmt_in, xs[i]);
            if (xi.cls == value_class::nan) nan = true;
            else if (xi.cls == value_class::inf) inf = (inf == 0 || inf == (xi.sign ? -1 : 1)) ? (xi.sign ? -1 : 1) : 2;
            else if (xi.cls == value_class::finite) total += xi.value;
          }
          host::exact_number exact;
          if (nan || inf == 2) exact = host::exact_number{value_class::nan, false, 0, make_nan()};
          else if (inf != 0) exact = host::exact_number{value_class::inf, inf < 0, 0, make_inf(inf < 0)};
          else exact = host::from_rational(total);
          round_result grid = round_pack(fmt_in, exact.window, rne_t{}, conv);  // the result grid at the total
          grid.bits = res.bits;
          const cli::error_report e = cli::compare(fmt_in, grid, exact);
          err.get()[r] = !e.known ? std::numeric_limits<double>::quiet_NaN()
                         : e.infinite ? (e.sign > 0 ? 1.0 : -1.0) * std::numeric_limits<double>::infinity()
                                      : host::to_double(e.ulps);
        } catch (...) {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
          return;
        }
      }
    };
    const unsigned count = static_cast<unsigned>(std::min<std::size_t>(t, rows));
    for (unsigned i = 1; i < count; ++i) pool.emplace_back(worker);
    worker();
    for (std::thread& th : pool) th.join();
    if (failure) std::rethrow_exception(failure);
  }
  nb::dict d;
  d["bits"] = bits.release();
  d["value"] = values.release();
  d["accum_bits"] = accum_bits.release();
  d["flags"] = flags.release();
  d["error_ulps"] = err.release();
  d["storage_bits"] = fmt_in.storage_bits();
  d["accum_storage_bits"] = acc.storage_bits();
  return d;
}

// --- mma --------------------------------------------------------------------------------------

constexpr const auto& instr_names = joined_names<emu::all_mma_instrs, emu::mma_instr_name>;

const emu::mma_model_entry& instr_by_name(const std::string& name) {
  emu::mma_instr id{};
  if (!emu::parse_mma_instr(name, id))
    throw std::invalid_argument(fmt::format("instr: unknown instruction '{}' (expected one of {})", name, instr_names.view()));
  return emu::mma_entry(id);
}

nb::list mma_instructions() {
  nb::list out;
  for (const emu::mma_model_entry& e : emu::mma_models) {
    const emu::mma_model& m = e.model;
    nb::dict d;
    d["name"] = std::string(emu::mma_instr_name(e.id));
    d["ptx"] = std::string(e.ptx);
    d["a"] = std::string(m.a_fmt.name);
    d["b"] = std::string(m.b_fmt.name);
    d["c"] = std::string(m.c_fmt.name);
    d["acc"] = std::string(m.acc_fmt.name);
    d["shape"] = nb::make_tuple(m.m, m.n, m.k);
    d["verified"] = emu::mma_unverified(e) == 0;
    d["evidence"] = std::string(e.evidence);
    out.append(d);
  }
  return out;
}

/// Rounds x (row-major doubles) into f under rne, as `tiebreak mma` reads its --a/--b/--c values;
/// returns how many were not exact.
std::size_t encode_rne(const format_desc& f, const double* x, std::size_t n, std::uint32_t* out) {
  std::size_t inexact = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const round_result r = f64_bits_to(f, f64_to_bits(x[i]), rne_t{});
    out[i] = static_cast<std::uint32_t>(r.bits);
    if (r.inexact()) ++inexact;
  }
  return inexact;
}

nb::dict mma_gemm(const std::string& instr, in_array<double> a, in_array<double> b, std::optional<in_array<double>> c) {
  const emu::mma_model_entry& entry = instr_by_name(instr);
  const emu::mma_model& m = entry.model;
  if (a.ndim() != 2 || b.ndim() != 2) throw std::invalid_argument("mma: a and b must be two-dimensional");
  const std::size_t M = a.shape(0), K = a.shape(1), N = b.shape(1);
  if (b.shape(0) != K)
    throw std::invalid_argument(fmt::format("mma: a is [{}, {}] but b is [{}, {}] (inner sizes differ)", M, K, b.shape(0), N));
  if (K == 0 || K % static_cast<std::size_t>(m.k) != 0)
    throw std::invalid_argument(fmt::format("mma: K = {} must be a positive multiple of {}'s k = {}", K, instr, m.k));
  if (c && (c->ndim() != 2 || c->shape(0) != M || c->shape(1) != N))
    throw std::invalid_argument(fmt::format("mma: c must be [{}, {}]", M, N));
  if (M > (1u << 30) || N > (1u << 30) || K > (1u << 30)) throw std::invalid_argument("mma: sizes beyond 2^30");
  out_buffer<std::uint32_t> bits({M, N});
  out_buffer<double> values({M, N});
  std::size_t inexact = 0;
  {
    nb::gil_scoped_release release;
    std::vector<std::uint32_t> ea(M * K), eb(K * N), ec(M * N, 0);
    inexact += encode_rne(m.a_fmt, a.data(), M * K, ea.data());
    inexact += encode_rne(m.b_fmt, b.data(), K * N, eb.data());
    if (c) inexact += encode_rne(m.c_fmt, c->data(), M * N, ec.data());
    else {
      const std::uint32_t zero = static_cast<std::uint32_t>(f64_bits_to(m.c_fmt, 0, rne_t{}).bits);
      std::fill(ec.begin(), ec.end(), zero);
    }
    emu::gemm(m, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), ea.data(), eb.data(), ec.data(), bits.get());
    for (std::size_t i = 0; i < M * N; ++i) values.get()[i] = to_double(m.c_fmt, bits.get()[i]);
  }
  nb::dict d;
  d["bits"] = bits.release();
  d["value"] = values.release();
  d["inputs_rounded"] = inexact;
  d["format"] = std::string(m.c_fmt.name);
  d["verified"] = emu::mma_unverified(entry) == 0;
  return d;
}

// --- audit ------------------------------------------------------------------------------------

using any_array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

std::string dtype_name(const any_array& a) {
  const nb::dlpack::dtype t = a.dtype();
  if (t.lanes == 1) {
    if (t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float)) {
      if (t.bits == 16) return "f16";
      if (t.bits == 32) return "f32";
      if (t.bits == 64) return "f64";
    }
    if (t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat) && t.bits == 16) return "bf16";
  }
  return fmt::format("code {} with {} bits", int(t.code), int(t.bits));
}

/// The audit of `tiebreak audit` on arrays: returns its JSON report (schema tiebreak.audit/2) as text.
std::string audit_arrays(const std::map<std::string, any_array>& tensors, const std::string& layout, bool causal,
                         std::optional<double> scale, const std::string& out_format, double alpha, double min_effect,
                         double tie_tolerance, unsigned threads, bool certify, const std::string& device) {
  if (layout != "bhsd" && layout != "bshd")
    throw std::invalid_argument(fmt::format("--layout: '{}' not in {{bhsd, bshd}}", layout));
  if (device != "cpu" && device != "cuda") throw std::invalid_argument(fmt::format("--device: '{}' not in {{cpu, cuda}}", device));
  for (double v : {alpha, min_effect, tie_tolerance})
    if (!std::isfinite(v)) throw std::invalid_argument("alpha, min_effect and tie_tolerance must be finite");
  if (scale && !std::isfinite(*scale)) throw std::invalid_argument("--scale: not a finite number");
  if (!(alpha >= 1e-300 && alpha <= 0.5)) throw std::invalid_argument("--alpha: must lie in [1e-300, 0.5]");
  if (min_effect < 0 || tie_tolerance < 0) throw std::invalid_argument("--min-effect and --tie-tolerance must be non-negative");
  std::map<std::string, audit::tensor_buffer> buffers;
  for (const auto& [name, arr] : tensors) {
    audit::tensor_buffer b;
    b.dtype = dtype_name(arr);
    b.shape = shape_of(arr.ndim(), arr);
    b.bytes = std::span<const std::byte>(static_cast<const std::byte*>(arr.data()), arr.size() * arr.itemsize());
    buffers.emplace(name, std::move(b));
  }
  audit::load_options lo;
  lo.tensor_layout = layout == "bshd" ? audit::layout::bshd : audit::layout::bhsd;
  if (out_format != "auto") {
    format_id id{};
    if (!parse_format(out_format, id)) throw std::invalid_argument("--out-format: unknown format '" + out_format + "'");
    lo.value_format = desc_of(id);
  }
  audit::audit_options o;
  o.causal = causal;
  o.scale = scale;
  o.threads = threads;
  o.alpha = alpha;
  o.min_effect_ulps = min_effect;
  o.tie_tolerance = tie_tolerance;
  o.certify = certify;
  o.device = device == "cuda" ? audit::audit_options::device_kind::cuda : audit::audit_options::device_kind::cpu;
  nb::gil_scoped_release release;
  if (device == "cuda") {
    if (const std::string why = reference::device_unavailable_reason(); !why.empty())
      throw std::runtime_error("--device cuda: " + why + "; use --device cpu");
  }
  const audit::kernel_dump dump = audit::load_kernel_dump(buffers, "arrays", lo);
  const audit::audit_report r = audit::run_audit(dump, o);
  return audit::to_json(r).dump();
}

// --- analysis ---------------------------------------------------------------------------------

template <class T>
analysis::matrix_view<T> view_of(const nb::ndarray<const T, nb::ndim<2>, nb::device::cpu>& m) {
  analysis::matrix_view<T> v;
  v.data = m.data();
  v.rows = static_cast<analysis::index>(m.shape(0));
  v.cols = static_cast<analysis::index>(m.shape(1));
  v.row_stride = m.stride(0);
  v.col_stride = m.stride(1);
  return v;
}

Eigen::MatrixXd to_eigen(const nb::ndarray<const double, nb::ndim<2>, nb::device::cpu>& m) {
  Eigen::MatrixXd out(static_cast<Eigen::Index>(m.shape(0)), static_cast<Eigen::Index>(m.shape(1)));
  for (std::size_t i = 0; i < m.shape(0); ++i)
    for (std::size_t j = 0; j < m.shape(1); ++j)
      out(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = m.data()[i * m.stride(0) + j * m.stride(1)];
  return out;
}

using mat_d = nb::ndarray<const double, nb::ndim<2>, nb::device::cpu>;
using mat_f = nb::ndarray<const float, nb::ndim<2>, nb::device::cpu>;
using vec_d = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

nb::object vector_out(const Eigen::VectorXd& v) {
  out_buffer<double> b({static_cast<std::size_t>(v.size())});
  std::copy(v.data(), v.data() + v.size(), b.get());
  return b.release();
}

analysis::spectral_options spectral_options_of(const std::string& method, double rel_tol, int max_iterations,
                                               std::uint64_t seed, int threads) {
  analysis::spectral_options o;
  if (method == "power") o.method = analysis::spectral_method::power;
  else if (method == "lanczos") o.method = analysis::spectral_method::lanczos;
  else throw std::invalid_argument(fmt::format("method: unknown method '{}' (expected power or lanczos)", method));
  if (!(rel_tol > 0) || !std::isfinite(rel_tol)) throw std::invalid_argument("rel_tol: must be a positive finite number");
  if (max_iterations < 1) throw std::invalid_argument("max_iterations: must be at least 1");
  o.rel_tol = rel_tol;
  o.max_iterations = max_iterations;
  o.seed = seed;
  o.threads = std::max(1, threads);
  return o;
}

template <class T>
std::pair<std::string, std::pair<nb::object, nb::object>> spectral_norm_of(const nb::ndarray<const T, nb::ndim<2>, nb::device::cpu>& m,
                                                                           const analysis::spectral_options& o) {
  analysis::spectral_norm_result r;
  {
    nb::gil_scoped_release release;
    r = analysis::spectral_norm(view_of(m), o);
  }
  nlohmann::json j = r;
  return {j.dump(), {vector_out(r.left), vector_out(r.right)}};
}

/// Spectral norms of many slices per step, each warm-started from its own previous vector.
class spectral_tracker_py {
 public:
  spectral_tracker_py(const std::string& method, double rel_tol, int max_iterations, int threads)
      : tracker_(make_options(method, rel_tol, max_iterations), std::max(1, threads)) {}
  std::string push(const std::vector<mat_f>& slices) {
    std::vector<analysis::matrix_view<float>> views;
    for (const mat_f& s : slices) views.push_back(view_of(s));
    nb::gil_scoped_release release;
    nlohmann::json j = tracker_.push(views);
    return j.dump();
  }
  std::string push_f64(const std::vector<mat_d>& slices) {
    std::vector<analysis::matrix_view<double>> views;
    for (const mat_d& s : slices) views.push_back(view_of(s));
    nb::gil_scoped_release release;
    nlohmann::json j = tracker_.push(views);
    return j.dump();
  }
  std::size_t steps() const { return tracker_.steps(); }

 private:
  static analysis::spectral_options make_options(const std::string& method, double rel_tol, int max_iterations) {
    analysis::spectral_options o = spectral_options_of(method, rel_tol, max_iterations, analysis::spectral_options{}.seed, 1);
    o.compute_vectors = false;
    return o;
  }
  analysis::spectral_tracker tracker_;
};

class update_tracker_py {
 public:
  explicit update_tracker_py(long k) : tracker_(check_k(k)) {}
  std::string push(const mat_d& m) {
    const Eigen::MatrixXd e = to_eigen(m);
    nb::gil_scoped_release release;
    nlohmann::json j = tracker_.push(e);
    return j.dump();
  }
  std::size_t steps() const { return tracker_.steps(); }

 private:
  static analysis::index check_k(long k) {
    if (k < 1) throw std::invalid_argument("k: must be at least 1");
    return static_cast<analysis::index>(k);
  }
  analysis::update_alignment_tracker tracker_;
};

}  // namespace
}  // namespace tiebreak::python

NB_MODULE(_core, m) {
  using namespace tiebreak;
  using namespace tiebreak::python;
  m.doc() = "tiebreak's compiled core: bit-exact rounding, emulated sums and MMA, the attention audit and "
            "the analysis library on numpy arrays. Use the functions of the `tiebreak` package; this module "
            "is its implementation (docs/python.md).";

  m.def("formats", [] {
    std::vector<std::string> out;
    for (format_id id : all_format_ids) out.emplace_back(desc_of(id).name);
    return out;
  }, "The format names, in the core's order: f64 f32 tf32 bf16 f16 e4m3 e5m2.");
  m.def("modes", [] {
    std::vector<std::string> out;
    for (round_mode md : all_round_modes) out.emplace_back(to_string(md));
    return out;
  }, "The rounding-mode names: rne rna rz ru rd rto sr.");
  m.def("storage_bits", [](const std::string& f) { return cli::format_by_name("format", f).storage_bits(); },
        "format"_a, "Bits of one encoding of `format` (the width of the `bits` arrays: 8, 16, 32 or 64).");

  static const char* round_doc =
      "Rounds every element of a C-contiguous float32/float64 array once, from its exact value, into\n"
      "`to` under `mode` (round_pack, the core's one rounding routine). Returns (values, bits,\n"
      "error_ulps, flags): values as float32 (float64 for f64), exact; bits as uint8/16/32/64;\n"
      "error_ulps = (result - exact) / ulp of the result (float64; NaN for NaN, -+inf for a saturated\n"
      "infinity); flags as uint8 (1 inexact, 2 underflow, 4 overflow, 8 invalid). Mode sr takes word\n"
      "philox_word(seed, stream, i) for element i (the CLI's numbering). errors=False returns None for\n"
      "the last two and takes the host library's bulk path where one exists (f32 -> bf16, default\n"
      "options). NaN results are the canonical NaN. The GIL is released; threads=0 uses every core.";
  m.def("round", &round_array<float>, "x"_a.noconvert(), "to"_a, "mode"_a = "rne", "seed"_a = 0, "stream"_a = 0,
        "saturate"_a = false, "errors"_a = true, "threads"_a = 0, round_doc);
  m.def("round", &round_array<double>, "x"_a.noconvert(), "to"_a, "mode"_a = "rne", "seed"_a = 0, "stream"_a = 0,
        "saturate"_a = false, "errors"_a = true, "threads"_a = 0, round_doc);

  m.def("sum", &sum_rows, "x"_a, "format"_a, "accumulate"_a = nb::none(), "mode"_a = "rne", "order"_a = "sequential",
        "block"_a = 64, "seed"_a = 0, "saturate"_a = false, "threads"_a = 0,
        "Row sums of x [rows, n] (float64, C order) as `tiebreak add` computes them: each value rounded\n"
        "into `format`, the partial sums carried in `accumulate` (default: `format`) in `order`\n"
        "(sequential, pairwise, blocked with `block`), the total narrowed to `format` (emu::sum). Mode sr:\n"
        "row r rounds its inputs with stream 2r and its steps with stream 2r + 1 (one row: the CLI's\n"
        "streams 0 and 1). Returns a dict of per-row arrays: bits, accum_bits (uint64), value, error_ulps\n"
        "(against the exact sum of the values as read, float64), flags (uint8).");

  m.def("mma_instructions", &mma_instructions,
        "The modelled tensor-core instructions (`tiebreak mma --list`): name, ptx, operand formats, shape, "
        "whether every parameter was verified on hardware, and the evidence.");
  m.def("mma", &mma_gemm, "instr"_a, "a"_a, "b"_a, "c"_a = nb::none(),
        "D = A B + C on the emulated tensor core `instr` (emu::gemm: one instruction per k-chunk in\n"
        "order, bit-identical to tiebreak::gpu::mma_gemm). a [M, K], b [K, N], c [M, N] float64 in C\n"
        "order, each rounded (rne) into the instruction's operand formats first, as `tiebreak mma`\n"
        "does; K must be a multiple of the instruction's k. Returns a dict: bits (uint32), value\n"
        "(float64), inputs_rounded (how many inputs were not exact), format, verified.");

  m.def("audit", &audit_arrays, "tensors"_a, "layout"_a = "bhsd", "causal"_a = false, "scale"_a = nb::none(),
        "out_format"_a = "auto", "alpha"_a = 1e-3, "min_effect"_a = 0.05, "tie_tolerance"_a = 1e-3, "threads"_a = 0,
        "certify"_a = false, "device"_a = "cpu",
        "`tiebreak audit` on arrays: `tensors` maps q, k, v, o [, do, dq, dk, dv, lse] to C-contiguous CPU\n"
        "arrays (numpy or any __dlpack__ producer: bf16, f16, f32, f64), read in place. Returns the JSON\n"
        "report (schema tiebreak.audit/2, docs/audit.md) as text. Bad input raises the CLI's message.");

  bind_attention_twin(m);

  m.def("bias_summary", [](const vec_d& x) {
    analysis::running_moments mo;
    mo.push(std::span<const double>(x.data(), x.shape(0)));
    nlohmann::json j = analysis::summarize(mo);
    return j.dump();
  }, "x"_a, "Moments, t test and exact sign test of signed errors (analysis::summarize), as JSON text.");
  m.def("block_bootstrap", [](const vec_d& x, std::size_t block_length, std::size_t resamples, double confidence,
                              std::uint64_t seed) {
    if (resamples < 1) throw std::invalid_argument("resamples: must be at least 1");
    if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("confidence: must lie in (0, 1)");
    analysis::bootstrap_options o{block_length, resamples, confidence, seed};
    analysis::bootstrap_result r;
    {
      nb::gil_scoped_release release;
      r = analysis::block_bootstrap_mean(std::span<const double>(x.data(), x.shape(0)), o);
    }
    nlohmann::json j = r;
    return j.dump();
  }, "x"_a, "block_length"_a = 0, "resamples"_a = 2000, "confidence"_a = 0.95, "seed"_a = 20251001,
     "Circular moving-block bootstrap of the mean (analysis::block_bootstrap_mean), as JSON text.");
  m.def("spectral_norm", [](const mat_d& mat, const std::string& method, double rel_tol, int max_iterations,
                            std::uint64_t seed, int threads) {
    return spectral_norm_of<double>(mat, spectral_options_of(method, rel_tol, max_iterations, seed, threads));
  }, "m"_a, "method"_a = "lanczos", "rel_tol"_a = 1e-6, "max_iterations"_a = 500, "seed"_a = 0x7469656272656bull,
     "threads"_a = 1, "Largest singular value (analysis::spectral_norm, any strides): (JSON text, (left, right)).");
  m.def("spectral_norm", [](const mat_f& mat, const std::string& method, double rel_tol, int max_iterations,
                            std::uint64_t seed, int threads) {
    return spectral_norm_of<float>(mat, spectral_options_of(method, rel_tol, max_iterations, seed, threads));
  }, "m"_a, "method"_a = "lanczos", "rel_tol"_a = 1e-6, "max_iterations"_a = 500, "seed"_a = 0x7469656272656bull,
     "threads"_a = 1, "Largest singular value of a float32 matrix (arithmetic in double).");
  m.def("exact_spectrum", [](const mat_d& mat) {
    analysis::spectrum_summary s;
    {
      nb::gil_scoped_release release;
      s = analysis::exact_spectrum(view_of(mat));
    }
    nlohmann::json j = s;
    return std::make_pair(j.dump(), vector_out(s.singular_values));
  }, "m"_a, "Singular values by BDCSVD and the norms and ranks derived from them: (JSON text, singular values).");
  m.def("frobenius_cosine", [](const mat_d& a, const mat_d& b) { return analysis::frobenius_cosine(to_eigen(a), to_eigen(b)); },
        "a"_a, "b"_a, "<A, B>_F / (|A|_F |B|_F), in [-1, 1].");
  m.def("principal_angles", [](const mat_d& a, const mat_d& b) {
    const analysis::principal_angles_result r = analysis::principal_angles(to_eigen(a), to_eigen(b));
    nlohmann::json j = r;
    return std::make_pair(j.dump(), vector_out(r.angles));
  }, "a"_a, "b"_a, "Principal angles between the column spaces of a and b: (JSON text, angles in radians).");
  m.def("subspace_overlap", [](const mat_d& a, const mat_d& b, long k) {
    if (k < 1) throw std::invalid_argument("k: must be at least 1");
    nlohmann::json j = analysis::subspace_overlap(to_eigen(a), to_eigen(b), static_cast<analysis::index>(k));
    return j.dump();
  }, "a"_a, "b"_a, "k"_a, "Overlap of the top-k singular subspaces of two matrices of one shape, as JSON text.");
  m.def("gradient_alignment", [](const mat_d& g, const mat_d& w, long k) {
    if (k < 1) throw std::invalid_argument("k: must be at least 1");
    const analysis::gradient_alignment_result r = analysis::gradient_alignment(to_eigen(g), to_eigen(w), static_cast<analysis::index>(k));
    nlohmann::json j = r;
    return std::make_pair(j.dump(), vector_out(r.per_direction));
  }, "g"_a, "w"_a, "k"_a, "How much of G lies along the top-k singular directions of W: (JSON text, per-direction shares).");
  m.def("rank1_coherence", [](const vec_d& e, const mat_d& u, const mat_d& v) {
    Eigen::VectorXd ev(static_cast<Eigen::Index>(e.shape(0)));
    for (std::size_t i = 0; i < e.shape(0); ++i) ev(static_cast<Eigen::Index>(i)) = e.data()[i];
    if (u.shape(0) != e.shape(0) || v.shape(0) != e.shape(0))
      throw std::invalid_argument("rank1_coherence: e, u and v must have one entry (row) per term");
    nlohmann::json j = analysis::rank1_coherence_of(ev, to_eigen(u), to_eigen(v));
    return j.dump();
  }, "e"_a, "u"_a, "v"_a, "Coherence of S = sum_T e_T u_T v_T^T (u_T, v_T the rows of u and v), as JSON text.");

  nb::class_<spectral_tracker_py>(m, "SpectralTracker",
      "Spectral norms of a fixed list of matrices, one step at a time, each warm-started from its previous "
      "vector (analysis::spectral_tracker).")
      .def(nb::init<const std::string&, double, int, int>(), "method"_a = "power", "rel_tol"_a = 1e-6,
           "max_iterations"_a = 500, "threads"_a = 1)
      .def("push", &spectral_tracker_py::push, "slices"_a, "One step of float32 matrices: JSON text of the batch result.")
      .def("push_f64", &spectral_tracker_py::push_f64, "slices"_a, "One step of float64 matrices.")
      .def_prop_ro("steps", &spectral_tracker_py::steps);
  nb::class_<update_tracker_py>(m, "UpdateAlignmentTracker",
      "Per-step ranks, cosine and top-k subspace overlap of consecutive matrices (analysis::update_alignment_tracker).")
      .def(nb::init<long>(), "k"_a)
      .def("push", &update_tracker_py::push, "m"_a, "One step: JSON text of the update_step.")
      .def_prop_ro("steps", &update_tracker_py::steps);
}
