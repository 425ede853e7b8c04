// SPDX-License-Identifier: Apache-2.0
/// @file attn::problem in a kernel: the mask rule, the grouped-query mapping and the layout give the
/// host's answers on the device (the same TIEBREAK_HDC source). Skipped without a GPU.
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "tiebreak/attn/problem.hpp"
#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/device.hpp"

namespace tiebreak::attn {
namespace {

// The kernels to come take the problem by value: it must stay plain data.
static_assert(std::is_trivially_copyable_v<problem> && std::is_standard_layout_v<problem>);

/// One record per (i, j) of a problem: what the device computes from the problem alone.
struct pair_record {
  std::uint64_t visible_keys, first_visible_row, kv_head, q_row, k_offset;
  std::uint32_t visible, valid;
};

__global__ void problem_kernel(problem p, pair_record* out) {
  // Constant-evaluated in device code, too.
  static_assert(visible_keys(shape{1, 1, 1, 6, 2, 1, 1}, mask_kind::causal, 3) == 0);
  const std::size_t n = p.shape.seq_q * p.shape.seq_k;
  for (std::size_t x = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; x < n;
       x += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t i = x / p.shape.seq_k, j = x % p.shape.seq_k;
    const std::size_t h = x % p.shape.heads;
    out[x] = pair_record{p.visible_keys(i), p.first_visible_row(j), p.shape.kv_head(h), p.shape.q_row(0, h, i),
                         p.shape.k_offset(0, p.shape.kv_head(h), j), p.visible(i, j) ? 1u : 0u,
                         p.validate() == problem_error::ok ? 1u : 0u};
  }
}

TEST(attn_problem_gpu, device_agrees_with_host) {
  if (!gpu::device_available()) GTEST_SKIP() << gpu::device_description();
  constexpr gpu::detail::cuda_check check{"problem_gpu_test"};
  const problem cases[] = {
      {shape{1, 4, 4, 9, 9, 8, 8}, mask_kind::causal, 0.125},
      {shape{2, 6, 2, 13, 5, 8, 4}, mask_kind::causal, -1.0},  // seq_q > seq_k: masked rows
      {shape{1, 8, 1, 5, 13, 3, 3}, mask_kind::causal, 1.0},   // seq_q < seq_k, multi-query
      {shape{1, 3, 3, 7, 11, 2, 2}, mask_kind::none, 1.0},
  };
  for (const problem& p : cases) {
    const std::size_t n = p.shape.seq_q * p.shape.seq_k;
    gpu::detail::device_buffer<pair_record> d(n, check);
    problem_kernel<<<4, 64>>>(p, d.data());
    check(cudaGetLastError(), "launch");
    std::vector<pair_record> got(n);
    check(cudaMemcpy(got.data(), d.data(), n * sizeof(pair_record), cudaMemcpyDeviceToHost), "copy");
    for (std::size_t x = 0; x < n; ++x) {
      const std::size_t i = x / p.shape.seq_k, j = x % p.shape.seq_k, h = x % p.shape.heads;
      const pair_record& r = got[x];
      ASSERT_EQ(r.visible, p.visible(i, j) ? 1u : 0u) << i << " " << j;
      ASSERT_EQ(r.visible_keys, p.visible_keys(i)) << i;
      ASSERT_EQ(r.first_visible_row, p.first_visible_row(j)) << j;
      ASSERT_EQ(r.kv_head, p.shape.kv_head(h)) << h;
      ASSERT_EQ(r.q_row, p.shape.q_row(0, h, i));
      ASSERT_EQ(r.k_offset, p.shape.k_offset(0, p.shape.kv_head(h), j));
      ASSERT_EQ(r.valid, 1u);
    }
  }
}

}  // namespace
}  // namespace tiebreak::attn
