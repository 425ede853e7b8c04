// SPDX-License-Identifier: Apache-2.0
/// @file Memory-mapped files and a bounds-checked safetensors reader/writer (raw bytes, no decoding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tiebreak::io {

/// Every problem with a safetensors file (unreadable, truncated, malformed header, offsets outside
/// the data, shape that disagrees with the byte count). `what()` is one line: `<file>: <problem>`,
/// naming the tensor where one is at fault.
class safetensors_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A read-only private mapping of a whole regular file (mmap). Move-only; unmaps on destruction.
/// An empty file maps to an empty span. Throws std::runtime_error `<file>: <problem>` when the
/// file is missing, not a regular file, or cannot be mapped.
class mapped_file {
 public:
  mapped_file() = default;
  explicit mapped_file(const std::filesystem::path& path);
  mapped_file(mapped_file&& o) noexcept;
  mapped_file& operator=(mapped_file&& o) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file();

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  void release() noexcept;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Element types of safetensors ("BF16", "F16", "F32", "F64", integer and bool types are listed so
/// that a file holding them parses; the audit accepts only the floating-point ones).
enum class st_dtype : std::uint8_t { bf16, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, boolean, f8_e4m3, f8_e5m2 };

[[nodiscard]] std::size_t st_item_size(st_dtype t) noexcept;
/// The safetensors name ("BF16", ...).
[[nodiscard]] std::string_view st_dtype_name(st_dtype t) noexcept;

/// One tensor of a safetensors file: dtype, shape and its little-endian bytes (a view into the
/// mapping, or into the caller's buffer for parse_safetensors).
struct st_tensor {
  st_dtype dtype = st_dtype::f32;
  std::vector<std::size_t> shape;
  std::span<const std::byte> data;
  [[nodiscard]] std::size_t element_count() const noexcept;
};

/// Largest accepted header (the format's own reference implementation caps it at 100 MB).
inline constexpr std::size_t max_safetensors_header = 100'000'000;

/// Parses the header of a whole safetensors file held in `bytes` and returns every tensor as a view
/// into `bytes`. Checks: the 8-byte length and the header fit the file; the header is a JSON object
/// whose entries (except `__metadata__`, a string map) have a known `dtype`, a `shape` of
/// non-negative integers whose byte count does not overflow, and `data_offsets` [begin, end] with
/// begin <= end <= data size and end - begin equal to the shape's byte count. Never reads outside
/// `bytes`. Throws safetensors_error naming `name` (and the tensor) otherwise.
[[nodiscard]] std::map<std::string, st_tensor> parse_safetensors(std::span<const std::byte> bytes,
                                                                 std::string_view name);

/// A safetensors file mapped once; tensors() are views into the mapping.
class safetensors_file {
 public:
  explicit safetensors_file(const std::filesystem::path& path);
  [[nodiscard]] const std::map<std::string, st_tensor>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return file_.path(); }

 private:
  mapped_file file_;
  std::map<std::string, st_tensor> tensors_;
};

/// A tensor to write: dtype, shape, and its little-endian bytes (size must match the shape).
struct st_tensor_data {
  st_dtype dtype = st_dtype::f32;
  std::vector<std::size_t> shape;
  std::vector<std::byte> bytes;
};

/// Encodes tensors as a safetensors file (header padded with spaces to a multiple of 8 bytes,
/// tensors in name order). Throws safetensors_error when a byte count disagrees with a shape.
[[nodiscard]] std::vector<std::byte> encode_safetensors(const std::map<std::string, st_tensor_data>& tensors);
/// Writes encode_safetensors(tensors) to `path`.
void write_safetensors(const std::filesystem::path& path, const std::map<std::string, st_tensor_data>& tensors);

}  // namespace tiebreak::io
