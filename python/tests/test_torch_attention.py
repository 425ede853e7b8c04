# SPDX-License-Identifier: Apache-2.0
"""tiebreak.torch's attention op (torch.ops.tiebreak.flash_attention): the CPU op against the numpy
twin bit for bit, per-head modes, the backward against PyTorch's SDPA math backend in float64, the
FlashAttention module and set_attention_modes, opcheck, and (with a GPU and tiebreak._cuda) the CUDA
op against the CPU twin bit for bit. Skipped, with the reason shown, where torch is not installed
(CI); run on the device: tools/device-check.sh python (docs/python.md)."""

import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI): the tiebreak.torch tests run on the device")

import tiebreak as tb  # noqa: E402
from tiebreak import torch as tbt  # noqa: E402
from tiebreak import _torch_attention  # noqa: E402

from attention_reference import attention_f64, bf16_values, inputs, relative_error  # noqa: E402

if not _torch_attention.HAVE_CUSTOM_OP:
    pytestmark = pytest.mark.skip(reason=f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)")

F = torch.nn.functional
OP = None if not _torch_attention.HAVE_CUSTOM_OP else torch.ops.tiebreak.flash_attention


def t_bf16(bits):
    """numpy uint16 bf16 encodings -> a torch bfloat16 tensor (the same bits)."""
    return torch.from_numpy(np.ascontiguousarray(bits).view(np.int16)).view(torch.bfloat16).clone()


def bits(t):
    """torch bfloat16 -> numpy uint16 encodings."""
    return t.detach().cpu().contiguous().view(torch.int16).numpy().view(np.uint16)


def f32_bits(t):
    return t.detach().cpu().contiguous().numpy().view(np.uint32)


def math_backend():
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel(SDPBackend.MATH)


def test_cpu_op_equals_the_numpy_twin_bit_for_bit():
    # GQA, causal with seq_q < seq_k, two modes on the two key/value heads.
    q, k, v, do = inputs(1, 4, 2, 40, 72, 64, seed=21)
    modes = "fp32,fp32,debias,debias"
    ref = tb.attention(q, k, v, do, causal=True, modes=modes, seed=3)
    tq, tk, tv = (t_bf16(x).requires_grad_() for x in (q, k, v))
    o, lse, o32 = OP(tq, tk, tv, True, 0.125, modes, 2.0, 3, "unfused")
    assert o.dtype == torch.bfloat16 and lse.dtype == torch.float32 and o32.shape == o.shape
    assert not lse.requires_grad and not o32.requires_grad
    np.testing.assert_array_equal(bits(o), ref.o)
    np.testing.assert_array_equal(f32_bits(lse), ref.lse.view(np.uint32))
    np.testing.assert_array_equal(f32_bits(o32), ref.o_f32.view(np.uint32))
    o.backward(t_bf16(do))
    for name, t in (("dq", tq), ("dk", tk), ("dv", tv)):
        np.testing.assert_array_equal(bits(t.grad), getattr(ref, name), err_msg=name)
    # Without an fp32 head the f32 O is not kept (an empty third output).
    assert OP(tq, tk, tv, True, 0.125, "bf16", 2.0, 3, "unfused")[2].numel() == 0


def test_cpu_op_with_the_sfu_exponential_equals_the_numpy_twin_bit_for_bit():
    # exp="sfu": the model of the H200's ex2.approx.ftz on the CPU, forward and backward, as numpy's.
    q, k, v, do = inputs(1, 2, 1, 96, 96, 64, seed=23)
    ref = tb.attention(q, k, v, do, causal=True, modes="bf16,bf16", exp="sfu")
    sw = tb.attention(q, k, v, do, causal=True, modes="bf16,bf16")
    tq, tk, tv = (t_bf16(x).requires_grad_() for x in (q, k, v))
    o, lse, _ = OP(tq, tk, tv, True, 0.125, "bf16,bf16", 2.0, 0, "unfused", "sfu")
    np.testing.assert_array_equal(bits(o), ref.o)
    np.testing.assert_array_equal(f32_bits(lse), ref.lse.view(np.uint32))
    o.backward(t_bf16(do))
    for name, t in (("dq", tq), ("dk", tk), ("dv", tv)):
        np.testing.assert_array_equal(bits(t.grad), getattr(ref, name), err_msg=name)
    assert np.any(ref.o != sw.o) and np.any(ref.dq != sw.dq)  # the two exponentials differ on these inputs
    # The function and the module pass it on; a bad name is refused.
    o2 = tbt.flash_attention(t_bf16(q), t_bf16(k), t_bf16(v), causal=True, scale=0.125, exp="sfu")
    np.testing.assert_array_equal(bits(o2), ref.o)
    m = tbt.FlashAttention(causal=True, scale=0.125, exp="sfu")
    np.testing.assert_array_equal(bits(m(t_bf16(q), t_bf16(k), t_bf16(v))), ref.o)
    assert "exp='sfu'" in repr(m)
    with pytest.raises(ValueError, match="exp: unknown exponential 'x'"):
        tbt.flash_attention(t_bf16(q), t_bf16(k), t_bf16(v), exp="x")


def test_fp32_heads_equal_a_whole_fp32_call_bit_for_bit():
    q, k, v, do = inputs(2, 4, 4, 64, 64, 64, seed=4)
    outs = {}
    for modes in ("bf16,fp32,stochastic,fp32", "fp32"):
        tq, tk, tv = (t_bf16(x).requires_grad_() for x in (q, k, v))
        o, lse, o32 = OP(tq, tk, tv, False, 0.125, modes, 2.0, 0, "unfused")
        o.backward(t_bf16(do))
        outs[modes] = (bits(o), f32_bits(lse), f32_bits(o32), bits(tq.grad), bits(tk.grad), bits(tv.grad))
    mixed, whole = outs["bf16,fp32,stochastic,fp32"], outs["fp32"]
    for i, name in enumerate(("o", "lse", "o32", "dq", "dk", "dv")):
        for h in (1, 3):
            np.testing.assert_array_equal(mixed[i][:, h], whole[i][:, h], err_msg=f"{name} head {h}")
    # and the bf16 head is not the fp32 head's O
    assert not np.array_equal(mixed[0][:, 0], whole[0][:, 0]) or not np.array_equal(mixed[3][:, 0], whole[3][:, 0])


@pytest.mark.parametrize("heads,kv_heads,causal", [(2, 2, False), (4, 2, True)])
def test_backward_against_sdpa_math_f64(heads, kv_heads, causal):
    q, k, v, do = inputs(1, heads, kv_heads, 64, 64, 64, seed=31)
    tq, tk, tv = (t_bf16(x).requires_grad_() for x in (q, k, v))
    o = tbt.flash_attention(tq, tk, tv, causal=causal, modes="fp32")
    o.backward(t_bf16(do))
    xs = [t_bf16(x).double().requires_grad_() for x in (q, k, v)]
    g = heads // kv_heads
    with math_backend():
        ref = F.scaled_dot_product_attention(xs[0], xs[1].repeat_interleave(g, dim=1), xs[2].repeat_interleave(g, dim=1),
                                             is_causal=causal)
    ref.backward(t_bf16(do).double())
    # The numpy f64 reference agrees with SDPA's math backend (the oracle of the other tests).
    ref_np = attention_f64(bf16_values(q), bf16_values(k), bf16_values(v), bf16_values(do), causal=causal)
    np.testing.assert_allclose(ref.detach().numpy(), ref_np["o"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(xs[1].grad.numpy(), ref_np["dk"], rtol=1e-10, atol=1e-12)
    # Bounds in bf16's unit roundoff U = 2^-9, those of test_attention.py (the twin against the numpy f64
    # attention: O 1.1 U Frobenius and 1.9 U largest, gradients 1.3 U and 1.8 U measured).
    U = 2.0**-9
    err = relative_error(o.detach().double().numpy(), ref.detach().numpy())
    assert err[0] < 2 * U and err[1] < 3 * U, err
    for name, t, r in (("dq", tq, xs[0]), ("dk", tk, xs[1]), ("dv", tv, xs[2])):
        err = relative_error(t.grad.double().numpy(), r.grad.numpy())
        assert err[0] < 3 * U and err[1] < 4 * U, (name, err)


class _Block(torch.nn.Module):
    def __init__(self, dim=128, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.attn = tbt.FlashAttention(causal=True)

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, e // self.heads).permute(2, 0, 3, 1, 4)
        return self.attn(q, k, v).transpose(1, 2).reshape(b, s, e)


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([_Block(), _Block()])

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


def test_module_modes_by_name_and_a_training_step():
    torch.manual_seed(0)
    model = _Model()
    got = tbt.set_attention_modes(model, {"layers.*": "bf16", "layers.0.attn": "fp32", "layers.1.*": ["debias", "fp32"]})
    assert got == {"layers.0.attn": "fp32", "layers.1.attn": ["debias", "fp32"]}
    assert tbt.attention_modes(model) == got
    with pytest.raises(KeyError, match="no FlashAttention module matches 'layer.0.attn'"):
        tbt.set_attention_modes(model, {"layer.0.attn": "fp32"})
    with pytest.raises(ValueError, match="modes: unknown mode 'f32'"):
        tbt.set_attention_modes(model, {"layers.0.attn": "f32"})
    x = torch.randn(1, 64, 128)
    # Layer 0's attention is the functional op with its modes (q, k, v rounded to bf16 first).
    b, s, e = x.shape
    q, k, v = model.layers[0].qkv(x).view(b, s, 3, 2, 64).permute(2, 0, 3, 1, 4)
    direct = tbt.flash_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal=True, modes="fp32")
    assert torch.equal(model.layers[0].attn(q, k, v), direct.float())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(x).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
    opt.step()
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()))
    with pytest.raises(ValueError, match="dtype torch.float32"):
        tbt.flash_attention(q, k, v)


def test_opcheck():
    q, k, v, do = inputs(1, 2, 2, 16, 16, 64, seed=6)
    args = (t_bf16(q).requires_grad_(), t_bf16(k).requires_grad_(), t_bf16(v).requires_grad_(), False, 0.125,
            "bf16,fp32", 2.0, 0, "unfused")
    utils = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(torch.ops.tiebreak.flash_attention.default, args, test_utils=utils)
    torch.library.opcheck(torch.ops.tiebreak.flash_attention.default, args + ("sfu",), test_utils=utils)
    o, lse, o32 = OP(*(a.detach() if isinstance(a, torch.Tensor) else a for a in args))
    bargs = (t_bf16(do), *(a.detach() for a in args[:3]), o, lse, o32, *args[3:])
    torch.library.opcheck(torch.ops.tiebreak.flash_attention_backward.default, bargs,
                          test_utils=("test_schema", "test_faketensor"))


CUDA_CASES = [
    # batch, heads, kv_heads, seq_q, seq_k, dim, causal, modes, scaling, exp
    (2, 2, 2, 128, 128, 64, False, "bf16,debias", "unfused", "software"),
    (1, 4, 2, 100, 70, 64, True, "fp32,fp32,stochastic,stochastic", "unfused", "software"),  # 30 rows see no key
    (1, 2, 1, 65, 129, 128, True, "fp32,fp32", "fused", "software"),
    (1, 4, 4, 64, 200, 128, False, "stochastic,fp32,bf16,debias", "unfused", "software"),
    (1, 4, 2, 100, 70, 64, True, "bf16,bf16,debias,debias", "unfused", "sfu"),  # the SFU's exponential
]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("case", CUDA_CASES)
def test_cuda_op_equals_the_cpu_twin_bit_for_bit(case):
    if not tbt.cuda_attention_available():
        pytest.skip("tiebreak._cuda is not built (-DTIEBREAK_PYTHON_CUDA=ON) or there is no sm_90 device")
    B, H, Hkv, Sq, Sk, D, causal, modes, scaling, exp = case
    q, k, v, do = inputs(B, H, Hkv, Sq, Sk, D, seed=Sq + Sk)
    scale = D ** -0.5
    results = {}
    for dev in ("cpu", "cuda"):
        tq, tk, tv = (t_bf16(x).to(dev).requires_grad_() for x in (q, k, v))
        stream = None
        if dev == "cuda":
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():  # a side stream
            o, lse, o32 = OP(tq, tk, tv, causal, scale, modes, 1.5, 1234, scaling, exp)
            o.backward(t_bf16(do).to(dev))
        if stream is not None:
            torch.cuda.current_stream().wait_stream(stream)
            torch.cuda.synchronize()
        results[dev] = {"o": bits(o), "lse": f32_bits(lse), "o32": f32_bits(o32), "dq": bits(tq.grad),
                        "dk": bits(tk.grad), "dv": bits(tv.grad)}
    for name, a in results["cpu"].items():
        np.testing.assert_array_equal(a, results["cuda"][name], err_msg=name)
    # and the op is the numpy twin
    ref = tb.attention(q, k, v, do, causal=causal, scale=scale, modes=modes, beta=1.5, seed=1234, scaling=scaling,
                       exp=exp)
    np.testing.assert_array_equal(results["cuda"]["o"], ref.o)
    np.testing.assert_array_equal(results["cuda"]["dk"], ref.dk)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_module_training_step():
    if not tbt.cuda_attention_available():
        pytest.skip("tiebreak._cuda is not built (-DTIEBREAK_PYTHON_CUDA=ON) or there is no sm_90 device")
    torch.manual_seed(1)
    model = _Model().cuda()
    tbt.set_attention_modes(model, {"layers.0.attn": "debias", "layers.1.attn": "fp32,stochastic"})
    x = torch.randn(2, 256, 128, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
