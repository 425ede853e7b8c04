// SPDX-License-Identifier: Apache-2.0
/// @file Fuzz entry points shared by the libFuzzer targets and the regression test (one per parser).
///
/// Each entry point feeds one input to the real library functions. The documented error type of
/// the parser (io::npy_error, io::safetensors_error, audit::input_error, host::parse_error) is the
/// expected outcome for bad input and is caught here; anything else escapes: a crash, a sanitizer
/// report, another exception, or a broken invariant (thrown as fuzz_invariant_error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace tiebreak::fuzz {

/// A parser accepted an input but returned something inconsistent with it (a bug).
class fuzz_invariant_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// .npy: parse_npy_header, parse_npy<float>, parse_npy<double>; an input whose header parses is
/// also written as q/k/v/o.npy of a folder and read by audit::load_kernel_dump (mmap path).
void npy_one_input(const std::uint8_t* data, std::size_t size);

/// safetensors: parse_safetensors (its JSON header included); an input that parses is also written
/// to a file and read by audit::load_kernel_dump in both layouts.
void safetensors_one_input(const std::uint8_t* data, std::size_t size);

/// The JSON the tool reads: a safetensors header (the only JSON reader; run and report JSON are
/// written, never read). The input is the header text, wrapped with its 8-byte length and a
/// 256-byte data section and given to parse_safetensors. Checked against an independent SAX pass
/// of nlohmann::json over the text: invalid JSON, a non-object and a repeated top-level key are
/// rejected; an accepted header has one tensor per key, each inside the data section; and the
/// tensors written back by encode_safetensors parse to the same names, dtypes, shapes and bytes.
void json_one_input(const std::uint8_t* data, std::size_t size);

/// The report JSON the tool writes (`tiebreak audit -o/--json`; no command reads it back, so its
/// target is the writer): bytes 0-3 pick a small attention problem (batch, heads, kv_heads, seq_q,
/// seq_k, dim, dim_v, causal, with or without dO and dQ, the tie tolerance), the next bytes are the
/// source name (any bytes, as a path may be), the rest the f32 bits of q, k, v, o (dO, dQ),
/// cycled when short. run_audit, to_json, dump and markdown_summary must not throw; the dumped
/// text must parse back to the same JSON; the report must echo the shape, hold one head entry per
/// (batch, head) whose rows + excluded_rows = seq_q, exclude at least every row whose kernel O
/// row holds a NaN or Inf, and count exactly the non-finite elements of every tensor.
void report_one_input(const std::uint8_t* data, std::size_t size);

/// The CLI's VALUE argument: byte 0 picks the --from format, byte 1 the --to format, the rounding
/// mode and --saturate; the rest is the text given to cli::parse_value (decimal, C99 hex float,
/// nan/inf, bits:0x...). A parsed value is rounded as `tiebreak round` does, its error computed
/// and the exact texts printed; exact decimal and hex text must parse back to the same value.
void number_one_input(const std::uint8_t* data, std::size_t size);

}  // namespace tiebreak::fuzz
