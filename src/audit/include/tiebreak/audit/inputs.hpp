// SPDX-License-Identifier: Apache-2.0
/// @file Loading an attention kernel's dumped tensors (safetensors file or folder of .npy files).
///
/// Tensors: `q`, `k`, `v`, `o` required; `do`, `dq`, `dk`, `dv`, `lse` optional (dq/dk/dv need do).
/// Layout `bhsd`: q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv], o/do [B, H, Sq, Dv];
/// `bshd`: q [B, Sq, H, D] and likewise. dq/dk/dv have the shapes of q/k/v; lse is [B, H, Sq] in both
/// layouts (FlashAttention's). Element types: bf16, f16, f32, f64 (safetensors BF16/F16/F32/F64;
/// .npy f2/f4/f8, since NumPy has no bf16: store bf16 values as f4, exactly). Every element is
/// decoded exactly with the core's formats (tiebreak::to_double). Files are memory-mapped and read
/// once, straight into the dense bhsd double arrays the reference uses.
#pragma once

#include <tiebreak/fp/format.hpp>
#include <tiebreak/reference/attention.hpp>

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace tiebreak::audit {

/// Bad input: missing tensor, shape or dtype mismatch, truncated or malformed file, offsets out of
/// range, sizes too large. `what()` is one line naming the file and tensor and the problem.
class input_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class layout { bhsd, bshd };

/// Largest attention matrix per (batch, head) the host reference accepts: seq_q · seq_k ≤ 2^28
/// (2 GiB of doubles per worker thread).
inline constexpr std::size_t max_scores_per_head = std::size_t{1} << 28;

/// What was found about one tensor.
struct tensor_info {
  std::string name;
  std::string dtype;               ///< stored type: "bf16", "f16", "f32", "f64"
  format_desc format = formats::f32;  ///< format of the kernel's values (see load_options::value_formats)
  std::vector<std::size_t> shape;  ///< as stored
  std::size_t elements = 0;
  std::size_t nonfinite = 0;       ///< NaN and ±Inf elements (counted, kept)
};

/// The decoded problem: reference inputs (q, k, v, do) and the kernel's outputs, all dense bhsd.
struct kernel_dump {
  reference::attention_inputs inputs;  ///< q, k, v, and d_o when `do` was given
  std::vector<double> o;               ///< kernel output O
  std::vector<double> dq, dk, dv;      ///< empty when absent
  std::vector<double> lse;             ///< empty when absent
  std::map<std::string, tensor_info> tensors;  ///< every tensor read, by name
  std::string source;                  ///< the path read
  std::string container;               ///< "safetensors" or "npy"
  std::string layout;                  ///< "bhsd" or "bshd": the stored layout

  [[nodiscard]] const tensor_info* info(const std::string& name) const {
    const auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
};

struct load_options {
  layout tensor_layout = layout::bhsd;
  /// Format of the kernel's output values, used for the ulp of the row scale. Absent: the stored
  /// type, except that a tensor stored as f32/f64 whose finite values all fit bf16 exactly counts as
  /// bf16 (else f16 if they all fit f16): the usual way bf16 reaches a .npy file.
  std::optional<format_desc> value_format;
  /// Read the kernel's inputs only: `q`, `k`, `v` (required) and `do` (optional, shape [B, H, Sq, Dv]);
  /// `o`, `dq`, `dk`, `dv` and `lse` are neither required nor read, and the host reference's size
  /// limit (max_scores_per_head) does not apply. For `tiebreak attention --inputs`.
  bool inputs_only = false;
};

/// Reads `path`: a safetensors file, or a directory holding q.npy, k.npy, ... Throws input_error.
[[nodiscard]] kernel_dump load_kernel_dump(const std::filesystem::path& path, const load_options& options = {});

/// One tensor held in memory (the Python package's arrays): little-endian elements of `dtype`
/// ("bf16", "f16", "f32", "f64"), C order, `shape`; `bytes` is a view the caller keeps alive.
struct tensor_buffer {
  std::string dtype;
  std::vector<std::size_t> shape;
  std::span<const std::byte> bytes;
};

/// The same checks and decoding on tensors in memory, keyed by name (q, k, v, o, do, dq, dk, dv,
/// lse); `source` names them in messages. container is "memory". Throws input_error.
[[nodiscard]] kernel_dump load_kernel_dump(const std::map<std::string, tensor_buffer>& tensors,
                                           const std::string& source, const load_options& options = {});

}  // namespace tiebreak::audit
