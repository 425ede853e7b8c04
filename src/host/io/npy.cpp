// SPDX-License-Identifier: Apache-2.0
/// @file .npy parsing (bounds-checked, never allocating more than the file holds) and writing.
#include <tiebreak/io/npy.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <type_traits>

#include <unistd.h>

namespace tiebreak::io {
namespace {

constexpr std::size_t max_header_bytes = std::size_t{1} << 20;  // numpy writes < 4 KiB in practice
constexpr unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/// Bytes of physical memory (0 when unknown). An array that cannot fit is refused before the
/// allocation is tried: under overcommit the allocation may succeed and the process be killed
/// later, and under ASan an impossible allocation aborts instead of throwing.
std::size_t physical_memory() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
}

[[noreturn]] void fail(std::string_view name, std::string_view problem) {
  std::string msg(name);
  msg += ": ";
  msg += problem;
  throw npy_error(msg);
}

/// A tiny recursive-descent parser for the Python dict literal of a .npy header, e.g.
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`.
class header_parser {
 public:
  header_parser(std::string_view text, std::string_view name) : s_(text), name_(name) {}

  npy_header parse() {
    npy_header h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{');
    skip_ws();
    while (!peek_is('}')) {
      const std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (have_descr) fail(name_, "header repeats key 'descr'");
        have_descr = true;
        if (peek_is('[')) fail(name_, "structured dtypes are not supported");
        parse_descr(parse_string(), h);
      } else if (key == "fortran_order") {
        if (have_order) fail(name_, "header repeats key 'fortran_order'");
        have_order = true;
        h.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (have_shape) fail(name_, "header repeats key 'shape'");
        have_shape = true;
        h.shape = parse_shape();
      } else {
        fail(name_, "malformed header: unexpected key '" + printable(key) + "'");
      }
      skip_ws();
      if (peek_is(',')) {
        ++pos_;
        skip_ws();
      } else if (!peek_is('}')) {
        fail(name_, "malformed header: expected ',' or '}'");
      }
    }
    ++pos_;  // '}'
    skip_ws();
    if (pos_ != s_.size()) fail(name_, "malformed header: trailing characters after the dict");
    if (!have_descr || !have_order || !have_shape)
      fail(name_, "malformed header: needs keys 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  static std::string printable(std::string_view v) {
    std::string out;
    for (char c : v.substr(0, 40)) out += (c >= 32 && c < 127) ? c : '?';
    return out;
  }
  bool peek_is(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    if (!peek_is(c)) fail(name_, std::string("malformed header: expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    if (!peek_is('\'') && !peek_is('"')) fail(name_, "malformed header: expected a quoted string");
    const char q = s_[pos_++];
    const std::size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) fail(name_, "malformed header: unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    if (out.find('\\') != std::string::npos) fail(name_, "malformed header: escapes in a string");
    pos_ = end + 1;
    return out;
  }
  bool parse_bool() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail(name_, "malformed header: 'fortran_order' must be True or False");
  }
  std::size_t parse_dim() {
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9')
      fail(name_, "malformed header: shape entries must be non-negative integers");
    std::size_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const std::size_t d = static_cast<std::size_t>(s_[pos_] - '0');
      if (v > (std::numeric_limits<std::size_t>::max() - d) / 10)
        fail(name_, "shape entry too large");
      v = v * 10 + d;
      ++pos_;
    }
    if (peek_is('L')) ++pos_;  // Python 2 long literal, as old numpy wrote it
    return v;
  }
  std::vector<std::size_t> parse_shape() {
    expect('(');
    skip_ws();
    std::vector<std::size_t> shape;
    bool trailing_comma = false;
    while (!peek_is(')')) {
      if (shape.size() >= 64) fail(name_, "shape has more than 64 dimensions");
      shape.push_back(parse_dim());
      skip_ws();
      trailing_comma = false;
      if (peek_is(',')) {
        ++pos_;
        trailing_comma = true;
        skip_ws();
      } else if (!peek_is(')')) {
        fail(name_, "malformed header: bad shape tuple");
      }
    }
    ++pos_;
    // Python needs "(n,)" for a 1-tuple; "(n)" is an int, not a shape.
    if (shape.size() == 1 && !trailing_comma) fail(name_, "malformed header: shape is not a tuple");
    return shape;
  }
  void parse_descr(const std::string& d, npy_header& h) {
    std::string_view v = d;
    char order = '=';
    if (!v.empty() && (v[0] == '<' || v[0] == '>' || v[0] == '|' || v[0] == '=')) {
      order = v[0];
      v.remove_prefix(1);
    }
    struct entry {
      std::string_view code;
      npy_dtype t;
    };
    static constexpr entry table[] = {
        {"f2", npy_dtype::f2}, {"f4", npy_dtype::f4}, {"f8", npy_dtype::f8},
        {"i1", npy_dtype::i1}, {"i2", npy_dtype::i2}, {"i4", npy_dtype::i4},
        {"i8", npy_dtype::i8}, {"u1", npy_dtype::u1}, {"u2", npy_dtype::u2},
        {"u4", npy_dtype::u4}, {"u8", npy_dtype::u8}, {"b1", npy_dtype::b1},
        {"?", npy_dtype::b1}};
    for (const auto& e : table) {
      if (v == e.code) {
        h.dtype = e.t;
        const bool native_big = std::endian::native == std::endian::big;
        h.big_endian = order == '>' || ((order == '=' || order == '|') && native_big);
        return;
      }
    }
    fail(name_, "unsupported dtype '" + printable(d) +
                    "' (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)");
  }

  std::string_view s_;
  std::string_view name_;
  std::size_t pos_ = 0;
};

template <class U>
U load(const std::byte* p, bool big_endian) {
  U v;
  std::memcpy(&v, p, sizeof(U));
  const bool swap = big_endian != (std::endian::native == std::endian::big);
  if (swap && sizeof(U) > 1) {
    unsigned char b[sizeof(U)];
    std::memcpy(b, &v, sizeof(U));
    std::reverse(b, b + sizeof(U));
    std::memcpy(&v, b, sizeof(U));
  }
  return v;
}

/// IEEE binary16 bits to float, exactly (every half is a float).
float half_bits_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h >> 15) << 31;
  const std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t sig = h & 0x3ff;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (sig << 13);  // inf / NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (sig << 13);
  } else if (sig == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      sig <<= 1;
      ++e;
    } while ((sig & 0x400) == 0);
    bits = sign | static_cast<std::uint32_t>(112 - e) << 23 | ((sig & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}

template <class T>
T convert_one(const std::byte* p, npy_dtype t, bool be) {
  switch (t) {
    case npy_dtype::f2: return static_cast<T>(half_bits_to_f32(load<std::uint16_t>(p, be)));
    case npy_dtype::f4: return static_cast<T>(load<float>(p, be));
    case npy_dtype::f8: return static_cast<T>(load<double>(p, be));
    case npy_dtype::i1: return static_cast<T>(load<std::int8_t>(p, be));
    case npy_dtype::i2: return static_cast<T>(load<std::int16_t>(p, be));
    case npy_dtype::i4: return static_cast<T>(load<std::int32_t>(p, be));
    case npy_dtype::i8: return static_cast<T>(load<std::int64_t>(p, be));
    case npy_dtype::u1: return static_cast<T>(load<std::uint8_t>(p, be));
    case npy_dtype::u2: return static_cast<T>(load<std::uint16_t>(p, be));
    case npy_dtype::u4: return static_cast<T>(load<std::uint32_t>(p, be));
    case npy_dtype::u8: return static_cast<T>(load<std::uint64_t>(p, be));
    case npy_dtype::b1: return static_cast<T>(load<std::uint8_t>(p, be) != 0 ? 1 : 0);
  }
  return T(0);
}

}  // namespace

std::size_t npy_item_size(npy_dtype t) noexcept {
  switch (t) {
    case npy_dtype::i1: case npy_dtype::u1: case npy_dtype::b1: return 1;
    case npy_dtype::f2: case npy_dtype::i2: case npy_dtype::u2: return 2;
    case npy_dtype::f4: case npy_dtype::i4: case npy_dtype::u4: return 4;
    case npy_dtype::f8: case npy_dtype::i8: case npy_dtype::u8: return 8;
  }
  return 0;
}

std::string_view npy_dtype_name(npy_dtype t) noexcept {
  switch (t) {
    case npy_dtype::f2: return "f2";
    case npy_dtype::f4: return "f4";
    case npy_dtype::f8: return "f8";
    case npy_dtype::i1: return "i1";
    case npy_dtype::i2: return "i2";
    case npy_dtype::i4: return "i4";
    case npy_dtype::i8: return "i8";
    case npy_dtype::u1: return "u1";
    case npy_dtype::u2: return "u2";
    case npy_dtype::u4: return "u4";
    case npy_dtype::u8: return "u8";
    case npy_dtype::b1: return "b1";
  }
  return "?";
}

std::size_t npy_header::element_count() const noexcept {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;  // overflow is ruled out by parse_npy_header
  return n;
}

npy_header parse_npy_header(std::span<const std::byte> bytes, std::string_view name) {
  if (bytes.size() < 10) fail(name, "truncated file: too short for a .npy header");
  if (std::memcmp(bytes.data(), magic, sizeof magic) != 0)
    fail(name, "not a .npy file (bad magic string)");
  const int major = static_cast<int>(bytes[6]);
  const int minor = static_cast<int>(bytes[7]);
  if (major < 1 || major > 3)
    fail(name, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor));
  std::size_t prefix = 10;
  std::size_t hlen = 0;
  if (major == 1) {
    hlen = static_cast<std::size_t>(bytes[8]) | static_cast<std::size_t>(bytes[9]) << 8;
  } else {
    if (bytes.size() < 12) fail(name, "truncated file: too short for a .npy header");
    prefix = 12;
    for (int i = 3; i >= 0; --i) hlen = hlen << 8 | static_cast<std::size_t>(bytes[8 + i]);
  }
  if (hlen > max_header_bytes) fail(name, "header length " + std::to_string(hlen) + " is too large");
  if (hlen > bytes.size() - prefix)
    fail(name, "truncated file: header says " + std::to_string(hlen) + " bytes, file has " +
                   std::to_string(bytes.size() - prefix));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + prefix), hlen);
  if (major < 3) {  // latin-1 in 1.0/2.0; 3.0 allows utf-8, which never matters for our keys
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 0x80) fail(name, "malformed header: non-ASCII byte");
  }
  npy_header h = header_parser(text, name).parse();
  h.major_version = major;
  h.minor_version = minor;
  h.data_offset = prefix + hlen;
  std::size_t count = 1;
  for (std::size_t d : h.shape) {
    if (d != 0 && count > std::numeric_limits<std::size_t>::max() / d)
      fail(name, "shape overflows the address space");
    count *= d;
  }
  if (count > std::numeric_limits<std::size_t>::max() / npy_item_size(h.dtype))
    fail(name, "shape overflows the address space");
  return h;
}

template <class T>
npy_array<T> parse_npy(std::span<const std::byte> bytes, std::string_view name) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const npy_header h = parse_npy_header(bytes, name);
  const std::size_t count = h.element_count();
  const std::size_t item = npy_item_size(h.dtype);
  const std::size_t have = bytes.size() - h.data_offset;
  if (have != count * item) {
    std::string shape_text = "(";
    for (std::size_t i = 0; i < h.shape.size(); ++i)
      shape_text += (i ? ", " : "") + std::to_string(h.shape[i]);
    shape_text += ")";
    fail(name, std::string(have < count * item ? "truncated file" : "size mismatch") +
                   ": shape " + shape_text + " of " + std::string(npy_dtype_name(h.dtype)) +
                   " needs " + std::to_string(count * item) + " data bytes, file has " +
                   std::to_string(have));
  }
  npy_array<T> out;
  out.shape = h.shape;
  const std::size_t memory = physical_memory();
  if (memory != 0 && count > memory / sizeof(T))
    fail(name, "too large: " + std::to_string(count) + " elements need more than the machine's " +
                   std::to_string(memory) + " bytes of memory");
  try {
    out.data.resize(count);
  } catch (const std::bad_alloc&) {
    fail(name, "out of memory: cannot hold " + std::to_string(count) + " elements");
  }
  const std::byte* base = bytes.data() + h.data_offset;
  if (!h.fortran_order || h.shape.size() < 2) {
    for (std::size_t i = 0; i < count; ++i) out.data[i] = convert_one<T>(base + i * item, h.dtype, h.big_endian);
    return out;
  }
  // Fortran order: element with multi-index (i0..ik) sits at sum i_j * prod_{m<j} n_m. Walk the
  // file linearly and scatter to the C-order position.
  const std::size_t rank = h.shape.size();
  std::vector<std::size_t> c_stride(rank, 1), idx(rank, 0);
  for (std::size_t j = rank - 1; j-- > 0;) c_stride[j] = c_stride[j + 1] * h.shape[j + 1];
  std::size_t c_pos = 0;
  for (std::size_t f = 0; f < count; ++f) {
    out.data[c_pos] = convert_one<T>(base + f * item, h.dtype, h.big_endian);
    for (std::size_t j = 0; j < rank; ++j) {  // increment the first index fastest
      ++idx[j];
      c_pos += c_stride[j];
      if (idx[j] < h.shape[j]) break;
      c_pos -= c_stride[j] * h.shape[j];
      idx[j] = 0;
    }
  }
  return out;
}

template <class T>
npy_array<T> read_npy(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) fail(name, "no such file");
  // Only regular files: a FIFO or device could block forever or never end.
  if (!std::filesystem::is_regular_file(st)) fail(name, "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(name, "cannot open file");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) fail(name, "cannot determine the file size");
  in.seekg(0, std::ios::beg);
  const std::size_t memory = physical_memory();
  if (memory != 0 && static_cast<std::uintmax_t>(size) > memory)  // e.g. a sparse file
    fail(name, "too large: the file's " + std::to_string(size) + " bytes exceed the machine's " +
                   std::to_string(memory) + " bytes of memory");
  std::vector<std::byte> bytes;
  try {
    bytes.resize(static_cast<std::size_t>(size));
  } catch (const std::bad_alloc&) {
    fail(name, "out of memory: cannot hold the file's " + std::to_string(size) + " bytes");
  }
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    fail(name, "read error");
  return parse_npy<T>(bytes, name);
}

template <class T>
std::vector<std::byte> encode_npy(std::span<const T> data, std::span<const std::size_t> shape,
                                  bool fortran_order) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  std::size_t count = 1;
  for (std::size_t d : shape) {
    if (d != 0 && count > std::numeric_limits<std::size_t>::max() / d)
      fail("encode_npy", "shape overflows the address space");
    count *= d;
  }
  if (count != data.size())
    fail("encode_npy", "shape holds " + std::to_string(count) + " elements, data has " +
                           std::to_string(data.size()));
  std::string dict = "{'descr': '<";
  dict += sizeof(T) == 4 ? "f4" : "f8";
  dict += "', 'fortran_order': ";
  dict += fortran_order ? "True" : "False";
  dict += ", 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  std::size_t prefix = 10;
  std::size_t total = prefix + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  if (total - prefix > 65535) {
    prefix = 12;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  const std::size_t hlen = total - prefix;
  dict.append(hlen - dict.size() - 1, ' ');
  dict += '\n';
  std::vector<std::byte> out(total + count * sizeof(T));
  std::memcpy(out.data(), magic, sizeof magic);
  out[6] = std::byte{static_cast<unsigned char>(prefix == 10 ? 1 : 2)};
  out[7] = std::byte{0};
  for (std::size_t i = 0; i < prefix - 8; ++i)
    out[8 + i] = std::byte{static_cast<unsigned char>((hlen >> (8 * i)) & 0xff)};
  std::memcpy(out.data() + prefix, dict.data(), dict.size());
  std::byte* p = out.data() + total;
  for (std::size_t i = 0; i < count; ++i, p += sizeof(T)) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &data[i], sizeof(T));
    if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(T));
    std::memcpy(p, b, sizeof(T));
  }
  return out;
}

template <class T>
void write_npy(const std::filesystem::path& path, std::span<const T> data,
               std::span<const std::size_t> shape, bool fortran_order) {
  const std::vector<std::byte> bytes = encode_npy<T>(data, shape, fortran_order);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path.string(), "cannot open for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail(path.string(), "write error");
}

template npy_array<float> parse_npy<float>(std::span<const std::byte>, std::string_view);
template npy_array<double> parse_npy<double>(std::span<const std::byte>, std::string_view);
template npy_array<float> read_npy<float>(const std::filesystem::path&);
template npy_array<double> read_npy<double>(const std::filesystem::path&);
template std::vector<std::byte> encode_npy<float>(std::span<const float>, std::span<const std::size_t>, bool);
template std::vector<std::byte> encode_npy<double>(std::span<const double>, std::span<const std::size_t>, bool);
template void write_npy<float>(const std::filesystem::path&, std::span<const float>, std::span<const std::size_t>, bool);
template void write_npy<double>(const std::filesystem::path&, std::span<const double>, std::span<const std::size_t>, bool);

}  // namespace tiebreak::io
