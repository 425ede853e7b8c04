# SPDX-License-Identifier: Apache-2.0
"""Test helpers for the attention op: seeded bf16 inputs and an f64 attention (forward and backward)
written with plain numpy, independent of the kernels and their twin."""

import numpy as np


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 encodings, round to nearest even, by integer arithmetic on the float32 value
    (the values drawn here are exact in float32, so there is no double rounding)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """bf16 encodings -> float64 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def inputs(batch, heads, kv_heads, seq_q, seq_k, dim, seed, amp=1.0):
    """q, k, v, do as bf16 encodings, uniform in [-amp, amp) rounded to bf16 (numpy's PCG64)."""
    rng = np.random.default_rng(seed)

    def draw(*shape):
        return bf16_bits(rng.uniform(-amp, amp, shape).astype(np.float32))

    return (draw(batch, heads, seq_q, dim), draw(batch, kv_heads, seq_k, dim), draw(batch, kv_heads, seq_k, dim),
            draw(batch, heads, seq_q, dim))


def attention_f64(q, k, v, do=None, causal=False, scale=None):
    """O, LSE and (with do) dQ, dK, dV in float64 of bf16-valued inputs (arrays of values, bhsd).
    Causal is bottom-right aligned: row i sees key j when j + seq_q <= i + seq_k. Every row must see
    a key (seq_q <= seq_k when causal)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    B, H, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    g = H // Hkv
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    K, V = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = scale * np.einsum("bhid,bhjd->bhij", q, K)
    if causal:
        i = np.arange(Sq)[:, None]
        j = np.arange(Sk)[None, :]
        s = np.where(j + Sq <= i + Sk, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    p /= l
    o = np.einsum("bhij,bhjd->bhid", p, V)
    lse = (m + np.log(l))[..., 0]
    out = {"o": o, "lse": lse}
    if do is not None:
        do = np.asarray(do, dtype=np.float64)
        dv = np.einsum("bhij,bhid->bhjd", p, do)
        dp = np.einsum("bhid,bhjd->bhij", do, V)
        delta = (do * o).sum(axis=-1, keepdims=True)
        ds = p * (dp - delta)
        dq = scale * np.einsum("bhij,bhjd->bhid", ds, K)
        dk = scale * np.einsum("bhij,bhid->bhjd", ds, q)
        out["dq"] = dq
        out["dk"] = dk.reshape(B, Hkv, g, Sk, D).sum(axis=2)
        out["dv"] = dv.reshape(B, Hkv, g, Sk, D).sum(axis=2)
        out["delta"] = delta[..., 0]
    return out


def relative_error(x, ref):
    """(Frobenius relative error, largest absolute error / largest |ref|)."""
    x, ref = np.asarray(x, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    scale = np.abs(ref).max()
    return np.linalg.norm(x - ref) / np.linalg.norm(ref), np.abs(x - ref).max() / scale
