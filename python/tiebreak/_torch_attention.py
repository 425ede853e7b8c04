# SPDX-License-Identifier: Apache-2.0
"""tiebreak's attention kernels as a PyTorch custom op with autograd (docs/python.md, "The attention op").

``torch.ops.tiebreak.flash_attention(q, k, v, causal, scale, modes, beta, seed, scaling, exp="software")`` returns
``(o, lse, o32)`` and has a registered backward (``torch.ops.tiebreak.flash_attention_backward``).
CUDA tensors run the kernels (``tiebreak::gpu::attention_forward/backward`` through the extension
``tiebreak._cuda`` on the current stream), CPU tensors their bit-identical host twin (through
``tiebreak._core``). Heads of one output mode run in one kernel call: they are selected
(``index_select``), made contiguous, run, and scattered back. Imported by ``tiebreak.torch``.

No ``from __future__ import annotations`` here: ``torch.library.custom_op`` reads the annotations
of the op functions as types.
"""

import contextlib
import fnmatch
import math
from typing import Any, Dict, Mapping, Optional, Tuple

import torch
from torch import Tensor

from . import _core
from ._attention import OUT_MODES, Modes, mode_groups, parse_modes

__all__ = ["flash_attention", "FlashAttention", "set_attention_modes", "attention_modes", "cuda_attention_available"]

#: torch.library.custom_op and register_autograd exist from torch 2.4 on.
HAVE_CUSTOM_OP = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd")


def _cuda_module() -> Any:
    try:
        from . import _cuda  # type: ignore[attr-defined]
    except ImportError as e:
        raise RuntimeError("tiebreak.torch.flash_attention on CUDA tensors needs the extension tiebreak._cuda, built "
                           "with -DTIEBREAK_PYTHON_CUDA=ON (docs/python.md): " + str(e)) from e
    return _cuda


def cuda_attention_available() -> bool:
    """Whether CUDA tensors can run the op here: torch sees a GPU, tiebreak._cuda was built, and a
    device of compute capability 9.0 (the kernels' only target) is present."""
    if not torch.cuda.is_available():
        return False
    try:
        return bool(_cuda_module().attention_available())
    except RuntimeError:
        return False


def _runner(t: Tensor) -> Tuple[Any, int, Any]:
    """(extension module, its last argument, device context) for the tensors' device: the host twin
    with torch's thread count, or the kernels on the current CUDA stream of the tensors' device."""
    if t.device.type == "cpu":
        return _core, max(1, torch.get_num_threads()), contextlib.nullcontext()
    if t.device.type == "cuda":
        return _cuda_module(), torch.cuda.current_stream(t.device).cuda_stream, torch.cuda.device(t.device)
    raise ValueError(f"tiebreak.torch.flash_attention: tensors on {t.device} (the op runs on cpu and cuda)")


def _check(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype != torch.bfloat16:
            raise ValueError(f"{name}: dtype {t.dtype} (the kernels take torch.bfloat16)")
        if t.dim() != 4:
            raise ValueError(f"{name}: shape {list(t.shape)}, expected 4 dimensions [batch, heads, seq, dim] (bhsd)")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v: on different devices ({q.device}, {k.device}, {v.device})")
    if v.shape != k.shape:
        raise ValueError(f"v: shape {list(v.shape)} must equal k's {list(k.shape)} (the kernels need dim_v == dim)")
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(f"k: shape {list(k.shape)} does not fit q's {list(q.shape)} (batch and dim must agree)")


def _select(t: Tensor, idx: Optional[Tensor]) -> Tensor:
    return t.contiguous() if idx is None else t.index_select(1, idx).contiguous()


def _forward_impl(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, modes: str, beta: float, seed: int,
                  scaling: str, exp: str = "software") -> Tuple[Tensor, Tensor, Tensor]:
    _check(q, k, v)
    B, H, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    mlist = parse_modes(modes, H, Hkv)
    any32 = "fp32" in mlist
    o = q.new_empty((B, H, Sq, D))
    lse = q.new_empty((B, H, Sq), dtype=torch.float32)
    o32 = q.new_empty((B, H, Sq, D) if any32 else (0,), dtype=torch.float32)
    mod, last, device = _runner(q)
    with device:
        for mode, heads, kvh in mode_groups(mlist, Hkv):
            whole = len(heads) == H
            hi = None if whole else torch.tensor(heads, dtype=torch.long, device=q.device)
            ki = None if whole else torch.tensor(kvh, dtype=torch.long, device=q.device)
            qg, kg, vg = _select(q, hi), _select(k, ki), _select(v, ki)
            n = len(heads)
            og = o if whole else q.new_empty((B, n, Sq, D))
            lg = lse if whole else lse.new_empty((B, n, Sq))
            o32g = None
            if any32:  # every head's f32 O: fp32 heads' O, the others' before rounding
                o32g = o32 if whole else o32.new_empty((B, n, Sq, D))
            mod.attention_forward(qg.data_ptr(), kg.data_ptr(), vg.data_ptr(), 0 if mode == "fp32" else og.data_ptr(),
                                  0 if o32g is None else o32g.data_ptr(), lg.data_ptr(), (B, n, len(kvh), Sq, Sk, D),
                                  bool(causal), float(scale), mode, float(beta), int(seed), scaling, 1e-3, False, last,
                                  exp)
            if mode == "fp32":
                og.copy_(o32g)  # float32 -> bfloat16: round to nearest even (torch's conversion)
            if not whole:
                o.index_copy_(1, hi, og)
                lse.index_copy_(1, hi, lg)
                if o32g is not None:
                    o32.index_copy_(1, hi, o32g)
    return o, lse, o32


def _backward_impl(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, o32: Tensor, causal: bool,
                   scale: float, modes: str, beta: float, seed: int, scaling: str,
                   exp: str = "software") -> Tuple[Tensor, Tensor, Tensor]:
    _check(q, k, v)
    B, H, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    mlist = parse_modes(modes, H, Hkv)
    do = do.to(torch.bfloat16)
    dq, dk, dv = q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)
    mod, last, device = _runner(q)
    with device:
        # The mode reaches the backward pass only through the O that delta reads (fp32: the f32 O,
        # every other mode: the bf16 O), so bf16, debias and stochastic heads run in one call.
        for mode, heads, kvh in mode_groups(mlist, Hkv, merge_bf16_like=True):
            whole = len(heads) == H
            hi = None if whole else torch.tensor(heads, dtype=torch.long, device=q.device)
            ki = None if whole else torch.tensor(kvh, dtype=torch.long, device=q.device)
            n, nk = len(heads), len(kvh)
            qg, kg, vg = _select(q, hi), _select(k, ki), _select(v, ki)
            og, lg, dog = _select(o, hi), _select(lse, hi), _select(do, hi)
            o32g = _select(o32, hi) if mode == "fp32" else None
            deltag = lse.new_empty((B, n, Sq))
            dqg = dq if whole else q.new_empty((B, n, Sq, D))
            dkg = dk if whole else k.new_empty((B, nk, Sk, D))
            dvg = dv if whole else v.new_empty((B, nk, Sk, D))
            mod.attention_backward(qg.data_ptr(), kg.data_ptr(), vg.data_ptr(), og.data_ptr(),
                                   0 if o32g is None else o32g.data_ptr(), lg.data_ptr(), dog.data_ptr(),
                                   deltag.data_ptr(), dqg.data_ptr(), dkg.data_ptr(), dvg.data_ptr(),
                                   (B, n, nk, Sq, Sk, D), bool(causal), float(scale), mode, float(beta), int(seed),
                                   scaling, 1e-3, False, last, exp)
            if not whole:
                dq.index_copy_(1, hi, dqg)
                dk.index_copy_(1, ki, dkg)
                dv.index_copy_(1, ki, dvg)
    return dq, dk, dv


if HAVE_CUSTOM_OP:

    @torch.library.custom_op("tiebreak::flash_attention", mutates_args=())
    def _flash_attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, modes: str, beta: float,
                            seed: int, scaling: str, exp: str = "software") -> Tuple[Tensor, Tensor, Tensor]:
        return _forward_impl(q, k, v, causal, scale, modes, beta, seed, scaling, exp)

    @_flash_attention_op.register_fake
    def _(q, k, v, causal, scale, modes, beta, seed, scaling, exp="software"):
        B, H, Sq, D = q.shape
        any32 = "fp32" in parse_modes(modes, H, k.shape[1])
        return (q.new_empty((B, H, Sq, D)), q.new_empty((B, H, Sq), dtype=torch.float32),
                q.new_empty((B, H, Sq, D) if any32 else (0,), dtype=torch.float32))

    @torch.library.custom_op("tiebreak::flash_attention_backward", mutates_args=())
    def _flash_attention_backward_op(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, o32: Tensor,
                                     causal: bool, scale: float, modes: str, beta: float, seed: int,
                                     scaling: str, exp: str = "software") -> Tuple[Tensor, Tensor, Tensor]:
        return _backward_impl(do, q, k, v, o, lse, o32, causal, scale, modes, beta, seed, scaling, exp)

    @_flash_attention_backward_op.register_fake
    def _(do, q, k, v, o, lse, o32, causal, scale, modes, beta, seed, scaling, exp="software"):
        return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)

    def _setup_context(ctx, inputs, output):
        q, k, v, causal, scale, modes, beta, seed, scaling, exp = inputs
        o, lse, o32 = output
        ctx.save_for_backward(q, k, v, o, lse, o32)
        ctx.options = (causal, scale, modes, beta, seed, scaling, exp)
        ctx.mark_non_differentiable(lse, o32)

    def _backward(ctx, grad_o, grad_lse, grad_o32):
        # lse and o32 are not differentiable: their gradients (zeros) are not used.
        q, k, v, o, lse, o32 = ctx.saved_tensors
        if grad_o is None:
            grad_o = torch.zeros_like(o)
        dq, dk, dv = _flash_attention_backward_op(grad_o.contiguous(), q, k, v, o, lse, o32, *ctx.options)
        return dq, dk, dv, None, None, None, None, None, None, None

    torch.library.register_autograd("tiebreak::flash_attention", _backward, setup_context=_setup_context)


def flash_attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: Optional[float] = None,
                    modes: Modes = "bf16", beta: float = 2.0, seed: int = 0, scaling: str = "unfused",
                    return_lse: bool = False, exp: str = "software") -> Any:
    """Attention through tiebreak's kernels with an output mode per head; differentiable.

    ``q`` [B, H, Sq, D], ``k`` and ``v`` [B, Hkv, Sk, D] (bhsd, as ``scaled_dot_product_attention``),
    torch.bfloat16, on the CPU (the host twin) or a CUDA device (the kernels; needs tiebreak._cuda).
    D is 64 or 128; Hkv divides H, and the query heads of one key/value head share a mode. ``modes``:
    one of bf16 fp32 debias stochastic for every head, or one per head (a list or "bf16,fp32,...").
    ``scale`` defaults to 1/sqrt(D); ``causal`` is bottom-right aligned (top-left when Sq == Sk, as
    PyTorch). Returns O [B, H, Sq, D] in bfloat16 (fp32 heads: their f32 O rounded to nearest even;
    the backward's delta still reads the f32 O), and with ``return_lse`` also the natural LSE
    [B, H, Sq] (float32, not differentiable). The f32 O is the third output of
    ``torch.ops.tiebreak.flash_attention``. ``exp``: the kernels' exponential, ``software`` (exp2_sw)
    or ``sfu`` (the SFU's ex2.approx.ftz, one instruction; on the CPU its model, the same bits).
    """
    if not HAVE_CUSTOM_OP:
        raise RuntimeError("tiebreak.torch.flash_attention needs torch >= 2.4 (torch.library.custom_op); "
                           f"this is torch {torch.__version__}")
    _check(q, k, v)
    mstr = ",".join(parse_modes(modes, q.shape[1], k.shape[1]))
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if exp not in ("software", "sfu"):
        raise ValueError(f"exp: unknown exponential '{exp}' (expected software or sfu)")
    o, lse, _ = torch.ops.tiebreak.flash_attention(q, k, v, bool(causal), float(scale), mstr, float(beta), int(seed),
                                                   str(scaling), str(exp))
    return (o, lse) if return_lse else o


class FlashAttention(torch.nn.Module):
    """``scaled_dot_product_attention(q, k, v, is_causal=..., scale=...)`` on bhsd tensors through
    tiebreak's kernels, with output modes per head (:func:`flash_attention`).

    Inputs of any floating dtype are rounded to bfloat16 (nearest even) and O is returned in q's
    dtype. ``modes`` may be changed at any time (:func:`set_attention_modes` by module name).
    Stochastic heads draw from ``seed + calls``, ``calls`` counting this module's forward passes, so
    every step rounds with fresh bits while a run stays reproducible.
    """

    def __init__(self, modes: Modes = "bf16", *, causal: bool = False, scale: Optional[float] = None,
                 beta: float = 2.0, seed: int = 0, scaling: str = "unfused", exp: str = "software") -> None:
        super().__init__()
        _check_mode_names(modes)
        self.modes = modes
        self.causal = causal
        self.scale = scale
        self.beta = beta
        self.seed = seed
        self.scaling = scaling
        self.exp = exp
        self.calls = 0

    def forward(self, q: Tensor, k: Tensor, v: Tensor, is_causal: Optional[bool] = None,
                scale: Optional[float] = None) -> Tensor:
        dtype = q.dtype
        seed = self.seed + self.calls
        self.calls += 1
        bf = torch.bfloat16
        o = flash_attention(q.to(bf), k.to(bf), v.to(bf), causal=self.causal if is_causal is None else bool(is_causal),
                            scale=self.scale if scale is None else scale, modes=self.modes, beta=self.beta, seed=seed,
                            scaling=self.scaling, exp=self.exp)
        return o.to(dtype)

    def extra_repr(self) -> str:
        return f"modes={self.modes!r}, causal={self.causal}, scaling={self.scaling!r}, exp={self.exp!r}"


def _check_mode_names(modes: Modes) -> None:
    names = [m.strip() for m in modes.split(",")] if isinstance(modes, str) else [str(m) for m in modes]
    for m in names:
        if m not in OUT_MODES:
            raise ValueError(f"modes: unknown mode '{m}' (expected one of {' '.join(OUT_MODES)})")


def attention_modes(model: torch.nn.Module) -> Dict[str, Modes]:
    """The modes of every :class:`FlashAttention` in ``model``, by module name."""
    return {name: m.modes for name, m in model.named_modules() if isinstance(m, FlashAttention)}


def set_attention_modes(model: torch.nn.Module, modes: Mapping[str, Modes]) -> Dict[str, Modes]:
    """Sets the output modes of the :class:`FlashAttention` modules of ``model`` by name.

    ``modes`` maps a module name or an fnmatch pattern (``"layers.*.attn"``) to the modes of those
    layers (one for every head, or one per head). Patterns apply in order, so a later one overrides
    an earlier one. Returns the modes set, by module name. Raises KeyError for a pattern that
    matches no FlashAttention module (a typo would otherwise change nothing), ValueError for an
    unknown mode.
    """
    layers = {name: m for name, m in model.named_modules() if isinstance(m, FlashAttention)}
    out: Dict[str, Modes] = {}
    for pattern, m in modes.items():
        _check_mode_names(m)
        hits = [name for name in layers if fnmatch.fnmatchcase(name, pattern)]
        if not hits:
            raise KeyError(f"set_attention_modes: no FlashAttention module matches '{pattern}' "
                           f"(have: {', '.join(layers) or 'none'})")
        for name in hits:
            layers[name].modes = m
            out[name] = m
    return out
