# SPDX-License-Identifier: Apache-2.0
"""tiebreak.round on arrays: against independent oracles (integer bit arithmetic, numpy's float16),
exact error checks, the CLI's JSON, the bulk path, stochastic rounding's stream."""

import json
import os
import subprocess

import numpy as np
import pytest

import tiebreak as tb


def bf16_rne_oracle(x32: np.ndarray) -> np.ndarray:
    """f32 -> bf16 RNE by integer arithmetic on the encodings (finite, non-NaN inputs): add
    0x7fff + lsb and truncate; written independently of the core."""
    u = x32.view(np.uint32).astype(np.uint64)
    lsb = (u >> 16) & 1
    return ((u + 0x7FFF + lsb) >> 16).astype(np.uint16)


def random_f32(n: int, seed: int) -> np.ndarray:
    """Random encodings over the whole finite range plus ties and near-ties around 1."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    ties = (np.uint32(0x3F808000) + np.arange(-2, 3, dtype=np.int64).astype(np.uint32)).view(np.float32)
    return np.concatenate([x, ties, -ties, np.float32([0.0, -0.0, 1e-45, -1e-45])])


def test_bf16_rne_equals_bit_oracle():
    x = random_f32(200_000, 1)
    overflow = np.abs(x) >= np.float32(3.3961514e38)  # rounds to Inf: the oracle's carry gives Inf too
    r = tb.round(x, "bf16")
    np.testing.assert_array_equal(r.bits, bf16_rne_oracle(x))
    assert r.values.dtype == np.float32 and r.bits.dtype == np.uint16
    assert np.all(np.isinf(r.values[overflow]))


def test_f16_rne_equals_numpy_float16():
    x = random_f32(200_000, 2)
    r = tb.round(x, "f16")
    with np.errstate(over="ignore"):
        expect = x.astype(np.float16)  # numpy's f32 -> f16 is round-to-nearest-even
    np.testing.assert_array_equal(r.bits, expect.view(np.uint16))


def test_error_ulps_is_exact_signed_error():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(100_000) * 10.0).astype(np.float32)
    for mode in ("rne", "rna", "rz", "ru", "rd", "rto"):
        r = tb.round(x, "bf16", mode)
        v = r.values.astype(np.float64)
        # The ulp of the grid the value is rounded on: bf16's spacing at the exact input (all
        # normal here), also when the result rounds up to the next power of two.
        ulp = np.exp2(np.floor(np.log2(np.abs(x.astype(np.float64)))) - 7)
        np.testing.assert_array_equal(r.error_ulps, (v - x.astype(np.float64)) / ulp)
        inexact = (r.flags & tb.FLAGS["inexact"]) != 0
        np.testing.assert_array_equal(inexact, v != x)


def test_directed_modes_and_ties():
    x = np.float32([1.00390625, 1.01171875, -1.00390625])  # 1 + 2^-8 and 1 + 3 * 2^-8: ties
    assert tb.round(x, "bf16", "rne").bits.tolist() == [0x3F80, 0x3F82, 0xBF80]
    assert tb.round(x, "bf16", "rna").bits.tolist() == [0x3F81, 0x3F82, 0xBF81]
    assert tb.round(x, "bf16", "rz").bits.tolist() == [0x3F80, 0x3F81, 0xBF80]
    assert tb.round(x, "bf16", "ru").bits.tolist() == [0x3F81, 0x3F82, 0xBF80]
    assert tb.round(x, "bf16", "rd").bits.tolist() == [0x3F80, 0x3F81, 0xBF81]
    assert tb.round(x, "bf16", "rto").bits.tolist() == [0x3F81, 0x3F81, 0xBF81]
    assert tb.round(x, "bf16", "rne").error_ulps.tolist() == [-0.5, 0.5, 0.5]


def test_f64_input_is_rounded_once():
    # 1 + 2^-8 + 2^-40: through f32 it would become the tie 1 + 2^-8 and go down to 1.0 under rne.
    x = np.array([1 + 2.0**-8 + 2.0**-40])
    r = tb.round(x, "bf16")
    assert r.bits.tolist() == [0x3F81]
    assert r.error_ulps[0] == pytest.approx(0.5 - 2.0**-33, abs=0)


def test_formats_dtypes_and_specials():
    x = np.float32([448.0, 500.0, -np.inf, np.nan, 1e-9])
    e4 = tb.round(x, "e4m3")
    assert e4.bits.dtype == np.uint8
    assert e4.bits[0] == 0x7E and np.isnan(e4.values[1]) and e4.flags[1] & tb.FLAGS["overflow"]
    sat = tb.round(x, "e4m3", saturate=True)
    assert sat.bits[:3].tolist() == [0x7E, 0x7E, 0xFE]
    assert sat.error_ulps[2] == np.inf  # -inf saturated to -448: infinitely far toward zero
    assert np.isnan(sat.error_ulps[3])
    assert tb.round(x, "e5m2").bits.dtype == np.uint8
    t = tb.round(np.float32([1.0 + 2.0**-11]), "tf32")  # tie in tf32 (10 fraction bits)
    assert t.bits.dtype == np.uint32 and t.bits[0] == 0x3F800000
    w = tb.round(np.float32([0.1]), "f64")
    assert w.bits.dtype == np.uint64 and w.values.dtype == np.float64 and w.error_ulps[0] == 0
    assert tb.flag_names(int(e4.flags[1])) == ["inexact", "overflow"]


def test_shape_is_kept_and_non_float_input_converted():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    r = tb.round(x, "e5m2")
    assert r.values.shape == (2, 3, 4) and r.bits.shape == (2, 3, 4)
    np.testing.assert_array_equal(r.values[0, 0], [0, 1, 2, 3])
    strided = np.float32(np.arange(10))[::2]
    np.testing.assert_array_equal(tb.round(strided, "bf16").values, strided)


def test_bulk_path_equals_round_pack():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32).view(np.float32)  # NaN, Inf included
    for mode in ("rne", "rna", "rz", "ru", "rd", "rto", "sr"):
        full = tb.round(x, "bf16", mode, seed=9)
        bulk = tb.round(x, "bf16", mode, seed=9, errors=False)
        assert bulk.error_ulps is None and bulk.flags is None
        np.testing.assert_array_equal(bulk.bits, full.bits, err_msg=mode)
        np.testing.assert_array_equal(bulk.values, full.values, err_msg=mode)
    # Chunks that do not start on a Philox block (3 chunks of 66669): the same sr words.
    split = tb.round(x[:200_005], "bf16", "sr", seed=9, errors=False, threads=3)
    np.testing.assert_array_equal(split.bits, tb.round(x[:200_005], "bf16", "sr", seed=9).bits)


def test_stochastic_rounding_stream():
    x = np.full(1 << 18, 1.0 + 2.0**-10, dtype=np.float32)  # 1/8 of a bf16 ulp above 1
    a = tb.round(x, "bf16", "sr", seed=7)
    assert np.array_equal(a.bits, tb.round(x, "bf16", "sr", seed=7, threads=1).bits)  # split-independent
    assert not np.array_equal(a.bits, tb.round(x, "bf16", "sr", seed=8).bits)
    assert not np.array_equal(a.bits, tb.round(x, "bf16", "sr", seed=7, stream=1).bits)
    up = int(np.count_nonzero(a.bits == 0x3F81))
    assert set(np.unique(a.bits).tolist()) == {0x3F80, 0x3F81}
    # Binomial(2^18, 1/8): mean 32768, sd 169.3; |dev| > 7 sd has probability < 3e-12 (fixed seed).
    assert abs(up - 32768) < 7 * 169.3
    assert abs(float(np.mean(a.error_ulps))) < 7 * np.sqrt(0.125 * 0.875 / x.size)


def test_bad_names_raise_the_cli_messages():
    with pytest.raises(ValueError, match=r"to: unknown format 'bf17' \(expected one of f64 f32 tf32 bf16 f16 e4m3 e5m2\)"):
        tb.round([1.0], "bf17")
    with pytest.raises(ValueError, match=r"mode: unknown rounding mode 'nearest' \(expected one of rne rna rz ru rd rto sr\)"):
        tb.round([1.0], "bf16", "nearest")


def cli():
    path = os.environ.get("TIEBREAK_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("TIEBREAK_CLI (the built tiebreak binary) is not set: ctest sets it")
    return path


@pytest.mark.parametrize("to,mode", [("bf16", "rne"), ("e4m3", "sr"), ("f16", "rd"), ("e5m2", "rna"), ("tf32", "rz")])
def test_matches_cli_round(to, mode):
    x = np.float32([0.1, -3.75, 1.00390625, 70000, -1e-7, np.nan, np.inf, 0, 5e-40])
    # Element i of the array and value i of the command line draw the same sr word.
    out = subprocess.run([cli(), "round", "--to", to, "--mode", mode, "--seed", "11", "--json", "--",
                          *[f"bits:{b:#x}" for b in x.view(np.uint32)]],
                         check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == x.size
    r = tb.round(x, to, mode, seed=11)
    for i, row in enumerate(rows):
        assert int(row["bits"], 16) == int(r.bits[i]), (x[i], row)
        cli_ulps = row["error_ulps"]
        cli_ulps = float(cli_ulps) if isinstance(cli_ulps, str) else cli_ulps
        got = float(r.error_ulps[i])
        assert (np.isnan(got) and np.isnan(cli_ulps)) or got == cli_ulps, (x[i], row)
        assert row["flags"] == tb.flag_names(int(r.flags[i])), (x[i], row)
