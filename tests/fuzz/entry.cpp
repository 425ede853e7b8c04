// SPDX-License-Identifier: Apache-2.0
/// @file Fuzz entry points: the real readers and parsers, their documented errors caught, invariants checked.
#include "entry.hpp"

#include <tiebreak/audit/audit.hpp>
#include <tiebreak/audit/inputs.hpp>
#include <tiebreak/fp/format.hpp>
#include <tiebreak/fp/policy.hpp>
#include <tiebreak/fp/round.hpp>
#include <tiebreak/fp/value.hpp>
#include <tiebreak/host/exact.hpp>
#include <tiebreak/io/npy.hpp>
#include <tiebreak/io/safetensors.hpp>

#include "../../src/cli/common.hpp"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#include <unistd.h>

namespace tiebreak::fuzz {
namespace {

namespace fs = std::filesystem;

void check(bool ok, const std::string& what) {
  if (!ok) throw fuzz_invariant_error(what);
}

/// A private scratch folder for the file-based readers, removed at exit. Under /dev/shm when it
/// exists (no disk writes at tens of thousands of inputs per second).
const fs::path& scratch() {
  static const struct holder {
    fs::path dir;
    holder() {
      std::error_code ec;
      const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
      dir = base / ("tiebreak-fuzz-" + std::to_string(::getpid()));
      fs::create_directories(dir);
    }
    ~holder() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } h;
  return h.dir;
}

void write_file(const fs::path& p, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  check(static_cast<bool>(out), "cannot write scratch file " + p.string());
}

template <class T>
void npy_as(std::span<const std::byte> bytes, const io::npy_header& h) {
  try {
    const io::npy_array<T> a = io::parse_npy<T>(bytes, "fuzz.npy");
    check(a.shape == h.shape, "parse_npy: shape differs from the header's");
    check(a.data.size() == h.element_count(), "parse_npy: element count differs from the shape's");
    check(bytes.size() - h.data_offset == a.data.size() * io::npy_item_size(h.dtype),
          "parse_npy: accepted a data size that disagrees with the shape");
  } catch (const io::npy_error&) {
  }
}

void check_dump(const audit::kernel_dump& d) {
  const auto& s = d.inputs.shape;
  check(d.inputs.q.size() == s.q_size() && d.inputs.k.size() == s.k_size() && d.inputs.v.size() == s.v_size(),
        "load_kernel_dump: q/k/v sizes disagree with the shape");
  check(d.o.size() == s.o_size(), "load_kernel_dump: o size disagrees with the shape");
}

/// Counts the keys of the outermost object (repeats included), independently of parse_safetensors.
struct top_level_keys {
  using json = nlohmann::json;
  int depth = 0;
  bool object = false;
  std::size_t keys = 0;
  std::set<std::string> distinct;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    if (depth++ == 0) object = true;
    return true;
  }
  bool end_object() { return --depth, true; }
  bool start_array(std::size_t) { return ++depth, true; }
  bool end_array() { return --depth, true; }
  bool key(json::string_t& k) {
    if (depth == 1) {
      ++keys;
      distinct.insert(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return false; }
};

}  // namespace

void json_one_input(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::byte> file(8 + size + 256);
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = std::byte{static_cast<unsigned char>((std::uint64_t{size} >> (8 * i)) & 0xff)};
  std::memcpy(file.data() + 8, data, size);
  for (std::size_t i = 0; i < 256; ++i) file[8 + size + i] = std::byte{static_cast<unsigned char>(i * 37 + 11)};
  const std::span<const std::byte> section(file.data() + 8 + size, 256);

  top_level_keys sax;
  const bool valid_json = nlohmann::json::sax_parse(text, &sax);
  std::map<std::string, io::st_tensor> tensors;
  try {
    tensors = io::parse_safetensors(file, "fuzz.json");
  } catch (const io::safetensors_error&) {
    return;
  }
  check(valid_json, "parse_safetensors accepted a header that is not valid JSON");
  check(sax.object, "parse_safetensors accepted a header that is not a JSON object");
  check(sax.keys == sax.distinct.size(), "parse_safetensors accepted a header with a repeated tensor name");
  check(tensors.size() == sax.keys - sax.distinct.count("__metadata__"),
        "parse_safetensors: tensor count differs from the header's keys");
  std::map<std::string, io::st_tensor_data> back;
  for (const auto& [name, t] : tensors) {
    check(sax.distinct.count(name) == 1, "parse_safetensors: tensor '" + name + "' is not a key of the header");
    check(t.data.size() == t.element_count() * io::st_item_size(t.dtype),
          "parse_safetensors: tensor '" + name + "' byte count disagrees with its shape");
    check(t.data.empty() || (t.data.data() >= section.data() && t.data.data() + t.data.size() <= section.data() + section.size()),
          "parse_safetensors: tensor '" + name + "' lies outside the data section");
    back[name] = {t.dtype, t.shape, std::vector<std::byte>(t.data.begin(), t.data.end())};
  }
  // Written back by the encoder and parsed again: the same tensors.
  const std::vector<std::byte> again = io::encode_safetensors(back);
  const auto reread = io::parse_safetensors(again, "fuzz.json (re-encoded)");
  check(reread.size() == tensors.size(), "re-encoded safetensors: tensor count changed");
  for (const auto& [name, t] : reread) {
    const auto it = back.find(name);
    check(it != back.end(), "re-encoded safetensors: unknown tensor '" + name + "'");
    check(t.dtype == it->second.dtype && t.shape == it->second.shape, "re-encoded safetensors: dtype or shape of '" + name + "' changed");
    check(std::equal(t.data.begin(), t.data.end(), it->second.bytes.begin(), it->second.bytes.end()),
          "re-encoded safetensors: bytes of '" + name + "' changed");
  }
}

void npy_one_input(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  io::npy_header h;
  try {
    h = io::parse_npy_header(bytes, "fuzz.npy");
  } catch (const io::npy_error&) {
    // parse_npy must reject what the header parser rejects.
    bool accepted = true;
    try {
      (void)io::parse_npy<double>(bytes, "fuzz.npy");
    } catch (const io::npy_error&) {
      accepted = false;
    }
    check(!accepted, "parse_npy accepted a file whose header parse_npy_header rejects");
    return;
  }
  check(h.data_offset <= size, "parse_npy_header: data offset beyond the file");
  npy_as<float>(bytes, h);
  npy_as<double>(bytes, h);
  // The audit reads .npy folders through its own mmap path: give it the input as all four tensors.
  const fs::path dir = scratch() / "npy";
  fs::create_directories(dir);
  for (const char* n : {"q", "k", "v", "o"}) write_file(dir / (std::string(n) + ".npy"), data, size);
  try {
    check_dump(audit::load_kernel_dump(dir));
  } catch (const audit::input_error&) {
  }
}

void safetensors_one_input(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const auto tensors = io::parse_safetensors(bytes, "fuzz.safetensors");
    for (const auto& [name, t] : tensors) {
      check(t.data.size() == t.element_count() * io::st_item_size(t.dtype),
            "parse_safetensors: tensor '" + name + "' byte count disagrees with its shape");
      check(t.data.empty() || (t.data.data() >= bytes.data() && t.data.data() + t.data.size() <= bytes.data() + size),
            "parse_safetensors: tensor '" + name + "' points outside the input");
    }
  } catch (const io::safetensors_error&) {
    return;
  }
  const fs::path file = scratch() / "fuzz.safetensors";
  write_file(file, data, size);
  for (const audit::layout L : {audit::layout::bhsd, audit::layout::bshd}) {
    try {
      audit::load_options o;
      o.tensor_layout = L;
      check_dump(audit::load_kernel_dump(file, o));
    } catch (const audit::input_error&) {
    }
  }
}

namespace {

/// Bytes of `n` elements of dtype `t` from the cycled input bits (zeros when there are none).
std::vector<std::byte> cycled_bytes(std::span<const std::uint8_t> bits, std::size_t& pos, std::size_t n,
                                    io::st_dtype t) {
  std::vector<std::byte> out(n * io::st_item_size(t));
  for (std::byte& b : out) {
    b = bits.empty() ? std::byte{0} : static_cast<std::byte>(bits[pos % bits.size()]);
    ++pos;
  }
  return out;
}

/// Non-finite elements of a little-endian f32/bf16/f16 buffer, decoded from the field definitions.
std::size_t count_nonfinite(const std::vector<std::byte>& b, io::st_dtype t) {
  std::size_t n = 0;
  const std::size_t w = io::st_item_size(t);
  for (std::size_t i = 0; i + w <= b.size(); i += w) {
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < w; ++k) v |= static_cast<std::uint32_t>(b[i + k]) << (8 * k);
    const bool all_ones = t == io::st_dtype::f16 ? ((v >> 10) & 0x1f) == 0x1f
                          : t == io::st_dtype::bf16 ? ((v >> 7) & 0xff) == 0xff
                                                    : ((v >> 23) & 0xff) == 0xff;
    n += all_ones;
  }
  return n;
}

}  // namespace

void report_one_input(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return;
  reference::attention_shape s;
  s.batch = 1 + (data[0] & 1);
  s.kv_heads = 1 + ((data[0] >> 1) & 1);
  s.heads = s.kv_heads * (1 + ((data[0] >> 2) & 1));
  s.seq_q = 1 + ((data[1] >> 0) & 7);
  s.seq_k = 1 + ((data[1] >> 3) & 7);
  s.dim = 1 + (data[2] & 7);
  s.dim_v = 1 + ((data[2] >> 3) & 7);
  const bool causal = (data[1] >> 6) & 1, with_do = (data[1] >> 7) & 1, with_dq = with_do && ((data[2] >> 6) & 1);
  constexpr io::st_dtype out_types[] = {io::st_dtype::f32, io::st_dtype::bf16, io::st_dtype::f16, io::st_dtype::f32};
  const io::st_dtype o_type = out_types[data[3] & 3];
  const double tie_tolerance = (data[3] >> 2) == 0 ? 0.0 : std::ldexp(1.0, -static_cast<int>(data[3] >> 2) / 2);
  const std::size_t name_len = std::min<std::size_t>(data[4] & 15, size - 5);
  std::string name(reinterpret_cast<const char*>(data + 5), name_len);
  for (char& c : name) {
    if (c == '/' || c == '\0') c = '_';
  }
  const std::span<const std::uint8_t> bits(data + 5 + name_len, size - 5 - name_len);

  std::map<std::string, io::st_tensor_data> tensors;
  std::size_t pos = 0;
  auto add = [&](const char* n, std::vector<std::size_t> shape, io::st_dtype t) {
    std::size_t count = 1;
    for (std::size_t d : shape) count *= d;
    tensors[n] = {t, std::move(shape), cycled_bytes(bits, pos, count, t)};
  };
  add("q", {s.batch, s.heads, s.seq_q, s.dim}, io::st_dtype::f32);
  add("k", {s.batch, s.kv_heads, s.seq_k, s.dim}, io::st_dtype::f32);
  add("v", {s.batch, s.kv_heads, s.seq_k, s.dim_v}, io::st_dtype::f32);
  add("o", {s.batch, s.heads, s.seq_q, s.dim_v}, o_type);
  if (with_do) add("do", {s.batch, s.heads, s.seq_q, s.dim_v}, o_type);
  if (with_dq) add("dq", {s.batch, s.heads, s.seq_q, s.dim}, o_type);
  const fs::path file = scratch() / ("report-" + name + ".safetensors");
  io::write_safetensors(file, tensors);

  // Rows of the kernel's O that hold a NaN or Inf: the audit must exclude at least these.
  std::vector<bool> o_row_nonfinite(s.batch * s.heads * s.seq_q, false);
  {
    const auto& ob = tensors["o"].bytes;
    const std::size_t w = io::st_item_size(o_type), row_bytes = s.dim_v * w;
    for (std::size_t r = 0; r < o_row_nonfinite.size(); ++r) {
      const std::vector<std::byte> row(ob.begin() + static_cast<std::ptrdiff_t>(r * row_bytes),
                                       ob.begin() + static_cast<std::ptrdiff_t>((r + 1) * row_bytes));
      o_row_nonfinite[r] = count_nonfinite(row, o_type) != 0;
    }
  }

  const audit::kernel_dump dump = audit::load_kernel_dump(file);  // a well-formed file: must load
  audit::audit_options opt;
  opt.causal = causal;
  opt.threads = 1;
  opt.tie_tolerance = tie_tolerance;
  const audit::audit_report r = audit::run_audit(dump, opt);
  const nlohmann::json j = audit::to_json(r);
  const std::string text = j.dump(2);
  const nlohmann::json back = nlohmann::json::parse(text);
  check(back == j, "report JSON does not parse back to itself");
  check(back.at("schema") == std::string(audit::report_schema), "report: wrong schema");
  check(back.at("source").get<std::string>().size() >= name.size(), "report: source lost");
  const auto& sh = back.at("shape");
  check(sh.at("batch") == s.batch && sh.at("heads") == s.heads && sh.at("kv_heads") == s.kv_heads &&
            sh.at("seq_q") == s.seq_q && sh.at("seq_k") == s.seq_k && sh.at("dim") == s.dim &&
            sh.at("dim_v") == s.dim_v,
        "report: shape differs from the input's");
  for (const auto& [tn, t] : tensors) {
    const auto& jt = back.at("tensors").at(tn);
    check(jt.at("elements") == t.bytes.size() / io::st_item_size(t.dtype), "report: tensor '" + tn + "' element count");
    check(jt.at("nonfinite") == count_nonfinite(t.bytes, t.dtype), "report: tensor '" + tn + "' non-finite count");
  }
  const auto& heads = back.at("heads");
  check(heads.size() == s.batch * s.heads, "report: one head entry per (batch, head) expected");
  std::size_t excluded = 0;
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t h = 0; h < s.heads; ++h) {
      const auto& e = heads.at(b * s.heads + h);
      check(e.at("batch") == b && e.at("head") == h && e.at("kv_head") == s.kv_head(h), "report: head order");
      const std::size_t rows = e.at("rows"), ex = e.at("excluded_rows");
      check(rows + ex == s.seq_q, "report: rows + excluded_rows != seq_q");
      std::size_t must = 0;
      for (std::size_t i = 0; i < s.seq_q; ++i) must += o_row_nonfinite[(b * s.heads + h) * s.seq_q + i];
      check(ex >= must, "report: a row whose O holds NaN/Inf was not excluded");
      excluded += ex;
    }
  }
  check(r.excluded_rows >= excluded, "report: summary excluded_rows below the heads' sum");
  check(!audit::markdown_summary(r).empty(), "report: empty Markdown summary");
}

void number_one_input(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  constexpr std::size_t formats_n = std::size(all_format_ids), modes_n = std::size(all_round_modes);
  const format_desc from = desc_of(all_format_ids[data[0] % formats_n]);
  const format_desc to = desc_of(all_format_ids[data[1] % formats_n]);
  const round_mode mode = all_round_modes[(data[1] / formats_n) % modes_n];
  convert_options conv;
  conv.saturate = (data[1] & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  host::exact_number x;
  try {
    x = cli::parse_value(text, from);
  } catch (const host::parse_error&) {
    return;
  }
  // What `tiebreak round --from F --to T --mode M [--saturate] [--json] VALUE` does: round once,
  // compare with the exact value, print the exact texts of both.
  const round_result r = round_pack(to, x.window, rounding{mode, 0x9e3779b9u}, conv);
  const cli::error_report e = cli::compare(to, r, x);
  nlohmann::json j;
  cli::put_error(j, e);
  (void)cli::error_text(e);
  (void)cli::value_text_with_hex(to, r.bits);
  const std::string dec = host::to_decimal_string(x);
  if (x.cls != value_class::finite) return;
  // Exact decimal text parses back, when it is within the parser's digit limit (2^-40000 has 27960).
  if (dec.size() <= static_cast<std::size_t>(host::max_significant_digits)) {
    const host::exact_number back = host::parse_decimal(dec);
    check(back.value == x.value, "exact decimal text '" + dec.substr(0, 80) + "' does not parse back to the value");
  }
  if (host::is_dyadic(x.value)) {
    const std::string hex = host::to_hex_string(x.value);
    check(host::parse_hex(hex).value == x.value, "exact hex text '" + hex.substr(0, 80) + "' does not parse back");
  }
}

}  // namespace tiebreak::fuzz
