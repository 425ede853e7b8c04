// SPDX-License-Identifier: Apache-2.0
/// @file The bad-input files of the matrix: hand-built .npy and safetensors bytes, kernel dumps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tiebreak::test {

/// The folder holding every fixture of the matrix, created (once per process) on first use and
/// removed at exit. Layout and contents: see fixtures.cpp.
const std::filesystem::path& fixture_dir();

/// Raw .npy (format 1.0) bytes: the magic, a header dict with `descr`, `fortran_order` and the
/// shape text given verbatim (e.g. "(3, 4)"), padded to 64 bytes, then `payload`.
std::vector<std::byte> npy_bytes(const std::string& descr, bool fortran, const std::string& shape,
                                 const std::vector<std::byte>& payload);

/// Raw safetensors bytes: 8-byte little-endian header length, `header` (JSON text), `data`.
std::vector<std::byte> safetensors_bytes(const std::string& header, const std::vector<std::byte>& data);

/// Little-endian f64 bytes of `xs`.
std::vector<std::byte> f64_bytes(const std::vector<double>& xs);


}  // namespace tiebreak::test
