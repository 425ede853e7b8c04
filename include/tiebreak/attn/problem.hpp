// SPDX-License-Identifier: Apache-2.0
/// @file One attention problem: shape, dense layout, scale, the causal mask rule, grouped-query heads, validation.
///
/// The one home of these rules: the host reference and its certificate, the audit, the GPU f64
/// reference and the attention kernels all take an `attn::problem` (tests/host/attn/
/// one_home_test.py fails when the mask or head arithmetic is written anywhere else).
///
/// Conventions (those of FlashAttention and PyTorch SDPA):
///   S = scale · Q Kᵀ, P = softmax(S) row-wise, O = P V, LSE = log Σ_j exp(S_j) over the visible keys.
///   Causal mask, bottom-right aligned (FlashAttention ≥ 2.1): query row i sees key j when
///   j + seq_q <= i + seq_k, i.e. j <= i + (seq_k − seq_q). The same as PyTorch's top-left
///   alignment when seq_q == seq_k. With seq_q > seq_k the first seq_q − seq_k rows see no key;
///   with seq_q < seq_k row 0 already sees seq_k − seq_q + 1 keys. The keys a row sees are always
///   a prefix [0, visible_keys(i)) of the keys.
///   Grouped-query attention: the heads / kv_heads query heads h = g·group .. g·group + group − 1
///   read key/value head g (kv_heads == heads: multi-head; kv_heads == 1: multi-query).
///
/// Layout: every tensor is dense and row-major in `bhsd` order:
///   Q, dQ [batch, heads, seq_q, dim]      row q_row(b, h, i), element q_offset(b, h, i) + c
///   K, dK [batch, kv_heads, seq_k, dim]   row kv_row(b, g, j), element k_offset(b, g, j) + c
///   V, dV [batch, kv_heads, seq_k, dim_v] row kv_row(b, g, j), element v_offset(b, g, j) + c
///   O, dO [batch, heads, seq_q, dim_v]    row q_row(b, h, i), element o_offset(b, h, i) + c
///   LSE, delta [batch, heads, seq_q]      element q_row(b, h, i)
///
/// Portable: header-only, constexpr and `__host__ __device__` (TIEBREAK_HDC), no CUDA headers, no
/// allocation, so a kernel takes the problem by value as (part of) its parameters. Sizes are
/// std::size_t; every helper's arithmetic is exact when the element counts fit in std::size_t
/// (the host checks that before allocating). Preconditions of the helpers: validate() == ok and
/// indices in range (i < seq_q, j < seq_k, h < heads, g < kv_heads, b < batch).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tiebreak/fp/config.hpp"

namespace tiebreak::attn {

/// Why a shape is not a problem (validate()). `ok` is zero.
enum class problem_error : std::uint8_t {
  ok = 0,
  zero_size,            ///< some size (batch, heads, kv_heads, seq_q, seq_k, dim, dim_v) is 0
  kv_heads_not_divisor  ///< kv_heads does not divide heads
};

/// One line for an error, without a trailing period ("" for ok). The host prefixes its context
/// and throws its own exception type.
TIEBREAK_HDC const char* error_text(problem_error e) noexcept {
  switch (e) {
    case problem_error::ok: return "";
    case problem_error::zero_size: return "every size must be positive";
    case problem_error::kv_heads_not_divisor: return "kv_heads must divide heads";
  }
  return "unknown attention problem error";
}

/// The sizes of one problem (the layout above). An aggregate in this order:
/// `shape{batch, heads, kv_heads, seq_q, seq_k, dim, dim_v}`.
struct shape {
  std::size_t batch = 1;
  std::size_t heads = 1;     ///< query heads
  std::size_t kv_heads = 1;  ///< key/value heads; divides heads
  std::size_t seq_q = 1;     ///< query rows
  std::size_t seq_k = 1;     ///< key/value rows
  std::size_t dim = 1;       ///< features of Q and K
  std::size_t dim_v = 1;     ///< features of V and O

  /// ok, or the first rule the sizes break. Sizes are checked before divisibility (kv_heads 0).
  [[nodiscard]] TIEBREAK_HDC problem_error validate() const noexcept {
    if (!batch || !heads || !kv_heads || !seq_q || !seq_k || !dim || !dim_v) return problem_error::zero_size;
    if (heads % kv_heads != 0) return problem_error::kv_heads_not_divisor;
    return problem_error::ok;
  }
  [[nodiscard]] TIEBREAK_HDC bool valid() const noexcept { return validate() == problem_error::ok; }

  // --- grouped-query heads ---
  /// Query heads per key/value head.
  [[nodiscard]] TIEBREAK_HDC std::size_t group() const noexcept { return heads / kv_heads; }
  /// The key/value head query head h reads.
  [[nodiscard]] TIEBREAK_HDC std::size_t kv_head(std::size_t h) const noexcept { return h / group(); }
  /// The g-th query head (g < group()) of key/value head kvh; kv_head(q_head(kvh, g)) == kvh.
  [[nodiscard]] TIEBREAK_HDC std::size_t q_head(std::size_t kvh, std::size_t g) const noexcept {
    return kvh * group() + g;
  }

  // --- dense bhsd layout ---
  /// Row number of query row i of (b, h) in Q, dQ, O, dO; the element index in LSE and delta.
  [[nodiscard]] TIEBREAK_HDC std::size_t q_row(std::size_t b, std::size_t h, std::size_t i) const noexcept {
    return (b * heads + h) * seq_q + i;
  }
  /// Row number of key row j of (b, key/value head kvh) in K, dK, V, dV.
  [[nodiscard]] TIEBREAK_HDC std::size_t kv_row(std::size_t b, std::size_t kvh, std::size_t j) const noexcept {
    return (b * kv_heads + kvh) * seq_k + j;
  }
  /// Index of the first element of a row in Q/dQ, K/dK, V/dV, O/dO.
  [[nodiscard]] TIEBREAK_HDC std::size_t q_offset(std::size_t b, std::size_t h, std::size_t i) const noexcept {
    return q_row(b, h, i) * dim;
  }
  [[nodiscard]] TIEBREAK_HDC std::size_t k_offset(std::size_t b, std::size_t kvh, std::size_t j) const noexcept {
    return kv_row(b, kvh, j) * dim;
  }
  [[nodiscard]] TIEBREAK_HDC std::size_t v_offset(std::size_t b, std::size_t kvh, std::size_t j) const noexcept {
    return kv_row(b, kvh, j) * dim_v;
  }
  [[nodiscard]] TIEBREAK_HDC std::size_t o_offset(std::size_t b, std::size_t h, std::size_t i) const noexcept {
    return q_row(b, h, i) * dim_v;
  }
  /// Element counts of the tensors.
  [[nodiscard]] TIEBREAK_HDC std::size_t q_size() const noexcept { return batch * heads * seq_q * dim; }
  [[nodiscard]] TIEBREAK_HDC std::size_t k_size() const noexcept { return batch * kv_heads * seq_k * dim; }
  [[nodiscard]] TIEBREAK_HDC std::size_t v_size() const noexcept { return batch * kv_heads * seq_k * dim_v; }
  [[nodiscard]] TIEBREAK_HDC std::size_t o_size() const noexcept { return batch * heads * seq_q * dim_v; }
  [[nodiscard]] TIEBREAK_HDC std::size_t lse_size() const noexcept { return batch * heads * seq_q; }
};

/// Which keys a query row sees.
enum class mask_kind : std::uint8_t {
  none,    ///< every key
  causal,  ///< bottom-right aligned: key j for query i when j + seq_q <= i + seq_k
};

// --- the mask rule: its only home ---------------------------------------------------------------
// Written as three functions of (shape, mask) that tests/host/attn/problem_test.cpp pins to each
// other on every (i, j) of small shapes: j < visible_keys(i) ⟺ visible(i, j) ⟺ i >= first_visible_row(j).

/// Whether query row i sees key j (i < seq_q, j < seq_k).
TIEBREAK_HDC bool visible(const shape& s, mask_kind m, std::size_t i, std::size_t j) noexcept {
  return m == mask_kind::none || j + s.seq_q <= i + s.seq_k;
}

/// Number of keys query row i sees; they are the prefix [0, n) of the keys. 0: the row sees no
/// key (causal, seq_q > seq_k, i < seq_q − seq_k).
TIEBREAK_HDC std::size_t visible_keys(const shape& s, mask_kind m, std::size_t i) noexcept {
  if (m == mask_kind::none) return s.seq_k;
  const std::size_t end = i + 1 + s.seq_k;  // keys j < end − seq_q are visible
  if (end <= s.seq_q) return 0;
  return end - s.seq_q < s.seq_k ? end - s.seq_q : s.seq_k;
}

/// The first query row that sees key j (j < seq_k); every later row sees it too. Always < seq_q:
/// the last row sees every key.
TIEBREAK_HDC std::size_t first_visible_row(const shape& s, mask_kind m, std::size_t j) noexcept {
  if (m == mask_kind::none) return 0;
  return j + s.seq_q > s.seq_k ? j + s.seq_q - s.seq_k : 0;
}

/// One attention problem: its shape, its mask and the scale of S = scale · Q Kᵀ (resolved: the
/// host picks the default 1/√dim before building it). Plain data, copyable to a kernel by value.
struct problem {
  attn::shape shape;
  mask_kind mask = mask_kind::none;
  double scale = 1;

  [[nodiscard]] TIEBREAK_HDC problem_error validate() const noexcept { return shape.validate(); }
  [[nodiscard]] TIEBREAK_HDC bool causal() const noexcept { return mask == mask_kind::causal; }
  [[nodiscard]] TIEBREAK_HDC bool visible(std::size_t i, std::size_t j) const noexcept {
    return attn::visible(shape, mask, i, j);
  }
  [[nodiscard]] TIEBREAK_HDC std::size_t visible_keys(std::size_t i) const noexcept {
    return attn::visible_keys(shape, mask, i);
  }
  [[nodiscard]] TIEBREAK_HDC std::size_t first_visible_row(std::size_t j) const noexcept {
    return attn::first_visible_row(shape, mask, j);
  }
};

}  // namespace tiebreak::attn
