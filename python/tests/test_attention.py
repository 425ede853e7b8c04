# SPDX-License-Identifier: Apache-2.0
"""tiebreak.attention: the attention kernels' host twin on numpy arrays (the raw bindings of
tiebreak._core that tiebreak.torch's custom op calls), with output modes per head. Small shapes:
every mma runs through the tensor-core model."""

import numpy as np
import pytest

import tiebreak as tb
from tiebreak import _attention, _core

from attention_reference import attention_f64, bf16_values, inputs, relative_error

MODES = ("bf16", "fp32", "debias", "stochastic")
U = 2.0**-9  # unit roundoff of bf16


def values(bits):
    return bf16_values(bits)


@pytest.mark.parametrize("causal", [False, True])
def test_forward_and_backward_against_f64(causal):
    # GQA (2 query heads on one key/value head), ragged sequences, seq_q < seq_k.
    q, k, v, do = inputs(1, 2, 1, 40, 72, 64, seed=11)
    r = tb.attention(q, k, v, do, causal=causal, modes="fp32", threads=2)
    ref = attention_f64(values(q), values(k), values(v), values(do), causal=causal)
    # O: f32 accumulation of bf16 P-bar times bf16 V, then one division: errors of the order of
    # bf16's unit roundoff U = 2^-9 relative to O's scale (measured: 0.7 U Frobenius, 0.9 U largest);
    # the bf16 O adds one rounding (measured 1.1 U, 1.9 U).
    o32_err = relative_error(r.o_f32, ref["o"])
    assert o32_err[0] < 2 * U and o32_err[1] < 2 * U, o32_err
    o_err = relative_error(values(r.o), ref["o"])
    assert o_err[0] < 2 * U and o_err[1] < 3 * U, o_err
    np.testing.assert_allclose(r.lse, ref["lse"], rtol=0, atol=2e-6)  # measured 5e-7
    np.testing.assert_allclose(r.delta, ref["delta"], rtol=0, atol=2 * U * np.abs(ref["delta"]).max())
    # Gradients: bf16 P and dS (a rounding each), f32 accumulation, bf16 results (measured 1.3 U, 1.8 U).
    for name in ("dq", "dk", "dv"):
        err = relative_error(values(getattr(r, name)), ref[name])
        assert err[0] < 3 * U and err[1] < 4 * U, (name, err)


def test_o_is_the_rounding_of_the_f32_o():
    q, k, v, _ = inputs(1, 4, 4, 64, 64, 64, seed=3)
    r = tb.attention(q, k, v, modes="bf16,fp32,debias,stochastic", seed=9)
    rne = tb.round(r.o_f32, "bf16", errors=False).bits
    # bf16 and fp32 heads: nearest even of the f32 O (fp32 heads: the op's own rounding of its O).
    np.testing.assert_array_equal(r.o[:, :2], rne[:, :2])
    # stochastic: one of the two neighbours of the f32 O, not always the nearest.
    o, x = values(r.o[:, 3]), r.o_f32[:, 3].astype(np.float64)
    down = tb.round(r.o_f32[:, 3], "bf16", "rd", errors=False).values
    up = tb.round(r.o_f32[:, 3], "bf16", "ru", errors=False).values
    assert np.all((o == down) | (o == up))
    assert np.any(r.o[:, 3] != rne[:, 3])
    assert np.all(np.abs(o - x) <= np.abs(up - down))


def test_per_head_modes_equal_whole_calls_bit_for_bit():
    q, k, v, do = inputs(2, 2, 2, 64, 64, 64, seed=5)
    mixed = tb.attention(q, k, v, do, modes=["bf16", "fp32"], causal=True)
    whole = {m: tb.attention(q, k, v, do, modes=m, causal=True) for m in ("bf16", "fp32")}
    for h, m in enumerate(("bf16", "fp32")):
        w = whole[m]
        for name in ("o", "o_f32", "lse", "delta", "dq", "dk", "dv"):
            np.testing.assert_array_equal(getattr(mixed, name)[:, h], getattr(w, name)[:, h], err_msg=f"{name} head {h}")
    # fp32 heads do change what the bf16 heads cannot: delta from the f32 O.
    assert not np.array_equal(whole["fp32"].delta, whole["bf16"].delta)


def test_per_head_modes_with_grouped_query_heads():
    q, k, v, do = inputs(1, 4, 2, 64, 64, 64, seed=8)
    mixed = tb.attention(q, k, v, do, modes="fp32,fp32,debias,debias")
    w32 = tb.attention(q, k, v, do, modes="fp32")
    wdb = tb.attention(q, k, v, do, modes="debias")
    for name in ("o", "o_f32", "lse", "dq"):
        np.testing.assert_array_equal(getattr(mixed, name)[:, :2], getattr(w32, name)[:, :2])
        np.testing.assert_array_equal(getattr(mixed, name)[:, 2:], getattr(wdb, name)[:, 2:])
    for name in ("dk", "dv"):  # key/value head 0 serves the fp32 heads, head 1 the debias heads
        np.testing.assert_array_equal(getattr(mixed, name)[:, 0], getattr(w32, name)[:, 0])
        np.testing.assert_array_equal(getattr(mixed, name)[:, 1], getattr(wdb, name)[:, 1])
    with pytest.raises(ValueError, match=r"query heads 0\.\.1 share key/value head 0 and must share a mode"):
        tb.attention(q, k, v, modes="fp32,bf16,bf16,bf16")


def test_threads_float_inputs_and_probe():
    q, k, v, do = inputs(1, 2, 2, 64, 64, 64, seed=2)
    one = tb.attention(q, k, v, do, modes="debias", threads=1)
    two = tb.attention(values(q).astype(np.float32), values(k), values(v), values(do), modes="debias", threads=2)
    for name in ("o", "o_f32", "lse", "delta", "dq", "dk", "dv"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name), err_msg=name)
    # Repeated row maxima: keys 3 and 5 are all ones, and so is every query row: their score 64
    # exceeds every other key's (a sum of 64 values in [-1, 1)).
    k2 = k.copy()
    k2[:, :, 3] = k2[:, :, 5] = 0x3F80
    q2 = np.full_like(q, 0x3F80)
    p = tb.attention(q2, k2, v, do, modes="bf16", probe=True)
    assert p.counters is not None and len(p.counters) == 2
    for c in p.counters:
        assert set(c) == {"repeated_max_exact", "repeated_max_near", "p_one", "output_error", "delta_error"}
        assert c["repeated_max_exact"] >= 64 and c["p_one"] >= 64
        assert c["output_error"]["count"] == 64 * 64
        assert c["delta_error"]["count"] == 64
    assert tb.attention(q, k, v).counters is None


def test_sfu_exponential_is_another_rounding_of_the_same_attention():
    # exp="sfu": the model of the H200's ex2.approx.ftz (what the kernels' fast policy computes). Same
    # attention to within bf16's rounding, other bits; the planted ties' P-bar == 1 events the same
    # (x = 0 at the maximum under both exponentials).
    q, k, v, do = inputs(1, 2, 1, 96, 96, 64, seed=21)
    sw = tb.attention(q, k, v, do, causal=True, probe=True, threads=2)
    sfu = tb.attention(q, k, v, do, causal=True, probe=True, threads=2, exp="sfu")
    assert np.any(sw.o_f32 != sfu.o_f32) and np.any(sw.dq != sfu.dq)
    np.testing.assert_allclose(sfu.o_f32, sw.o_f32, rtol=0, atol=4 * U * np.abs(sw.o_f32).max())
    np.testing.assert_allclose(sfu.lse, sw.lse, rtol=0, atol=2e-6)
    assert [c["p_one"] for c in sfu.counters] == [c["p_one"] for c in sw.counters]
    # The raw binding takes it by name too, after threads.
    again = tb.attention(q, k, v, do, causal=True, probe=True, threads=1, exp="sfu")
    np.testing.assert_array_equal(again.o, sfu.o)
    np.testing.assert_array_equal(again.dk, sfu.dk)


def test_bad_calls_raise_value_errors():
    q, k, v, _ = inputs(1, 2, 2, 16, 16, 64, seed=1)
    with pytest.raises(ValueError, match="modes: unknown mode 'fp16'"):
        tb.attention(q, k, v, modes="fp16")
    with pytest.raises(ValueError, match="modes: 3 modes for 2 heads"):
        tb.attention(q, k, v, modes=["bf16"] * 3)
    with pytest.raises(ValueError, match="head dims 64 and 128"):
        tb.attention(q[..., :32], k[..., :32], v[..., :32])
    with pytest.raises(ValueError, match="v: shape"):
        tb.attention(q, k, v[:, :, :8])
    with pytest.raises(ValueError, match="must be finite and greater than 1"):
        tb.attention(q, k, v, modes="debias", beta=1.0)
    with pytest.raises(ValueError, match="dtype int32"):
        tb.attention(q.astype(np.int32), k, v)
    with pytest.raises(ValueError, match="scaling: unknown score scaling"):
        tb.attention(q, k, v, scaling="both")
    with pytest.raises(ValueError, match="exp: unknown exponential 'mufu'"):
        tb.attention(q, k, v, exp="mufu")
    # The raw binding checks what the kernels need (here a missing O) before it runs.
    lse = np.empty((1, 2, 16), np.float32)
    with pytest.raises(ValueError, match="a tensor the call needs is missing"):
        _core.attention_forward(q.ctypes.data, k.ctypes.data, v.ctypes.data, 0, 0, lse.ctypes.data,
                                (1, 2, 2, 16, 16, 64), False, 0.125, "bf16")
    with pytest.raises(ValueError, match="mode: unknown mode 'x'"):
        _core.attention_forward(q.ctypes.data, k.ctypes.data, v.ctypes.data, 0, 0, lse.ctypes.data,
                                (1, 2, 2, 16, 16, 64), False, 0.125, "x")


def test_mode_groups():
    assert _attention.mode_groups(["bf16", "fp32", "bf16", "debias"], 4) == [
        ("bf16", [0, 2], [0, 2]), ("fp32", [1], [1]), ("debias", [3], [3])]
    assert _attention.mode_groups(["bf16", "fp32", "stochastic", "debias"], 4, merge_bf16_like=True) == [
        ("bf16", [0, 2, 3], [0, 2, 3]), ("fp32", [1], [1])]
    assert _attention.mode_groups(["fp32"] * 2 + ["bf16"] * 2, 2) == [("fp32", [0, 1], [0]), ("bf16", [2, 3], [1])]
    assert _attention.parse_modes("debias", 3, 1) == ["debias"] * 3
    assert set(MODES) == set(_attention.OUT_MODES)


def test_cuda_binding_checks_its_calls():
    # tiebreak._cuda (built in CUDA builds) takes device addresses; flash_check refuses a bad call
    # before any memory is touched, so this runs without a GPU.
    try:
        from tiebreak import _cuda
    except ImportError as e:
        pytest.skip(f"tiebreak._cuda is not built (a build without CUDA): {e}")
    assert isinstance(_cuda.attention_available(), bool)
    with pytest.raises(ValueError, match="head dims 64 and 128"):
        _cuda.attention_forward(8, 8, 8, 8, 0, 8, (1, 1, 1, 16, 16, 32), False, 0.125, "bf16")
    with pytest.raises(ValueError, match="a tensor the call needs is missing"):
        _cuda.attention_backward(8, 8, 8, 8, 0, 8, 0, 8, 8, 8, 8, (1, 1, 1, 16, 16, 64), False, 0.125, "bf16")
    with pytest.raises(ValueError, match="mode: unknown mode 'fp8'"):
        _cuda.attention_forward(8, 8, 8, 8, 0, 8, (1, 1, 1, 16, 16, 64), False, 0.125, "fp8", stream=0)
