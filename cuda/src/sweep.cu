// SPDX-License-Identifier: Apache-2.0
/// @file The public launchers: chunking, device tallies, timing.
#include <algorithm>
#include <cstring>
#include <string>

#include "sweep_kernels.cuh"

namespace tiebreak::gpu {
namespace {

using detail::check;
using detail::device_buffer;
using detail::op_entry;

const op_entry& entry(instr_op op) {
  static const auto table = [] {
    std::array<op_entry, instr_op_count> t{};
#define TIEBREAK_GPU_CALL_FILL_(G) detail::fill_##G##_entries(t.data());
    TIEBREAK_GPU_GROUPS_(TIEBREAK_GPU_CALL_FILL_)
#undef TIEBREAK_GPU_CALL_FILL_
    return t;
  }();
  const int i = static_cast<int>(op);
  if (i < 0 || i >= instr_op_count || table[i].sweep == nullptr) throw std::invalid_argument("tiebreak::gpu: unknown instr_op");
  return table[i];
}

struct event_pair {
  cudaEvent_t start = nullptr, stop = nullptr;
  event_pair() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~event_pair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

sweep_result run(instr_op op, std::uint64_t begin, std::uint64_t count, int fma_kind, std::uint64_t param) {
  const op_entry& e = entry(op);
  device_buffer<detail::sweep_state> st(1, check);
  check(cudaMemset(st.data(), 0, sizeof(detail::sweep_state)), "cudaMemset");
  event_pair ev;
  check(cudaEventRecord(ev.start), "cudaEventRecord");
  for (std::uint64_t done = 0; done < count; done += sweep_chunk) {
    const detail::sweep_source src{begin + done, std::min(sweep_chunk, count - done), fma_kind, param};
    e.sweep(src, st.data());
  }
  check(cudaEventRecord(ev.stop), "cudaEventRecord");
  check(cudaEventSynchronize(ev.stop), "cudaEventSynchronize");
  check(cudaGetLastError(), "sweep");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, ev.start, ev.stop), "cudaEventElapsedTime");

  detail::sweep_state h;
  check(cudaMemcpy(&h, st.data(), sizeof h, cudaMemcpyDeviceToHost), "cudaMemcpy");
  sweep_result r;
  r.covered = h.covered;
  r.mismatches = h.mismatches;
  const unsigned int n = std::min<unsigned int>(h.recorded, max_recorded);
  r.first.assign(h.first, h.first + n);
  std::copy(std::begin(h.bins), std::end(h.bins), r.by_bin.begin());
  r.seconds = ms / 1000.0;
  return r;
}

std::vector<std::uint32_t> apply(instr_op op, std::span<const std::uint64_t> inputs, bool hardware) {
  const op_entry& e = entry(op);
  std::vector<std::uint32_t> out(inputs.size());
  if (inputs.empty()) return out;
  device_buffer<std::uint64_t> din(inputs.size(), check);
  device_buffer<std::uint32_t> dout(inputs.size(), check);
  check(cudaMemcpy(din.data(), inputs.data(), inputs.size_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  // Poison the output so an unwritten element cannot pass as a result.
  check(cudaMemset(dout.data(), 0xa5, sizeof(std::uint32_t) * inputs.size()), "cudaMemset");
  e.apply(hardware, din.data(), dout.data(), inputs.size());
  check(cudaDeviceSynchronize(), "apply");
  check(cudaMemcpy(out.data(), dout.data(), sizeof(std::uint32_t) * out.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

}  // namespace

sweep_result sweep(instr_op op, std::uint64_t begin, std::uint64_t end) {
  if (instr_desc_of(op).kind == instr_kind::fma) throw std::invalid_argument("tiebreak::gpu::sweep: use sweep_fma for fma instructions");
  if (end > (std::uint64_t{1} << 32) || begin > end) throw std::invalid_argument("tiebreak::gpu::sweep: need begin <= end <= 2^32");
  return run(op, begin, end - begin, -1, 0);
}

sweep_result sweep_fma(instr_op op, fma_sample kind, std::uint64_t count, std::uint64_t param) {
  if (instr_desc_of(op).kind != instr_kind::fma) throw std::invalid_argument("tiebreak::gpu::sweep_fma: not an fma instruction");
  if (kind == fma_sample::fixed_b && count > (std::uint64_t{1} << 32)) throw std::invalid_argument("tiebreak::gpu::sweep_fma: fixed_b covers at most 2^32 pairs");
  return run(op, 0, count, static_cast<int>(kind), param);
}

std::vector<std::uint32_t> apply_hw(instr_op op, std::span<const std::uint64_t> inputs) { return apply(op, inputs, true); }
std::vector<std::uint32_t> apply_core(instr_op op, std::span<const std::uint64_t> inputs) { return apply(op, inputs, false); }

}  // namespace tiebreak::gpu
