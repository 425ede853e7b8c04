# SPDX-License-Identifier: Apache-2.0
"""The numpy API of tiebreak over the compiled extension ``tiebreak._core`` (docs/python.md).

Every rounding decision is the C++ core's; this module only converts inputs to the arrays the
extension reads in place and names what it returns. Errors raise ``ValueError`` (bad argument) or
``RuntimeError`` with the message the CLI prints for the same mistake.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from . import _core

#: IEEE exception flags as the ``flags`` arrays hold them (bit values).
FLAGS = {"inexact": 1, "underflow": 2, "overflow": 4, "invalid": 8}


def formats() -> list[str]:
    """The format names: f64 f32 tf32 bf16 f16 e4m3 e5m2."""
    return _core.formats()


def modes() -> list[str]:
    """The rounding-mode names: rne rna rz ru rd rto sr (sr: stochastic, needs ``seed``)."""
    return _core.modes()


def flag_names(flags: int) -> list[str]:
    """Names of the flags set in one ``flags`` value, in the CLI's order."""
    return [name for name, bit in FLAGS.items() if int(flags) & bit]


class Rounded(NamedTuple):
    """Result of :func:`round`: arrays of the input's shape."""

    values: np.ndarray  #: the results as float32 (float64 for f64), exact
    bits: np.ndarray  #: encodings in the target format (uint8, uint16, uint32 or uint64)
    error_ulps: Optional[np.ndarray]  #: (result - exact) / ulp of the result, float64 (None if errors=False)
    flags: Optional[np.ndarray]  #: FLAGS bits per element, uint8 (None if errors=False)


def _float_array(x: Any) -> np.ndarray:
    """x as a C-contiguous float32 or float64 array (other dtypes become float64, exactly for every
    integer up to 2^53 and every float16). Objects with ``__dlpack__`` (torch CPU tensors) are read
    through it without a copy when their layout allows."""
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__"):
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":
            x = x.float()  # numpy has no bf16; every bf16 value is a float32 value
        try:
            x = np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError):
            pass  # bf16 tensors and others numpy cannot import: np.asarray below
    a = np.asarray(x)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    return np.ascontiguousarray(a)


def round(x: Any, to: str, mode: str = "rne", *, seed: int = 0, stream: int = 0, saturate: bool = False,
          errors: bool = True, threads: int = 0) -> Rounded:
    """Round every element of ``x`` once, from its exact value, into format ``to`` under ``mode``.

    Precondition: ``x`` is float32 or float64 (other dtypes are converted to float64 first). The
    rounding is the core's ``round_pack`` (``tiebreak round`` on each element); NaN becomes the
    canonical NaN of ``to``; ``saturate`` sends overflow and infinities to the largest finite value.
    Mode ``sr`` (stochastic) draws ``philox_word(seed, stream, i)`` for element ``i`` of the flattened
    array, the words ``tiebreak round --seed`` uses. ``errors=False`` skips the error and flags
    (faster; f32 -> bf16 then takes the host library's vectorised bulk path). The GIL is released
    while rounding; ``threads=0`` uses every core. Raises ValueError for an unknown format or mode.
    """
    a = _float_array(x)
    values, bits, err, flags = _core.round(a, to, mode, seed, stream, saturate, errors, threads)
    return Rounded(values, bits, err, flags)


_BITS_DTYPE = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def sum(x: Any, format: str, accumulate: Optional[str] = None, mode: str = "rne", *, order: str = "sequential",
        block: int = 64, seed: int = 0, saturate: bool = False, threads: int = 0) -> dict[str, Any]:
    """Emulated sums along the last axis, as ``tiebreak add`` computes them (``emu::sum``).

    Each value is rounded into ``format`` under ``mode``, the partial sums are carried in
    ``accumulate`` (default: ``format``) under ``mode`` in ``order`` (``sequential``, ``pairwise`` or
    ``blocked`` with ``block``), and the total is narrowed to ``format`` once. Returns a dict of arrays
    of shape ``x.shape[:-1]``: ``value`` (float64), ``bits`` (encodings of ``format``), ``accum_bits``
    (of ``accumulate``), ``error_ulps`` (against the exact sum of the values as read, in ulps of
    ``format`` at that sum) and ``flags``. Mode ``sr``: row r of the flattened leading axes rounds
    its inputs with stream 2r and its additions with stream 2r + 1, so a 1-D ``x`` gives the bits of
    ``tiebreak add --mode sr --seed SEED``.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        raise ValueError("sum: x must have at least one axis")
    lead = a.shape[:-1]
    rows = np.ascontiguousarray(a.reshape(-1, a.shape[-1]))
    r = _core.sum(rows, format, accumulate, mode, order, block, seed, saturate, threads)
    out = {
        "value": r["value"].reshape(lead),
        "bits": r["bits"].astype(_BITS_DTYPE[r["storage_bits"]]).reshape(lead),
        "accum_bits": r["accum_bits"].astype(_BITS_DTYPE[r["accum_storage_bits"]]).reshape(lead),
        "error_ulps": r["error_ulps"].reshape(lead),
        "flags": r["flags"].reshape(lead),
    }
    return out


def mma_instructions() -> list[dict[str, Any]]:
    """The modelled tensor-core instructions (``tiebreak mma --list``)."""
    return _core.mma_instructions()


def mma(instr: str, a: Any, b: Any, c: Any = None) -> dict[str, Any]:
    """``D = A B + C`` on the emulated tensor-core instruction ``instr`` (see :func:`mma_instructions`).

    ``a`` is [M, K], ``b`` [K, N], ``c`` [M, N] (default zero); values are rounded (rne) into the
    instruction's operand formats first, as ``tiebreak mma`` reads its values, and K must be a
    multiple of the instruction's k. The product is ``emu::gemm``: one instruction per k-chunk in
    increasing order, each result the next one's C, bit-identical to the CUDA GEMM kernel. Returns
    ``value`` (float64), ``bits`` (uint32 encodings of C's format), ``inputs_rounded``, ``format`` and
    ``verified`` (whether every parameter of the model was pinned on hardware).
    """
    a64 = np.ascontiguousarray(a, dtype=np.float64)
    b64 = np.ascontiguousarray(b, dtype=np.float64)
    c64 = None if c is None else np.ascontiguousarray(c, dtype=np.float64)
    return _core.mma(instr, a64, b64, c64)


_AUDIT_NAMES = ("q", "k", "v", "o", "do", "dq", "dk", "dv", "lse")


def _audit_array(name: str, x: Any) -> Any:
    """An array the extension reads in place: numpy float16/32/64 as they are (C order), other
    __dlpack__ producers (torch bf16 tensors) passed through, anything else as float64."""
    if isinstance(x, np.ndarray):
        if x.dtype in (np.float16, np.float32, np.float64):
            return np.ascontiguousarray(x)
        return np.ascontiguousarray(x, dtype=np.float64)
    if hasattr(x, "__dlpack__"):
        if hasattr(x, "is_contiguous") and not x.is_contiguous():
            x = x.contiguous()
        return x
    return np.ascontiguousarray(np.asarray(x), dtype=np.float64)


def audit(q: Any, k: Any, v: Any, o: Any, do: Any = None, dq: Any = None, dk: Any = None, dv: Any = None,
          lse: Any = None, *, layout: str = "bhsd", causal: bool = False, scale: Optional[float] = None,
          out_format: str = "auto", alpha: float = 1e-3, min_effect: float = 0.05, tie_tolerance: float = 1e-3,
          threads: int = 0, certify: bool = False, device: str = "cpu") -> dict[str, Any]:
    """``tiebreak audit`` on arrays: the per-head signed error of an attention kernel's O (and dQ,
    dK, dV with ``do``) against the f64 reference, with the bias tests.

    Tensors as ``tiebreak audit`` reads them from a folder of .npy files (layout ``bhsd``: q
    [B, H, Sq, D], k and v [B, Hkv, Sk, D], o [B, H, Sq, Dv]; ``bshd`` likewise), as numpy arrays or
    CPU tensors with ``__dlpack__`` (bf16, f16, f32, f64), read in place. Returns the dict the CLI
    writes with ``-o`` (schema tiebreak.audit/2, docs/audit.md); ``source`` is "arrays", ``command_line``
    this process's ``sys.argv``. The GIL is
    released. Raises RuntimeError with the CLI's message for bad shapes or dtypes.
    """
    given = dict(zip(_AUDIT_NAMES, (q, k, v, o, do, dq, dk, dv, lse)))
    tensors: Mapping[str, Any] = {n: _audit_array(n, x) for n, x in given.items() if x is not None}
    text = _core.audit(dict(tensors), layout, causal, scale, out_format, alpha, min_effect, tie_tolerance, threads,
                       certify, device)
    report = json.loads(text)
    # Provenance, as `tiebreak audit` records it: the tool and the command line of this process.
    from . import __version__

    report["tool"] = {"name": "tiebreak", "version": __version__}
    report["command_line"] = list(sys.argv)
    return report
