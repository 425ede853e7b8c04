// SPDX-License-Identifier: Apache-2.0
/// @file Reader and writer for NumPy .npy files (format versions 1.0, 2.0 and 3.0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tiebreak::io {

/// Every problem with a .npy file (unreadable, truncated, malformed header, unsupported dtype,
/// shape that disagrees with the data size) is reported as this exception. `what()` is one line:
/// `<file>: <problem>`.
class npy_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Element types the reader understands. Everything else (complex, structured, object, string,
/// datetime, void/bf16) is rejected with an npy_error.
enum class npy_dtype : std::uint8_t { f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1 };

/// Size in bytes of one element of `t`.
[[nodiscard]] std::size_t npy_item_size(npy_dtype t) noexcept;
/// The dtype's NumPy name without byte order ("f4", "i8", "b1"...).
[[nodiscard]] std::string_view npy_dtype_name(npy_dtype t) noexcept;

/// The parsed header of a .npy file.
struct npy_header {
  int major_version = 1;
  int minor_version = 0;
  npy_dtype dtype = npy_dtype::f8;
  bool big_endian = false;      ///< byte order of the stored data
  bool fortran_order = false;   ///< column-major storage of the data
  std::vector<std::size_t> shape;  ///< empty for a 0-d (scalar) array
  std::size_t data_offset = 0;  ///< bytes from the start of the file to the first element

  /// Product of `shape` (1 for a 0-d array).
  [[nodiscard]] std::size_t element_count() const noexcept;
};

/// An N-d array read from a .npy file. `data` is always in C (row-major) order, whatever the file's
/// order; `shape` is the file's shape.
template <class T>
struct npy_array {
  std::vector<std::size_t> shape;
  std::vector<T> data;

  [[nodiscard]] std::size_t rank() const noexcept { return shape.size(); }
  [[nodiscard]] std::size_t size() const noexcept { return data.size(); }
};

/// Parses and validates the header in `bytes` (the whole file, or at least its header).
/// `name` names the source in error messages. Checks magic, version, header length, the dict's
/// keys, dtype and shape, and that the shape's byte count does not overflow. Does not check the
/// data size (parse_npy does). Throws npy_error on any problem; never reads outside `bytes`.
[[nodiscard]] npy_header parse_npy_header(std::span<const std::byte> bytes, std::string_view name);

/// Parses a whole .npy file held in memory and converts its elements to T.
/// Preconditions: none (any byte string is accepted and either parsed or rejected).
/// T is float or double. Conversion: f2, f4, integers and bool convert exactly to double;
/// to float, f8 and integers wider than 24 bits round to nearest-even (the C++ conversion under the
/// default rounding mode). NaN and infinities are kept. The data size must equal the shape's
/// byte count exactly, otherwise npy_error.
template <class T>
[[nodiscard]] npy_array<T> parse_npy(std::span<const std::byte> bytes, std::string_view name);

/// Reads a .npy file; see parse_npy. Throws npy_error (naming the file) if it cannot be read.
template <class T>
[[nodiscard]] npy_array<T> read_npy(const std::filesystem::path& path);

/// Encodes `data` (T is float or double, stored little-endian as <f4 or <f8) with the given shape.
/// Precondition: the product of `shape` equals data.size(), otherwise npy_error. `fortran_order`
/// only labels the data: the caller lays it out column-major. Writes format 1.0 when the header
/// fits (almost always), else 2.0; the data starts at a multiple of 64 bytes.
template <class T>
[[nodiscard]] std::vector<std::byte> encode_npy(std::span<const T> data,
                                                std::span<const std::size_t> shape,
                                                bool fortran_order = false);

/// Writes encode_npy(data, shape, fortran_order) to `path`; throws npy_error on I/O failure.
template <class T>
void write_npy(const std::filesystem::path& path, std::span<const T> data,
               std::span<const std::size_t> shape, bool fortran_order = false);

}  // namespace tiebreak::io
