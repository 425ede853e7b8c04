// SPDX-License-Identifier: Apache-2.0
/// @file The experiment's attention on the H200: tiebreak's kernels (tiebreak::gpu), tensors copied in
/// and out per call. Calls from the cells' threads are serialised: the host part of a step (Eigen
/// products, spectral norms) dominates at the experiment's sizes, the kernels take microseconds.
#include "tiebreak/experiment/causal.hpp"

#include <mutex>
#include <stdexcept>

#ifdef TIEBREAK_HAVE_GPU_ATTENTION
#include "tiebreak/gpu/cuda_check.cuh"
#include "tiebreak/gpu/flash.hpp"
#endif

namespace tiebreak::experiment {

#ifdef TIEBREAK_HAVE_GPU_ATTENTION
namespace {

using gpu::detail::device_buffer;
constexpr gpu::detail::cuda_check check{"tiebreak experiment"};

template <class T>
void up(const device_buffer<T>& d, const T* h, std::size_t n) {
  check(cudaMemcpy(d.data(), h, n * sizeof(T), cudaMemcpyHostToDevice), "copy to the device");
}
template <class T>
void down(T* h, const device_buffer<T>& d, std::size_t n) {
  check(cudaMemcpy(h, d.data(), n * sizeof(T), cudaMemcpyDeviceToHost), "copy to the host");
}

class gpu_backend final : public attention_backend {
 public:
  void forward(const attn::flash_args& a) override { call(a, false); }
  void backward(const attn::flash_args& a) override { call(a, true); }
  std::string name() const override { return "gpu"; }

 private:
  void call(const attn::flash_args& host, bool backward) {
    const std::lock_guard lock(mu_);
    const attn::shape& s = host.prob.shape;
    const attn::flash_tensors& t = host.t;
    const bool f32_mode = host.opt.mode == attn::out_mode::fp32;
    device_buffer<std::uint16_t> q(s.q_size(), check), k(s.k_size(), check), v(s.v_size(), check),
        dout(backward ? s.o_size() : 0, check), ob(s.o_size(), check), dq(backward ? s.q_size() : 0, check),
        dk(backward ? s.k_size() : 0, check), dv(backward ? s.v_size() : 0, check);
    device_buffer<float> of(s.o_size(), check), lse(s.lse_size(), check), delta(backward ? s.lse_size() : 0, check);
    up(q, t.q, s.q_size());
    up(k, t.k, s.k_size());
    up(v, t.v, s.v_size());
    attn::flash_args a = host;
    a.t = attn::flash_tensors{q.data(), k.data(), v.data(), nullptr, (!f32_mode && t.o_bf16) ? ob.data() : nullptr,
                              t.o_f32 ? of.data() : nullptr, lse.data()};
    if (!backward) {
      gpu::attention_forward(a);
      if (a.t.o_bf16) down(t.o_bf16, ob, s.o_size());
      if (a.t.o_f32) down(t.o_f32, of, s.o_size());
      down(t.lse, lse, s.lse_size());
      return;
    }
    up(dout, t.dout, s.o_size());
    if (a.t.o_bf16) up(ob, t.o_bf16, s.o_size());
    if (a.t.o_f32) up(of, t.o_f32, s.o_size());
    up(lse, t.lse, s.lse_size());
    a.t.dout = dout.data();
    a.t.delta = delta.data();
    a.t.dq = dq.data();
    a.t.dk = dk.data();
    a.t.dv = dv.data();
    gpu::attention_backward(a);
    down(t.delta, delta, s.lse_size());
    down(t.dq, dq, s.q_size());
    down(t.dk, dk, s.k_size());
    down(t.dv, dv, s.v_size());
  }
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<attention_backend> make_gpu_backend() {
  if (!gpu::attention_available())
    throw std::runtime_error("--device gpu: no CUDA device of compute capability 9.0 that runs the attention kernels");
  return std::make_unique<gpu_backend>();
}
#else
std::unique_ptr<attention_backend> make_gpu_backend() {
  throw std::runtime_error("--device gpu: this build has no GPU attention kernels (built without CUDA)");
}
#endif

}  // namespace tiebreak::experiment
