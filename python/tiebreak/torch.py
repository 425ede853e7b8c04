# SPDX-License-Identifier: Apache-2.0
"""tiebreak in PyTorch training loops (docs/python.md): an audit hook on
``torch.nn.functional.scaled_dot_product_attention``, spectral-norm trackers on parameters,
per-head statistics reduced over ``torch.distributed`` ranks, and scalars to TensorBoard and to
JSON Lines, pure PyTorch on top of the numpy API; and tiebreak's attention kernels as the custom op
``torch.ops.tiebreak.flash_attention`` with autograd and output modes per head
(``flash_attention``, ``FlashAttention``, ``set_attention_modes``: python/tiebreak/_torch_attention.py).
Importing this module needs torch; the rest of the package does not.
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

import numpy as np
import torch
import torch.nn.functional as F

from . import _api
from ._torch_attention import (FlashAttention, attention_modes, cuda_attention_available, flash_attention,
                               set_attention_modes)
from .analysis import SpectralTracker

__all__ = ["SDPAAudit", "SpectralNormTracker", "HeadStats", "reduce_head_stats", "ScalarLogger", "to_numpy",
           "flash_attention", "FlashAttention", "set_attention_modes", "attention_modes", "cuda_attention_available"]


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A CPU numpy copy of a tensor, bf16 kept exactly (as float32: numpy has no bf16)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.cpu().contiguous().numpy()


# --- the SDPA audit hook --------------------------------------------------------------------------

@dataclass
class _Capture:
    module: str
    step: int
    causal: bool
    scale: Optional[float]
    tensors: dict = field(default_factory=dict)  # name -> numpy array
    pending: int = 0  # gradients still to come (do, dq, dk, dv)


class SDPAAudit:
    """Audits the attention calls of chosen modules every ``every`` steps, in process.

    While active (``with audit:``), ``torch.nn.functional.scaled_dot_product_attention`` is wrapped:
    inside a chosen module's forward, on a sampled step, the call's q, k, v and output o are copied
    to the CPU, and when they require gradients, tensor hooks capture dO and the gradients dQ, dK,
    dV of the backward. Once a capture is complete (after the backward when gradients flow, else at
    once) it is audited per head with :func:`tiebreak.audit` (the f64 reference, the CLI's report)
    and/or written as a folder of .npy files that ``tiebreak audit`` reads. Calls with an
    ``attn_mask`` or dropout are skipped (the reference models neither) and counted in ``skipped``.

    ``modules``: a dict name -> nn.Module (or an iterable of (name, module)); ``every``: sample steps
    divisible by it (``step()`` advances the counter once per optimiser step); ``audit_kwargs`` go to
    :func:`tiebreak.audit`; ``dump_dir``: where to write the .npy folders (None: none); ``on_report``:
    called with each report dict (e.g. :meth:`ScalarLogger.log_audit`); ``keep``: keep the reports in
    ``reports``.
    """

    def __init__(self, modules: Any, every: int = 100, *, audit: bool = True, dump_dir: Optional[str] = None,
                 on_report: Optional[Callable[[dict], None]] = None, keep: bool = True, **audit_kwargs: Any) -> None:
        if every < 1:
            raise ValueError("every: must be at least 1")
        items = modules.items() if isinstance(modules, dict) else modules
        self._modules = list(items)
        self.every = every
        self.audit = audit
        self.dump_dir = dump_dir
        self.on_report = on_report
        self.keep = keep
        self.audit_kwargs = audit_kwargs
        self.reports: list[dict] = []
        self.skipped = 0
        self.steps = 0
        self._active: list[str] = []  # names of the chosen modules whose forward is running
        self._handles: list[Any] = []
        self._original: Optional[Callable] = None
        self._lock = threading.Lock()
        self._calls = 0

    # The step counter: call once per training step (after optimizer.step()).
    def step(self) -> None:
        self.steps += 1

    @property
    def sampling(self) -> bool:
        return self.steps % self.every == 0

    def __enter__(self) -> "SDPAAudit":
        for name, mod in self._modules:
            self._handles.append(mod.register_forward_pre_hook(lambda m, a, n=name: self._active.append(n)))
            self._handles.append(mod.register_forward_hook(lambda m, a, o, n=name: self._pop(n)))
        self._original = F.scaled_dot_product_attention
        original = self._original

        def wrapped(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
            out = original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, **kw)
            if self._active and self.sampling:
                if attn_mask is not None or dropout_p != 0.0:
                    self.skipped += 1
                else:
                    self._capture(self._active[-1], query, key, value, out, is_causal, scale)
            return out

        F.scaled_dot_product_attention = wrapped
        torch.nn.functional.scaled_dot_product_attention = wrapped
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._original is not None:
            F.scaled_dot_product_attention = self._original
            torch.nn.functional.scaled_dot_product_attention = self._original
            self._original = None

    def _pop(self, name: str) -> None:
        if self._active and self._active[-1] == name:
            self._active.pop()

    def _capture(self, name: str, q, k, v, o, causal: bool, scale: Optional[float]) -> None:
        cap = _Capture(module=name, step=self.steps, causal=bool(causal), scale=scale)
        for n, t in (("q", q), ("k", k), ("v", v), ("o", o)):
            cap.tensors[n] = to_numpy(t)
        grads = [("do", o), ("dq", q), ("dk", k), ("dv", v)]
        if o.requires_grad:
            for n, t in grads:
                if t.requires_grad:
                    cap.pending += 1
                    t.register_hook(self._grad_hook(cap, n))
        if cap.pending == 0:
            self._finish(cap)

    def _grad_hook(self, cap: _Capture, name: str) -> Callable:
        def hook(g: torch.Tensor) -> None:
            with self._lock:
                cap.tensors[name] = to_numpy(g)
                cap.pending -= 1
                done = cap.pending == 0
            if done:
                self._finish(cap)
        return hook

    def _finish(self, cap: _Capture) -> None:
        t = cap.tensors
        if "do" not in t:  # the audit needs dO for any gradient
            for n in ("dq", "dk", "dv"):
                t.pop(n, None)
        self._calls += 1
        if self.dump_dir is not None:
            folder = os.path.join(self.dump_dir, f"step{cap.step:08d}_{cap.module}_{self._calls}")
            os.makedirs(folder, exist_ok=True)
            for n, arr in t.items():
                np.save(os.path.join(folder, f"{n}.npy"), arr)
        if self.audit:
            report = _api.audit(**{n: t[n] for n in ("q", "k", "v", "o", "do", "dq", "dk", "dv") if n in t},
                                causal=cap.causal, scale=cap.scale, **self.audit_kwargs)
            report["step"] = cap.step
            report["module"] = cap.module
            if self.keep:
                self.reports.append(report)
            if self.on_report is not None:
                self.on_report(report)


# --- spectral norms -------------------------------------------------------------------------------

class SpectralNormTracker:
    """Spectral norms of parameters over training, warm-started power iteration per matrix
    (analysis::spectral_tracker: about one pass over each matrix per step).

    ``params``: dict name -> 2-D parameter (or (name, parameter) pairs); ``heads``: optional dict
    name -> number of heads, splitting that parameter's rows into per-head blocks (W_Q [H*D, E] gives
    H norms). ``update()`` reads the current values (CPU float32 copies) and returns
    {"name" or "name/head{h}": sigma}.
    """

    def __init__(self, params: Any, heads: Optional[dict] = None, *, rel_tol: float = 1e-6,
                 max_iterations: int = 500) -> None:
        items = params.items() if isinstance(params, dict) else params
        self._params = list(items)
        self._heads = heads or {}
        for name, p in self._params:
            if p.dim() != 2:
                raise ValueError(f"SpectralNormTracker: parameter '{name}' has {p.dim()} dimensions, expected 2")
            h = self._heads.get(name, 1)
            if h < 1 or p.shape[0] % h != 0:
                raise ValueError(f"SpectralNormTracker: {h} heads do not divide the {p.shape[0]} rows of '{name}'")
        self._tracker = SpectralTracker(rel_tol=rel_tol, max_iterations=max_iterations)
        self.last: dict[str, Any] = {}

    def _slices(self) -> Iterator[tuple[str, np.ndarray]]:
        for name, p in self._params:
            a = p.detach().float().cpu().numpy()
            h = self._heads.get(name, 1)
            if h == 1:
                yield name, a
            else:
                rows = a.shape[0] // h
                for i in range(h):
                    yield f"{name}/head{i}", a[i * rows:(i + 1) * rows]

    def update(self) -> dict[str, float]:
        names, mats = zip(*self._slices())
        res = self._tracker.push(list(mats))
        self.last = res
        return dict(zip(names, res["spectral_norms"]))


# --- per-head statistics across ranks -------------------------------------------------------------

@dataclass
class HeadStats:
    """Sums of per-head signed errors that add across ranks: count, sum, sum of squares, signs."""

    n: np.ndarray
    total: np.ndarray
    total_sq: np.ndarray
    positive: np.ndarray
    negative: np.ndarray

    @classmethod
    def zeros(cls, heads: int) -> "HeadStats":
        z = lambda: np.zeros(heads, dtype=np.float64)  # noqa: E731
        return cls(z(), z(), z(), z(), z())

    def push(self, head: int, errors: Any) -> None:
        e = np.asarray(errors, dtype=np.float64).ravel()
        e = e[np.isfinite(e)]
        self.n[head] += e.size
        self.total[head] += e.sum()
        self.total_sq[head] += np.dot(e, e)
        self.positive[head] += np.count_nonzero(e > 0)
        self.negative[head] += np.count_nonzero(e < 0)

    def summary(self) -> list[dict[str, float]]:
        """Per head: n, mean, sd, t, and the sign counts (the t statistic of mean == 0)."""
        out = []
        for h in range(self.n.size):
            n = self.n[h]
            mean = self.total[h] / n if n else 0.0
            var = (self.total_sq[h] - n * mean * mean) / (n - 1) if n > 1 else 0.0
            sd = math.sqrt(max(var, 0.0))
            t = mean / (sd / math.sqrt(n)) if n > 1 and sd > 0 else 0.0
            out.append({"head": h, "n": int(n), "mean": mean, "sd": sd, "t": t,
                        "positive": int(self.positive[h]), "negative": int(self.negative[h])})
        return out


def reduce_head_stats(stats: HeadStats, group: Any = None) -> HeadStats:
    """The sum of every rank's HeadStats (``torch.distributed.all_reduce``, float64 on the CPU: gloo,
    or NCCL after a copy) when a process group is initialised; ``stats`` itself otherwise. Every
    rank gets the same result, so a multi-GPU run yields one report."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return stats
    packed = torch.from_numpy(np.stack([stats.n, stats.total, stats.total_sq, stats.positive, stats.negative]))
    backend = dist.get_backend(group)
    if backend == "nccl":
        dev = torch.device("cuda", torch.cuda.current_device())
        t = packed.to(dev)
        dist.all_reduce(t, group=group)
        packed = t.cpu()
    else:
        dist.all_reduce(packed, group=group)
    a = packed.numpy()
    return HeadStats(a[0].copy(), a[1].copy(), a[2].copy(), a[3].copy(), a[4].copy())


# --- scalars --------------------------------------------------------------------------------------

class ScalarLogger:
    """Scalars to JSON Lines and, when given a folder and tensorboard is installed, to TensorBoard.

    ``scalars.jsonl``: one object per ``log`` call, ``{"schema": "tiebreak.scalars/1", "step": s,
    "scalars": {tag: value}}`` (non-finite values as "inf", "-inf", "nan": docs/json.md).
    ``log_audit(report)`` appends the audit report itself to ``audits.jsonl`` (one tiebreak.audit/2
    document per line, which ``tiebreak report`` reads) and logs its per-head mean O errors."""

    def __init__(self, folder: str, tensorboard: bool = True) -> None:
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        self._scalars = open(os.path.join(folder, "scalars.jsonl"), "a", encoding="utf-8")
        self._audits: Optional[Any] = None
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard not installed: JSON Lines only
                SummaryWriter = None
            if SummaryWriter is not None:
                self.writer = SummaryWriter(log_dir=os.path.join(folder, "tensorboard"))

    @staticmethod
    def _number(x: float) -> Any:
        x = float(x)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x

    def log(self, step: int, scalars: dict[str, float]) -> None:
        rec = {"schema": "tiebreak.scalars/1", "step": int(step),
               "scalars": {k: self._number(v) for k, v in scalars.items()}}
        self._scalars.write(json.dumps(rec) + "\n")
        self._scalars.flush()
        if self.writer is not None:
            for k, v in scalars.items():
                self.writer.add_scalar(k, float(v), int(step))

    def log_audit(self, report: dict) -> None:
        if self._audits is None:
            self._audits = open(os.path.join(self.folder, "audits.jsonl"), "a", encoding="utf-8")
        self._audits.write(json.dumps(report) + "\n")
        self._audits.flush()
        module = report.get("module", "attention")
        scalars = {}
        for h in report.get("heads", []):
            where = f"{module}/b{h.get('batch', 0)}h{h.get('head', 0)}"
            for key in ("o_mean_error_ulps", "o_t"):
                if key in h:
                    scalars[f"{where}/{key}"] = h[key]
        if scalars:
            self.log(int(report.get("step", 0)), scalars)

    def close(self) -> None:
        self._scalars.close()
        if self._audits is not None:
            self._audits.close()
        if self.writer is not None:
            self.writer.close()

    def __enter__(self) -> "ScalarLogger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
