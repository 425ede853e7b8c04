# SPDX-License-Identifier: Apache-2.0
"""tiebreak.sum, tiebreak.mma, tiebreak.audit and tiebreak.analysis on arrays, and the lazy import."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tiebreak as tb
from tiebreak import analysis


def cli():
    path = os.environ.get("TIEBREAK_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("TIEBREAK_CLI (the built tiebreak binary) is not set: ctest sets it")
    return path


def bf16_rne(x32: np.ndarray) -> np.ndarray:
    """f32 -> bf16 RNE values by integer arithmetic (finite inputs), independent of the core."""
    u = x32.view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


# --- sum ------------------------------------------------------------------------------------------

def test_sum_bf16_in_f32_equals_numpy_float32_loop():
    rng = np.random.default_rng(5)
    x = bf16_rne(rng.standard_normal((64, 33)).astype(np.float32))  # already bf16: reading is exact
    r = tb.sum(x, "bf16", "f32")
    acc = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        acc = (acc + x[:, j]).astype(np.float32)  # IEEE f32 addition, round to nearest even
    np.testing.assert_array_equal(r["accum_bits"], acc.view(np.uint32))
    np.testing.assert_array_equal(r["value"], bf16_rne(acc).astype(np.float64))
    assert r["bits"].dtype == np.uint16 and r["value"].shape == (64,)


def test_sum_matches_cli_add():
    values = [1.0, 1.0078125, 0.000244140625, -0.3, 7.5]
    for mode in ("rne", "sr", "rz"):
        out = subprocess.run([cli(), "add", "--format", "bf16", "--accumulate", "f32", "--mode", mode, "--seed", "3",
                              "--json", "--", *[float(v).hex() for v in values]], check=True, capture_output=True, text=True)
        j = json.loads(out.stdout)
        r = tb.sum(np.array(values), "bf16", "f32", mode, seed=3)
        assert int(j["bits"], 16) == int(r["bits"]), mode
        assert float(j["error_ulps"]) == float(r["error_ulps"]), mode
        assert j["flags"] == tb.flag_names(int(r["flags"])), mode


def test_sum_orders_and_errors():
    x = np.float32([1.0, 0, 0, 0, 2.0**-9, 2.0**-9, 2.0**-9, 2.0**-9])
    seq = tb.sum(x, "bf16")  # every 2^-9 (a quarter ulp) is lost against 1 in bf16
    pair = tb.sum(x, "bf16", order="pairwise")  # 1 + (4 * 2^-9): exact
    # exact 1 + 2^-7, result 1: -2^-7 = -1 ulp of bf16 at 1
    assert float(seq["value"]) == 1.0 and float(seq["error_ulps"]) == -1.0
    assert float(pair["value"]) == 1.0078125 and float(pair["error_ulps"]) == 0.0
    with pytest.raises(ValueError, match="order: unknown order 'random'"):
        tb.sum(x, "bf16", order="random")
    with pytest.raises(ValueError, match="accumulate: unknown format"):
        tb.sum(x, "bf16", "f33")


# --- mma ------------------------------------------------------------------------------------------

def test_mma_exact_on_small_integers():
    rng = np.random.default_rng(6)
    a = rng.integers(-8, 9, (16, 32)).astype(np.float64)
    b = rng.integers(-8, 9, (32, 8)).astype(np.float64)
    c = rng.integers(-100, 100, (16, 8)).astype(np.float64)
    for instr in ("mma.m16n8k16.bf16", "wgmma.k32.e4m3", "mma.m16n8k8.tf32"):
        d = tb.mma(instr, a, b, c)
        np.testing.assert_array_equal(d["value"], a @ b + c)  # every product and sum is exact here
        assert d["inputs_rounded"] == 0 and d["bits"].dtype == np.uint32


def test_mma_matches_cli_element():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((16, 16))
    b = rng.standard_normal((16, 8)) * 2.0**-12
    c = rng.standard_normal((16, 8))
    d = tb.mma("mma.m16n8k16.bf16", a, b, c)
    out = subprocess.run([cli(), "mma", "--instr", "mma.m16n8k16.bf16", "--json",
                          "--a=" + ",".join(float(x).hex() for x in a[0]), "--b=" + ",".join(float(x).hex() for x in b[:, 0]),
                          "--c=" + float(c[0, 0]).hex()], check=True, capture_output=True, text=True)
    j = json.loads(out.stdout)
    assert int(j["bits"], 16) == int(d["bits"][0, 0])
    assert d["inputs_rounded"] > 0 and d["format"] == "f32"


def test_mma_bad_shapes():
    with pytest.raises(ValueError, match="must be a positive multiple of mma.m16n8k16.bf16's k = 16"):
        tb.mma("mma.m16n8k16.bf16", np.zeros((2, 8)), np.zeros((8, 2)))
    with pytest.raises(ValueError, match="instr: unknown instruction 'hmma'"):
        tb.mma("hmma", np.zeros((2, 16)), np.zeros((16, 2)))
    names = [i["name"] for i in tb.mma_instructions()]
    assert "wgmma.k32.e5m2" in names and len(names) == 8


# --- audit ----------------------------------------------------------------------------------------

def attention_problem(seed=8, b=1, h=2, s=12, d=16):
    rng = np.random.default_rng(seed)
    q, k, v = (bf16_rne(rng.standard_normal((b, h, s, d)).astype(np.float32)) for _ in range(3))
    sc = (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)) / np.sqrt(d)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    o = bf16_rne(o.astype(np.float32) * np.float32(1 + 2.0**-9))  # a biased "kernel": values rounded up
    return q, k, v, o


def test_audit_arrays_equals_cli_on_the_same_files(tmp_path):
    q, k, v, o = attention_problem()
    for name, arr in zip("qkvo", (q, k, v, o)):
        np.save(tmp_path / f"{name}.npy", arr)
    out = subprocess.run([cli(), "audit", str(tmp_path), "--json", "-q", "--threads", "1"], check=True,
                         capture_output=True, text=True)
    from_cli = json.loads(out.stdout)
    mine = tb.audit(q, k, v, o, threads=1)
    for key in ("timing_s", "source", "container", "command_line"):
        from_cli.pop(key, None)
        mine.pop(key, None)
    assert mine == from_cli
    assert mine["schema"].startswith("tiebreak.audit/")


def test_audit_bad_input_raises_the_cli_message():
    q, k, v, o = attention_problem()
    with pytest.raises(RuntimeError, match=r"arrays: shape mismatch: tensor 'o' \[1, 2, 12, 15\] has dim 15, v has 16"):
        tb.audit(q, k, v, o[..., :15])
    with pytest.raises(RuntimeError, match="arrays: tensor 'dq' needs the upstream gradient 'do', which is missing"):
        tb.audit(q, k, v, o, dq=q)


# --- analysis -------------------------------------------------------------------------------------

def test_analysis_against_numpy():
    rng = np.random.default_rng(9)
    m = rng.standard_normal((40, 30))
    r = analysis.spectral_norm(m, rel_tol=1e-12)
    exact = np.linalg.svd(m, compute_uv=False)
    assert r["converged"] and abs(r["spectral_norm"] - exact[0]) <= 1e-9 * exact[0]
    assert abs(np.linalg.norm(m @ r["right"]) - r["spectral_norm"]) <= 1e-9 * exact[0]
    assert abs(analysis.spectral_norm(m.T.astype(np.float32))["spectral_norm"] - exact[0]) <= 1e-5 * exact[0]
    s = analysis.exact_spectrum(m)
    np.testing.assert_allclose(s["singular_values"], exact, rtol=1e-12)
    b = rng.standard_normal((40, 30))
    cos = float(np.sum(m * b) / np.linalg.norm(m) / np.linalg.norm(b))
    assert analysis.frobenius_cosine(m, b) == pytest.approx(cos, rel=1e-12)
    angles = analysis.principal_angles(m[:, :3], m[:, :3] @ rng.standard_normal((3, 3)))["angles"]
    assert np.all(angles < 1e-7)
    errs = rng.standard_normal(1000) + 0.5
    bs = analysis.bias_summary(errs)
    assert bs["moments"]["n"] == 1000 and bs["moments"]["mean"] == pytest.approx(errs.mean(), rel=1e-12)
    assert bs["t_test"]["p_value"] < 1e-20 and bs["sign_test"]["positive"] > 500
    with pytest.raises(ValueError):
        analysis.frobenius_cosine(m, b[:, :2])


def test_trackers():
    rng = np.random.default_rng(10)
    w = [rng.standard_normal((16, 8)).astype(np.float32) for _ in range(3)]
    t = analysis.SpectralTracker()
    for step in range(3):
        res = t.push([x * (1 + 0.01 * step) for x in w])
        exact = [np.linalg.svd(x.astype(np.float64) * (1 + 0.01 * step), compute_uv=False)[0] for x in w]
        np.testing.assert_allclose(res["spectral_norms"], exact, rtol=1e-5)
    assert t.steps == 3
    u = analysis.UpdateAlignmentTracker(2)
    first = u.push(w[0])
    second = u.push(w[0] * 2)
    assert first["cosine_with_previous"] is None
    assert second["cosine_with_previous"] == pytest.approx(1.0, abs=1e-12)


# --- the package ----------------------------------------------------------------------------------

def test_import_is_lazy_and_works_without_the_extension():
    code = ("import sys; sys.modules['tiebreak._core'] = None\n"
            "import tiebreak\n"
            "assert 'tiebreak._api' not in sys.modules\n"
            "try:\n    tiebreak.round\nexcept ImportError:\n    print('lazy')\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "lazy"
