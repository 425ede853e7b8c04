// SPDX-License-Identifier: Apache-2.0
/// @file mmap-backed files and the safetensors header parser (bounds-checked) and writer.
#include <tiebreak/io/safetensors.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tiebreak::io {
namespace {

[[noreturn]] void fail(std::string_view name, std::string_view problem) {
  std::string msg(name);
  msg += ": ";
  msg += problem;
  throw safetensors_error(msg);
}

struct dtype_entry {
  std::string_view name;
  st_dtype t;
  std::size_t size;
};
constexpr dtype_entry dtype_table[] = {
    {"BF16", st_dtype::bf16, 2}, {"F16", st_dtype::f16, 2},   {"F32", st_dtype::f32, 4},
    {"F64", st_dtype::f64, 8},   {"I8", st_dtype::i8, 1},     {"I16", st_dtype::i16, 2},
    {"I32", st_dtype::i32, 4},   {"I64", st_dtype::i64, 8},   {"U8", st_dtype::u8, 1},
    {"U16", st_dtype::u16, 2},   {"U32", st_dtype::u32, 4},   {"U64", st_dtype::u64, 8},
    {"BOOL", st_dtype::boolean, 1}, {"F8_E4M3", st_dtype::f8_e4m3, 1}, {"F8_E5M2", st_dtype::f8_e5m2, 1}};

std::string printable(std::string_view v) {
  std::string out;
  for (char c : v.substr(0, 60)) out += (c >= 32 && c < 127) ? c : '?';
  return out;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
mapped_file::mapped_file(const std::filesystem::path& path) : path_(path) {
  const std::string name = path.string();
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw std::runtime_error(name + ": no such file");
  // Only regular files: a FIFO or device could block forever or never end.
  if (!std::filesystem::is_regular_file(st)) throw std::runtime_error(name + ": not a regular file");
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(name + ": cannot open file (" + std::strerror(errno) + ")");
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    ::close(fd);
    throw std::runtime_error(name + ": cannot determine the file size");
  }
  size_ = static_cast<std::size_t>(sb.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(name + ": cannot map file (" + std::strerror(err) + ")");
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file open
}

mapped_file::mapped_file(mapped_file&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

mapped_file& mapped_file::operator=(mapped_file&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

mapped_file::~mapped_file() { release(); }

void mapped_file::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

// ------------------------------------------------------------------------------------------------
std::size_t st_item_size(st_dtype t) noexcept {
  for (const auto& e : dtype_table)
    if (e.t == t) return e.size;
  return 0;
}

std::string_view st_dtype_name(st_dtype t) noexcept {
  for (const auto& e : dtype_table)
    if (e.t == t) return e.name;
  return "?";
}

std::size_t st_tensor::element_count() const noexcept {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;  // overflow ruled out by parse_safetensors
  return n;
}

std::map<std::string, st_tensor> parse_safetensors(std::span<const std::byte> bytes, std::string_view name) {
  if (bytes.size() < 8) fail(name, "truncated file: too short for a safetensors header length");
  std::uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = hlen << 8 | static_cast<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  if (hlen > max_safetensors_header)
    fail(name, "header length " + std::to_string(hlen) + " exceeds the 100 MB limit (malformed or not a safetensors file)");
  if (hlen > bytes.size() - 8)
    fail(name, "truncated file: header says " + std::to_string(hlen) + " bytes, file has " +
                   std::to_string(bytes.size() - 8));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<std::size_t>(hlen));
  nlohmann::json header;
  // nlohmann keeps only the last of repeated keys: a tensor named twice would lose one entry
  // silently, so the top-level keys are collected while parsing and a repeat is an error.
  std::set<std::string> keys;
  std::string repeated;
  const auto note_keys = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !keys.insert(parsed.get<std::string>()).second && repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  try {
    header = nlohmann::json::parse(text, note_keys);
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n' || c == '\r') c = ' ';
    fail(name, "malformed header: not valid JSON (" + what + ")");
  }
  if (!header.is_object()) fail(name, "malformed header: not a JSON object");
  if (!repeated.empty())
    fail(name, "tensor '" + printable(repeated) + "': named more than once in the header");
  const std::span<const std::byte> data = bytes.subspan(8 + static_cast<std::size_t>(hlen));
  std::map<std::string, st_tensor> out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) fail(name, "malformed header: __metadata__ is not an object");
      continue;
    }
    const std::string tn = "tensor '" + printable(key) + "'";
    if (!v.is_object()) fail(name, tn + ": header entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail(name, tn + ": missing or non-string 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) fail(name, tn + ": missing or non-array 'shape'");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      fail(name, tn + ": 'data_offsets' must be an array [begin, end]");
    st_tensor t;
    const std::string ds = v["dtype"].get<std::string>();
    bool known = false;
    for (const auto& e : dtype_table)
      if (e.name == ds) {
        t.dtype = e.t;
        known = true;
      }
    if (!known) fail(name, tn + ": unknown dtype '" + printable(ds) + "'");
    std::size_t bytes_needed = st_item_size(t.dtype);
    if (v["shape"].size() > 64) fail(name, tn + ": shape has more than 64 dimensions");
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(name, tn + ": shape entries must be non-negative integers");
      const std::uint64_t dim = d.get<std::uint64_t>();
      if (dim != 0 && bytes_needed > std::numeric_limits<std::size_t>::max() / dim)
        fail(name, tn + ": shape overflows the address space");
      bytes_needed *= static_cast<std::size_t>(dim);
      t.shape.push_back(static_cast<std::size_t>(dim));
    }
    const auto& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(name, tn + ": data_offsets must be non-negative integers");
    const std::uint64_t begin = off[0].get<std::uint64_t>(), end = off[1].get<std::uint64_t>();
    if (begin > end) fail(name, tn + ": data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
    if (end > data.size())
      fail(name, tn + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] out of range (truncated file? data section has " + std::to_string(data.size()) + " bytes)");
    if (end - begin != bytes_needed)
      fail(name, tn + ": shape needs " + std::to_string(bytes_needed) + " bytes of " + ds + ", data_offsets hold " +
                     std::to_string(end - begin));
    t.data = data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
    out.emplace(key, std::move(t));
  }
  return out;
}

safetensors_file::safetensors_file(const std::filesystem::path& path) : file_(path) {
  tensors_ = parse_safetensors(file_.bytes(), path.string());
}

std::vector<std::byte> encode_safetensors(const std::map<std::string, st_tensor_data>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::size_t offset = 0;
  for (const auto& [key, t] : tensors) {
    std::size_t n = st_item_size(t.dtype);
    for (std::size_t d : t.shape) n *= d;
    if (n != t.bytes.size())
      fail("encode_safetensors", "tensor '" + key + "': shape needs " + std::to_string(n) + " bytes, got " +
                                     std::to_string(t.bytes.size()));
    header[key] = {{"dtype", std::string(st_dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + text.size() + offset);
  const std::uint64_t hlen = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = std::byte{static_cast<unsigned char>((hlen >> (8 * i)) & 0xff)};
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::size_t pos = 8 + text.size();
  for (const auto& [key, t] : tensors) {
    if (!t.bytes.empty()) std::memcpy(out.data() + pos, t.bytes.data(), t.bytes.size());
    pos += t.bytes.size();
  }
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::map<std::string, st_tensor_data>& tensors) {
  const std::vector<std::byte> bytes = encode_safetensors(tensors);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path.string(), "cannot open for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail(path.string(), "write error");
}

}  // namespace tiebreak::io
