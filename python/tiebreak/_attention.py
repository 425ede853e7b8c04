# SPDX-License-Identifier: Apache-2.0
"""tiebreak's attention kernels on numpy arrays, through their host twin (docs/python.md).

``attention`` runs ``tiebreak::host::attention_forward`` / ``_backward`` (attn/flash.hpp's tile
algorithm with every mma through the tensor-core model: bit-identical to the H200 kernels) with an
output mode per head. The per-head helpers (``parse_modes``, ``mode_groups``) are shared with the
PyTorch custom op (``tiebreak.torch.flash_attention``), so both split heads the same way.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _core

#: The output modes of the kernels (include/tiebreak/attn/flash.hpp, ``out_mode``).
OUT_MODES = ("bf16", "fp32", "debias", "stochastic")

Modes = Union[str, Sequence[str]]


def parse_modes(modes: Modes, heads: int, kv_heads: int) -> list[str]:
    """One output mode per query head.

    ``modes``: one mode for every head (``"debias"``), a comma-separated list (``"bf16,fp32"``) or a
    sequence of strings, of length 1 or ``heads``. Grouped-query attention: the query heads of one
    key/value head must share a mode (their dK and dV are one accumulation in the kernel). Raises
    ValueError naming the problem.
    """
    if isinstance(modes, str):
        out = [m.strip() for m in modes.split(",")]
    else:
        out = [str(m) for m in modes]
    if len(out) == 1:
        out = out * heads
    for m in out:
        if m not in OUT_MODES:
            raise ValueError(f"modes: unknown mode '{m}' (expected one of {' '.join(OUT_MODES)})")
    if len(out) != heads:
        raise ValueError(f"modes: {len(out)} modes for {heads} heads (give one, or one per head)")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"k: {kv_heads} key/value heads do not divide q's {heads} heads")
    group = heads // kv_heads
    for g in range(kv_heads):
        mine = out[g * group:(g + 1) * group]
        if len(set(mine)) > 1:
            raise ValueError(f"modes: query heads {g * group}..{(g + 1) * group - 1} share key/value head {g} "
                             f"and must share a mode (got {','.join(mine)})")
    return out


def mode_groups(modes: Sequence[str], kv_heads: int, merge_bf16_like: bool = False) -> list[tuple[str, list[int], list[int]]]:
    """The kernel calls of a per-head mode list: (mode, query heads, key/value heads), in order of
    each mode's first head; heads ascending. ``merge_bf16_like`` (the backward pass, where the
    mode matters only through the O that delta reads) puts every mode but fp32 into one ``bf16``
    call. Precondition: ``modes`` passed :func:`parse_modes`."""
    heads = len(modes)
    group = heads // kv_heads
    order: dict[str, list[int]] = {}
    for h, m in enumerate(modes):
        key = "bf16" if merge_bf16_like and m != "fp32" else m
        order.setdefault(key, []).append(h)
    return [(m, hs, sorted({h // group for h in hs})) for m, hs in order.items()]


class Attention(NamedTuple):
    """Result of :func:`attention` (dense bhsd arrays)."""

    o: np.ndarray  #: uint16 [B, H, Sq, D]: O as bf16 encodings (fp32 heads: their f32 O rounded to nearest even)
    o_f32: np.ndarray  #: float32 [B, H, Sq, D]: the f32 O (fp32 heads: the O itself; others: before rounding)
    lse: np.ndarray  #: float32 [B, H, Sq]: natural log-sum-exp of the scaled scores (-inf: a row with no key)
    delta: Optional[np.ndarray]  #: float32 [B, H, Sq]: rowsum(dO * O) of the backward pass (with ``do``)
    dq: Optional[np.ndarray]  #: uint16, q's shape: dQ as bf16 encodings (with ``do``)
    dk: Optional[np.ndarray]  #: uint16, k's shape
    dv: Optional[np.ndarray]  #: uint16, v's shape
    counters: Optional[list]  #: probe=True: per (b, h) at b * H + h, the kernel's probe counters


def _bf16_bits(name: str, x: Any) -> np.ndarray:
    """x as C-contiguous uint16 bf16 encodings: uint16 arrays are taken as encodings, float arrays are
    rounded to bf16 (round-to-nearest-even, tiebreak.round)."""
    a = np.asarray(x)
    if a.dtype == np.uint16:
        return np.ascontiguousarray(a)
    if a.dtype.kind != "f":
        raise ValueError(f"{name}: dtype {a.dtype} (expected uint16 bf16 encodings or a float array)")
    shape = a.shape
    bits = _core.round(np.ascontiguousarray(a, dtype=np.float64 if a.dtype == np.float64 else np.float32).reshape(-1),
                       "bf16", "rne", 0, 0, False, False, 0)[1]
    return np.ascontiguousarray(bits.reshape(shape))


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 encodings (uint16) as their float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _addr(a: Optional[np.ndarray]) -> int:
    return 0 if a is None else a.ctypes.data


def attention(q: Any, k: Any, v: Any, do: Any = None, *, causal: bool = False, scale: Optional[float] = None,
              modes: Modes = "bf16", beta: float = 2.0, seed: int = 0, scaling: str = "unfused",
              near_tolerance: float = 1e-3, probe: bool = False, threads: int = 0, exp: str = "software") -> Attention:
    """tiebreak's attention kernels on the CPU: the host twin, bit-identical to the H200 kernels.

    ``q`` [B, H, Sq, D], ``k`` and ``v`` [B, Hkv, Sk, D] and ``do`` [B, H, Sq, D] (dense bhsd; D 64 or
    128; Hkv divides H) as uint16 bf16 encodings, or float arrays, which are rounded to bf16 (nearest
    even) first. ``scale`` defaults to 1/sqrt(D); ``causal`` is bottom-right aligned. ``modes``: the
    output mode of every head or one per head (:func:`parse_modes`): ``bf16`` (O rounded to nearest
    even), ``fp32`` (O kept in f32, delta from it), ``debias`` (the dynamic maximum with offset
    ``beta`` · max for a repeated row maximum), ``stochastic`` (O rounded stochastically, keyed by
    ``seed``). Heads of one mode run in one kernel call (heads selected in order), so a head's
    results equal those of a call that gives every head its mode, bit for bit, except for
    ``stochastic``, whose random bits are keyed by the head's index within its call. With ``do``
    the backward pass runs too (delta from the f32 O for fp32 heads, the bf16 O otherwise).
    ``probe=True`` returns the probe's counters per (batch, head). ``scaling``: ``unfused``
    (PyTorch's build of FlashAttention) or ``fused`` (upstream). ``exp``: the exponential, ``software``
    (exp2_sw, the same bits on every GPU) or ``sfu`` (the model of the H200's ``ex2.approx.ftz.f32``,
    what the kernels' fast policy computes; docs/attention.md). The GIL is released; ``threads=0``
    uses every core, results do not depend on it. Raises ValueError for bad shapes or options.
    """
    qb, kb, vb = _bf16_bits("q", q), _bf16_bits("k", k), _bf16_bits("v", v)
    for name, a in (("q", qb), ("k", kb), ("v", vb)):
        if a.ndim != 4:
            raise ValueError(f"{name}: shape {list(a.shape)}, expected 4 dimensions [batch, heads, seq, dim] (bhsd)")
    B, H, Sq, D = qb.shape
    Bk, Hkv, Sk, Dk = kb.shape
    if vb.shape != kb.shape:
        raise ValueError(f"v: shape {list(vb.shape)} must equal k's {list(kb.shape)} (the kernels need dim_v == dim)")
    if Bk != B or Dk != D:
        raise ValueError(f"k: shape {list(kb.shape)} does not fit q's {list(qb.shape)} (batch and dim must agree)")
    dob = None
    if do is not None:
        dob = _bf16_bits("do", do)
        if dob.shape != qb.shape:
            raise ValueError(f"do: shape {list(dob.shape)} must equal O's {list(qb.shape)}")
    if min(qb.shape) == 0 or min(kb.shape) == 0:
        raise ValueError("q, k, v: every size must be positive")
    mlist = parse_modes(modes, H, Hkv)
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    opts = dict(beta=float(beta), seed=int(seed), scaling=scaling, near_tolerance=float(near_tolerance),
                probe=bool(probe), threads=int(threads), exp=str(exp))

    o = np.empty((B, H, Sq, D), np.uint16)
    o32 = np.empty((B, H, Sq, D), np.float32)
    lse = np.empty((B, H, Sq), np.float32)
    counters: Optional[list] = [None] * (B * H) if probe else None

    def pick(a: np.ndarray, idx: list[int], n: int) -> np.ndarray:
        return a if len(idx) == n else np.ascontiguousarray(a[:, idx])

    def put(dst: np.ndarray, idx: list[int], src: np.ndarray) -> None:
        if src is not dst:
            dst[:, idx] = src

    def keep(got: Optional[list], heads: list[int], key: Optional[str] = None) -> None:
        if got is None or counters is None:
            return
        for b in range(B):
            for j, h in enumerate(heads):
                c = got[b * len(heads) + j]
                if key is None:
                    counters[b * H + h] = c
                else:
                    counters[b * H + h][key] = c[key]

    for mode, heads, kvh in mode_groups(mlist, Hkv):
        qg, kg, vg = pick(qb, heads, H), pick(kb, kvh, Hkv), pick(vb, kvh, Hkv)
        og, o32g, lg = pick(o, heads, H), pick(o32, heads, H), pick(lse, heads, H)
        dims = (B, len(heads), len(kvh), Sq, Sk, D)
        got = _core.attention_forward(_addr(qg), _addr(kg), _addr(vg), 0 if mode == "fp32" else _addr(og), _addr(o32g),
                                      _addr(lg), dims, bool(causal), float(scale), mode, **opts)
        if mode == "fp32":
            og[...] = _core.round(o32g.reshape(-1), "bf16", "rne", 0, 0, False, False, 0)[1].reshape(og.shape)
        put(o, heads, og)
        put(o32, heads, o32g)
        put(lse, heads, lg)
        keep(got, heads)
    if dob is None:
        return Attention(o, o32, lse, None, None, None, None, counters)

    # Backward: the mode reaches it only through the O that delta reads (fp32: o_f32, else o), so
    # the heads of bf16, debias and stochastic run in one call.
    delta = np.empty((B, H, Sq), np.float32)
    dq = np.empty_like(qb)
    dk = np.empty_like(kb)
    dv = np.empty_like(vb)
    for mode, heads, kvh in mode_groups(mlist, Hkv, merge_bf16_like=True):
        qg, kg, vg = pick(qb, heads, H), pick(kb, kvh, Hkv), pick(vb, kvh, Hkv)
        og, o32g, lg, dog = pick(o, heads, H), pick(o32, heads, H), pick(lse, heads, H), pick(dob, heads, H)
        deltag, dqg = pick(delta, heads, H), pick(dq, heads, H)
        dkg, dvg = pick(dk, kvh, Hkv), pick(dv, kvh, Hkv)
        dims = (B, len(heads), len(kvh), Sq, Sk, D)
        # o_f32 for every mode when probed: the probe's delta error is measured against it.
        got = _core.attention_backward(_addr(qg), _addr(kg), _addr(vg), _addr(og),
                                       _addr(o32g) if mode == "fp32" or probe else 0, _addr(lg), _addr(dog),
                                       _addr(deltag), _addr(dqg), _addr(dkg), _addr(dvg), dims, bool(causal),
                                       float(scale), mode, **opts)
        put(delta, heads, deltag)
        put(dq, heads, dqg)
        put(dk, kvh, dkg)
        put(dv, kvh, dvg)
        keep(got, heads, "delta_error")
    return Attention(o, o32, lse, delta, dq, dk, dv, counters)
