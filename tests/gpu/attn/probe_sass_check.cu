// SPDX-License-Identifier: Apache-2.0
// Compiled twice by tools/probe-sass-check.sh (never linked): the forward kernel with probe::no_probe
// and with `trap_probe`, an empty probe whose hooks would trap if any were reached. Equal SASS (up
// to the kernels' names) shows that a disabled probe leaves nothing in the kernel: no hook call, no
// register, no parameter — the uninstrumented kernel is the instrumented source with the
// instrumentation compiled away (STYLE.md, principle 5).
#include "../../../cuda/attention/flash_device.cuh"

namespace {
struct trap_probe {
#ifdef TIEBREAK_TRAP_PROBE_ENABLED
  static constexpr bool enabled = true;  // the self-test: then the SASS must differ (the hooks trap)
#else
  static constexpr bool enabled = false;
#endif
  tiebreak::probe::head_counters c;  // what thread_counting_probe holds (not a register when disabled)
  __device__ void on_repeated_max(const tiebreak::probe::repeated_max_event&) const { __trap(); }
  __device__ void on_p_one(const tiebreak::probe::p_one_event&) const { __trap(); }
  __device__ void on_output_error(const tiebreak::probe::output_error_event&) const { __trap(); }
  __device__ void on_delta_error(const tiebreak::probe::delta_error_event&) const { __trap(); }
  __device__ tiebreak::probe::head_counters counters() const {
    __trap();
    return c;
  }
};
#ifdef TIEBREAK_TRAP_PROBE
using probe_t = trap_probe;
#else
using probe_t = tiebreak::probe::no_probe;
#endif
}  // namespace

__global__ void __launch_bounds__(tiebreak::attn::fwd_threads, tiebreak::attn::fwd_min_blocks<probe_t::enabled, 128, tiebreak::attn::exp2_policy::software>)
    probe_sass_kernel(tiebreak::attn::flash_args a, tiebreak::attn::flash_consts c) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using be_t = tiebreak::gpu::detail::device_backend<tiebreak::attn::fwd_threads>;
  be_t be{reinterpret_cast<std::uint16_t*>(smem_raw)};
  tiebreak::attn::flash_forward_block<be_t, 128, tiebreak::attn::out_mode::debias, tiebreak::attn::score_scaling::unfused,
                                      probe_t>(be, a, c, 0, 0, static_cast<int>(blockIdx.x), nullptr);
}
