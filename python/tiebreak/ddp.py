# SPDX-License-Identifier: Apache-2.0
"""Data-parallel training of the causal experiment's model in PyTorch, tiebreak's hooks on every
rank, one report (docs/python.md, "Data-parallel training"; issue 23).

The model is experiment/src/model.hpp's, in PyTorch: token embedding without positions; per layer
rmsnorm (no gain, eps 1e-6) -> W_Q, W_K, W_V (d_model x H*D) -> causal attention per head through
tiebreak's op (``FlashAttention``, an output mode per head; module names ``layers.<l>.attn``) ->
W_O, residual; readout rmsnorm -> W_out; next-token cross-entropy; AdamW as the experiment's (float64
update, float32 state, no decay on the embedding). Data: ``lowrank`` (sink token 0 every 4th position, a 3-token motif from tokens 1..8
between) and ``isotropic`` (uniform tokens), a function of (data, seed, step) only: every rank
draws the whole global batch and takes its rows.

Data parallelism: ``world`` ranks (torchrun, or any initialised torch.distributed group), the global
batch split into ``world * accumulate`` equal micro-batches in rank order; each rank sums the
gradients of its micro-batches, the gradients are summed across ranks (one ``all_reduce`` of the
flattened float32 gradients) and divided by ``world * accumulate``. Stochastic heads draw their bits
from (seed, step, micro-batch index), so a split of the batch does not change them. Backend gloo on the CPU, nccl on
CUDA (``NCCL_NVLS_ENABLE=0`` is set unless the environment sets it).

Every ``every`` steps (a sampled step), on every rank:

* per-head statistics of the attention (``HeadStats``, one per layer x head): per row the mean
  signed error of O against an f64 reference on the same bf16 Q, K, V, in ulps of bf16 at the row's
  largest |reference| (the audit's row scale and ``o_mean_error_ulps``), and per row the delta error ``sum_d dO (O - O_ref)`` (the backward's
  rowsum(dO o O) with the head's O against the f64 one, dO rounded to bf16 as the op does). Both are
  reduced over the ranks with :func:`tiebreak.torch.reduce_head_stats`, timed;
* spectral norms of W_Q and W_K, whole and per head (:class:`SpectralNormTracker`), and the update
  alignment: the cosine between consecutive sampled updates of W_Q and of W_K per layer. Weights are
  replicated, so these are not reduced: every rank's values are gathered and compared with rank
  0's bit for bit (``ddp/replicas_equal``); a mismatch stops the run.

Rank 0 writes ``scalars.jsonl`` (and TensorBoard) through :class:`ScalarLogger`, which ``tiebreak
report`` draws (per-head tags ``layers.<l>.attn/b0h<h>/<metric>``), ``headstats.jsonl`` (the
reduced sums themselves, exactly, per sampled step) and ``summary.json`` (configuration, timing).

Run: ``torchrun --nproc_per_node 2 -m tiebreak.ddp --out DIR`` (``python -m tiebreak.ddp`` alone is
one process).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from .analysis import frobenius_cosine
from .torch import FlashAttention, HeadStats, ScalarLogger, SpectralNormTracker, reduce_head_stats

__all__ = ["Config", "CausalModel", "make_batch", "train", "main", "reduction_bound", "compare"]

MASK64 = (1 << 64) - 1
U64 = 2.0 ** -53  # the unit roundoff of float64


@dataclass
class Config:
    vocab: int = 256
    d_model: int = 64
    heads: int = 2
    head_dim: int = 64
    layers: int = 1
    seq: int = 64
    batch: int = 8            # the global batch (sequences per step, over all ranks)
    accumulate: int = 1       # micro-batches per rank per step
    steps: int = 50
    every: int = 5            # sampled steps: step % every == 0 and the last step
    lr: float = 3e-3
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    init_std: float = 0.02
    data: str = "lowrank"
    seed: int = 0
    modes: list = field(default_factory=lambda: ["bf16"])  # per layer: one mode, or "m0,m1,..." per head
    debias_beta: float = 2.0

    def validate(self, world: int) -> str:
        if self.head_dim not in (64, 128):
            return f"head_dim {self.head_dim}: the kernels take 64 or 128"
        if self.data not in ("lowrank", "isotropic"):
            return f"data '{self.data}': expected lowrank or isotropic"
        if self.vocab < 2:
            return f"vocab {self.vocab}: at least 2 tokens"
        if min(self.vocab, self.d_model, self.heads, self.layers, self.seq, self.batch, self.accumulate,
               self.steps, self.every) < 1:
            return "every size, steps and every must be at least 1"
        if self.batch % (world * self.accumulate) != 0:
            return (f"batch {self.batch} is not divisible by world size x accumulate = {world} x "
                    f"{self.accumulate}")
        if len(self.modes) not in (1, self.layers):
            return f"modes: {len(self.modes)} entries for {self.layers} layers (one, or one per layer)"
        return ""

    def layer_modes(self, layer: int) -> str:
        return self.modes[0] if len(self.modes) == 1 else self.modes[layer]


# --- data: the experiment's make_batch (splitmix64), bit for bit -----------------------------------

def _splitmix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:  # splitmix64 of the state, then the state advances by the golden gamma
        r = _splitmix64(self.state)
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        return r

    def below(self, n: int) -> int:
        return self.next() % n


def make_batch(cfg: Config, step: int) -> torch.Tensor:
    """The global batch of ``step``, [batch, seq] int64: a function of (data, seed, step) only."""
    kind = 0 if cfg.data == "lowrank" else 1
    g = _Gen((_splitmix64((_splitmix64(cfg.seed ^ 0x64617461) + step) & MASK64) + kind) & MASK64)
    t = np.empty((cfg.batch, cfg.seq), dtype=np.int64)
    for b in range(cfg.batch):
        if kind == 1:
            t[b] = [g.below(cfg.vocab) for _ in range(cfg.seq)]
        else:
            motif = [1 + g.below(min(8, cfg.vocab - 1)) for _ in range(3)]
            t[b] = [0 if s % 4 == 0 else motif[s % 4 - 1] for s in range(cfg.seq)]
    return torch.from_numpy(t)


# --- the model ------------------------------------------------------------------------------------

def _rmsnorm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class CausalModel(torch.nn.Module):
    """experiment/src/model.hpp's attention-only model; ``layers.<l>.attn`` are FlashAttention."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        g = torch.Generator().manual_seed(cfg.seed)
        hd = cfg.heads * cfg.head_dim

        def normal(*shape: int, std: float = 1.0) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.randn(*shape, generator=g) * std)

        self.embed = normal(cfg.vocab, cfg.d_model)
        self.layers = torch.nn.ModuleList()
        for layer in range(cfg.layers):
            m = torch.nn.Module()
            m.wq = normal(cfg.d_model, hd, std=cfg.init_std)
            m.wk = normal(cfg.d_model, hd, std=cfg.init_std)
            m.wv = normal(cfg.d_model, hd, std=cfg.init_std)
            m.wo = normal(hd, cfg.d_model, std=cfg.init_std)
            m.attn = FlashAttention(cfg.layer_modes(layer), causal=True, beta=cfg.debias_beta,
                                    seed=_splitmix64(cfg.seed * 0x100000001B3 + layer + 1) & 0x7FFFFFFF)
            self.layers.append(m)
        self.wout = normal(cfg.d_model, cfg.vocab, std=cfg.init_std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy of ``tokens`` [B, S]."""
        c = self.cfg
        B, S = tokens.shape
        x = self.embed[tokens]
        for m in self.layers:
            xn = _rmsnorm(x)
            q, k, v = ((xn @ w).view(B, S, c.heads, c.head_dim).transpose(1, 2) for w in (m.wq, m.wk, m.wv))
            o = m.attn(q, k, v)  # bf16 Q, K, V (nearest even); O back in float32
            x = x + o.transpose(1, 2).reshape(B, S, c.heads * c.head_dim) @ m.wo
        logits = _rmsnorm(x) @ self.wout
        return F.cross_entropy(logits[:, :-1].reshape(-1, c.vocab), tokens[:, 1:].reshape(-1))


# --- per-head statistics of the attention ---------------------------------------------------------

def _bf16_ulp(r: torch.Tensor) -> torch.Tensor:
    """The ulp of bf16 at each value (2^-133, the subnormals' spacing, below 2^-126 and at 0)."""
    e = torch.floor(torch.log2(r.abs().clamp_min(2.0 ** -126)))
    return torch.exp2(e - 7)


class AttentionStats:
    """Forward hooks on every ``layers.<l>.attn``: while ``active``, each call's O error per row (mean
    over the row, in bf16 ulps of the row's largest |reference|) against the f64 reference, and (a hook on O's gradient) the per-row delta error, are pushed into
    ``o`` and ``delta`` (HeadStats over layer * heads + head)."""

    def __init__(self, model: CausalModel) -> None:
        c = model.cfg
        self.heads = c.heads
        self.o = HeadStats.zeros(c.layers * c.heads)
        self.delta = HeadStats.zeros(c.layers * c.heads)
        self.active = False
        self._handles = [m.attn.register_forward_hook(self._hook(i)) for i, m in enumerate(model.layers)]

    def reset(self) -> None:
        n = self.o.n.size
        self.o, self.delta = HeadStats.zeros(n), HeadStats.zeros(n)

    def remove(self) -> None:
        for h in self._handles:
            h.remove()

    def _hook(self, layer: int):
        def hook(module: FlashAttention, inputs: tuple, o: torch.Tensor) -> None:
            if not self.active:
                return
            q, k, v = (t.detach().to(torch.bfloat16).double() for t in inputs[:3])
            scale = module.scale if module.scale is not None else 1.0 / math.sqrt(q.shape[-1])
            s = (q @ k.transpose(-1, -2)) * scale
            S = s.shape[-1]
            mask = torch.ones(s.shape[-2], S, dtype=torch.bool, device=s.device).tril()
            ref = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v  # f64 [B, H, S, D]
            od = o.detach().double()
            diff = od - ref
            # The audit's row scale (docs/audit.md, "The statistics"): the ulp of bf16 at the row's
            # largest |reference| (rounded to bf16), one sample per row: the row's mean error.
            top = ref.abs().amax(-1, keepdim=True).float().to(torch.bfloat16).double()
            err = (diff / _bf16_ulp(top)).mean(-1).cpu().numpy()  # [B, H, S]
            for h in range(self.heads):
                self.o.push(layer * self.heads + h, err[:, h])
            if o.requires_grad:
                def grad_hook(g: torch.Tensor) -> None:
                    d = (g.detach().to(torch.bfloat16).double() * diff).sum(-1).cpu().numpy()  # [B, H, S]
                    for h in range(self.heads):
                        self.delta.push(layer * self.heads + h, d[:, h])
                o.register_hook(grad_hook)
        return hook


def reduction_bound(stats: HeadStats, pieces: int) -> dict[str, np.ndarray]:
    """Per head, how far two float64 evaluations of the sums of ``stats`` (the reduced one and the
    single-process one) may differ: each of ``total`` and ``total_sq`` is a sum of the same n
    float64 terms (x, and x*x rounded) grouped in some order, plus ``pieces`` partial sums; any
    order's error is at most gamma_{m-1} * sum|term| with m the number of the additions' operands
    (m <= n + pieces), so the two differ by at most 2 * gamma_{n+pieces+1} * sum|term| (gamma_k =
    k u / (1 - k u), u = 2^-53; one more u per term for the product x*x). sum|x| <= sqrt(n * sum x^2) bounds the unknown
    sum of magnitudes by what HeadStats keeps. The counts (n, positive, negative) are integers below
    2^53: equal exactly."""
    k = stats.n + pieces + 1
    gamma = k * U64 / (1 - k * U64)
    abs_sum = np.sqrt(stats.n * np.abs(stats.total_sq))
    return {"total": 2 * gamma * abs_sum, "total_sq": 2 * gamma * np.abs(stats.total_sq) * (1 + 2 * U64)}


# --- distributed helpers --------------------------------------------------------------------------

def _dist():
    import torch.distributed as dist
    return dist if dist.is_available() and dist.is_initialized() else None


def _device_for_collectives(device: torch.device) -> torch.device:
    dist = _dist()
    return device if dist is not None and dist.get_backend() == "nccl" else torch.device("cpu")


def _replicas_equal(values: np.ndarray, device: torch.device) -> bool:
    """Whether every rank's float64 ``values`` equal rank 0's bit for bit (NaN == NaN)."""
    dist = _dist()
    if dist is None:
        return True
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).to(_device_for_collectives(device))
    bits = t.view(torch.int64)
    gathered = [torch.empty_like(bits) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, bits)
    return all(bool(torch.equal(g, gathered[0])) for g in gathered)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- the training loop ----------------------------------------------------------------------------

class _AdamW:
    """experiment/src/model.cpp's adamw_update: moments and the update in float64, stored in float32
    (nearest even), decoupled weight decay on every matrix but the embedding. (torch.optim.AdamW
    computes in float32, and its first use imports torch._dynamo: seconds per process.)"""

    def __init__(self, model: CausalModel, cfg: Config) -> None:
        self.cfg = cfg
        self.items = [(p, torch.zeros_like(p), torch.zeros_like(p), 0.0 if name == "embed" else cfg.weight_decay)
                      for name, p in model.named_parameters()]
        self.t = 0

    @torch.no_grad()
    def step(self) -> None:
        c = self.cfg
        self.t += 1
        c1, c2 = 1.0 - c.beta1 ** self.t, 1.0 - c.beta2 ** self.t
        for p, m, v, wd in self.items:
            g = p.grad.double()
            md = c.beta1 * m.double() + (1.0 - c.beta1) * g
            vd = c.beta2 * v.double() + (1.0 - c.beta2) * g * g
            m.copy_(md)
            v.copy_(vd)
            w = p.double()
            p.copy_(w - c.lr * ((md / c1) / (torch.sqrt(vd / c2) + c.eps) + wd * w))


def _head_rows(prefix: str, summ: list, cfg: Config, metric_mean: str, metric_t: str) -> dict[str, float]:
    out = {}
    for r in summ:
        layer, h = divmod(r["head"], cfg.heads)
        out[f"layers.{layer}.attn/b0h{h}/{metric_mean}"] = r["mean"]
        out[f"layers.{layer}.attn/b0h{h}/{metric_t}"] = r["t"]
    return out


def _stats_json(s: HeadStats) -> dict[str, list]:
    return {k: [float(x) for x in getattr(s, k)] for k in ("n", "total", "total_sq", "positive", "negative")}


def train(cfg: Config, out: Optional[str], device: torch.device = torch.device("cpu"), *,
          tensorboard: bool = True, log: Any = None) -> dict[str, Any]:
    """Trains on this rank (``torch.distributed`` initialised: one of its ranks; else alone) and
    returns the summary (rank 0 also writes it to ``out``). ``log``: a file for progress lines."""
    dist = _dist()
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist is not None else (0, 1)
    problem = cfg.validate(world)
    if problem:
        raise ValueError(problem)
    model = CausalModel(cfg).to(device)
    opt = _AdamW(model, cfg)
    params = [p for p in model.parameters()]
    stats = AttentionStats(model)
    tracked, heads = {}, {}
    for i, m in enumerate(model.layers):  # heads are column blocks of W_Q, W_K: track the transposes
        for name, w in (("wq", m.wq), ("wk", m.wk)):
            tracked[f"layers.{i}.{name}"] = w.t()
            tracked[f"layers.{i}.{name}_head"] = w.t()
            heads[f"layers.{i}.{name}_head"] = cfg.heads
    spectral = SpectralNormTracker(tracked, heads=heads)
    prev_w: dict[str, torch.Tensor] = {}
    prev_upd: dict[str, torch.Tensor] = {}
    cum_o, cum_delta = HeadStats.zeros(cfg.layers * cfg.heads), HeadStats.zeros(cfg.layers * cfg.heads)
    logger = ScalarLogger(out, tensorboard=tensorboard) if rank == 0 and out else None
    hs_file = open(os.path.join(out, "headstats.jsonl"), "w", encoding="utf-8") if logger else None
    micro = cfg.batch // (world * cfg.accumulate)
    reduce_ms, check_ms, sampled_ms, step_ms = [], [], [], []
    losses = []
    equal_all = True
    try:
        for step in range(cfg.steps):
            t0 = time.perf_counter()
            sampled = step % cfg.every == 0 or step + 1 == cfg.steps
            stats.active = sampled
            if sampled:
                stats.reset()
            tokens = make_batch(cfg, step)
            for p in params:
                if p.grad is not None:
                    p.grad.zero_()
            loss_sum = torch.zeros((), dtype=torch.float64)
            for a in range(cfg.accumulate):
                index = rank * cfg.accumulate + a  # the micro-batch's place in the global batch
                lo = index * micro
                for m in model.layers:  # stochastic heads: bits keyed by (step, micro-batch), not by rank
                    m.attn.calls = step * world * cfg.accumulate + index
                loss = model(tokens[lo:lo + micro].to(device))
                loss.backward()
                loss_sum += loss.detach().double().cpu()
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            if dist is not None:
                dist.all_reduce(flat)
                lt = loss_sum.to(_device_for_collectives(device))
                dist.all_reduce(lt)
                loss_sum = lt.cpu()
            flat /= world * cfg.accumulate
            off = 0
            for p in params:
                p.grad.copy_(flat[off:off + p.numel()].view_as(p.grad))
                off += p.numel()
            opt.step()
            loss_mean = float(loss_sum) / (world * cfg.accumulate)
            losses.append(loss_mean)
            if sampled:
                stats.active = False
                _sync(device)
                if dist is not None:  # untimed: reduce_ms is the collectives' cost, not the ranks' skew
                    dist.barrier()
                t1 = time.perf_counter()
                ro = reduce_head_stats(stats.o)
                rd = reduce_head_stats(stats.delta)
                _sync(device)
                t2 = time.perf_counter()
                for cum, r in ((cum_o, ro), (cum_delta, rd)):
                    for k in ("n", "total", "total_sq", "positive", "negative"):
                        getattr(cum, k)[:] += getattr(r, k)
                norms = spectral.update()
                scal: dict[str, float] = {"loss": loss_mean}
                scal.update({f"spectral/{n}": s for n, s in norms.items()})
                cos = {}
                for i, m in enumerate(model.layers):
                    for name, w in (("wq", m.wq), ("wk", m.wk)):
                        key = f"layers.{i}.{name}"
                        cur = w.detach().double().cpu()
                        if key in prev_w:
                            upd = cur - prev_w[key]
                            if key in prev_upd and float(upd.norm()) > 0 and float(prev_upd[key].norm()) > 0:
                                cos[f"align/{key}_update_cosine"] = frobenius_cosine(upd.numpy(), prev_upd[key].numpy())
                            prev_upd[key] = upd
                        prev_w[key] = cur
                scal.update(cos)
                replica = np.array([norms[n] for n in sorted(norms)] + [cos[n] for n in sorted(cos)], dtype=np.float64)
                t3 = time.perf_counter()
                equal = _replicas_equal(replica, device)
                t4 = time.perf_counter()
                equal_all = equal_all and equal
                reduce_ms.append((t2 - t1) * 1e3)
                check_ms.append((t4 - t3) * 1e3)
                scal.update(_head_rows("o", ro.summary(), cfg, "o_mean_error_ulps", "o_t"))
                scal.update(_head_rows("delta", rd.summary(), cfg, "delta_mean_error", "delta_t"))
                scal.update({"ddp/reduce_ms": reduce_ms[-1], "ddp/replica_check_ms": check_ms[-1],
                             "ddp/replicas_equal": 1.0 if equal else 0.0, "ddp/world_size": float(world)})
                if logger is not None:
                    logger.log(step, scal)
                    hs_file.write(json.dumps({"step": step, "o": _stats_json(ro), "delta": _stats_json(rd),
                                              "spectral": norms, "align": cos, "loss": loss_mean}) + "\n")
                    hs_file.flush()
                if not equal:
                    raise RuntimeError(f"step {step}: the replicated weights' spectral norms or update cosines "
                                       "differ between ranks (the gradients were not reduced identically)")
            _sync(device)
            dt = (time.perf_counter() - t0) * 1e3
            (sampled_ms if sampled else step_ms).append(dt)
            if log is not None and rank == 0:
                print(f"step {step} loss {loss_mean:.6f}{' sampled' if sampled else ''} {dt:.1f} ms", file=log,
                      flush=True)
    finally:
        stats.remove()
        if logger is not None:
            logger.close()
            hs_file.close()

    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    summary = {
        "schema": "tiebreak.ddp-summary/1",
        "config": asdict(cfg), "world_size": world, "device": str(device),
        "backend": dist.get_backend() if dist is not None else None,
        "torch": torch.__version__, "final_loss": losses[-1], "losses": losses,
        "replicas_equal": equal_all,
        "timing_ms": {"reduce_head_stats_median": med(reduce_ms), "reduce_head_stats_max": max(reduce_ms),
                      "replica_check_median": med(check_ms), "sampled_step_median": med(sampled_ms),
                      "plain_step_median": med(step_ms), "sampled_steps": len(reduce_ms)},
        "cumulative": {"o": _stats_json(cum_o), "delta": _stats_json(cum_delta),
                       "o_summary": cum_o.summary(), "delta_summary": cum_delta.summary()},
    }
    if rank == 0 and out:
        with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    return summary


def compare(reduced_dir: str, single_dir: str, pieces: int = 2) -> dict[str, Any]:
    """The equality claim on two runs' ``headstats.jsonl``: the reduced run (``world`` ranks) against
    the single process with ``--accumulate world`` (``pieces`` = world). Per sampled step and
    statistic: counts equal exactly, ``total`` and ``total_sq`` within :func:`reduction_bound`; and
    whether the loss, spectral norms and update cosines are equal bit for bit (expected for two
    ranks). ``ok`` is False when a count differs or a sum is outside the bound."""
    def lines(folder: str) -> list:
        with open(os.path.join(folder, "headstats.jsonl"), encoding="utf-8") as f:
            return [json.loads(x) for x in f if x.strip()]

    def stats(d: dict) -> HeadStats:
        return HeadStats(*(np.array(d[k], dtype=np.float64) for k in ("n", "total", "total_sq", "positive", "negative")))

    a, b = lines(reduced_dir), lines(single_dir)
    res = {"steps": [x["step"] for x in a], "same_steps": [x["step"] for x in a] == [x["step"] for x in b],
           "counts_equal": True, "max_abs_diff": 0.0, "max_diff_over_bound": 0.0, "replicated_bitwise_equal": True}
    for x, y in zip(a, b):
        for kind in ("o", "delta"):
            r, s = stats(x[kind]), stats(y[kind])
            for k in ("n", "positive", "negative"):
                res["counts_equal"] &= bool(np.array_equal(getattr(r, k), getattr(s, k)))
            bound = reduction_bound(s, pieces)
            for k in ("total", "total_sq"):
                d = np.abs(getattr(r, k) - getattr(s, k))
                res["max_abs_diff"] = max(res["max_abs_diff"], float(d.max()))
                with np.errstate(divide="ignore", invalid="ignore"):
                    q = np.where(d == 0, 0.0, d / bound[k])
                res["max_diff_over_bound"] = max(res["max_diff_over_bound"], float(q.max()))
        res["replicated_bitwise_equal"] &= (x["loss"] == y["loss"] and x["spectral"] == y["spectral"]
                                            and x["align"] == y["align"])
    res["ok"] = bool(res["same_steps"] and res["counts_equal"] and res["max_diff_over_bound"] <= 1.0)
    return res


# --- the entry point ------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tiebreak.ddp",
                                description="Data-parallel training of the causal experiment's model with tiebreak's "
                                            "hooks (run it under torchrun for several ranks).")
    d = Config()
    for name in ("vocab", "d_model", "heads", "head_dim", "layers", "seq", "batch", "accumulate", "steps", "every",
                 "seed"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    for name in ("lr", "weight_decay", "init_std", "debias_beta"):
        p.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(d, name))
    p.add_argument("--data", choices=("lowrank", "isotropic"), default=d.data)
    p.add_argument("--modes", default="bf16",
                   help="output modes per layer, ';' between layers, ',' between heads (e.g. 'bf16;fp32,debias')")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="cuda: one GPU per rank (LOCAL_RANK), backend nccl; cpu: backend gloo")
    p.add_argument("--threads", type=int, default=0, help="torch threads per rank (0: torch's default)")
    p.add_argument("--out", help="folder of scalars.jsonl, headstats.jsonl, summary.json (rank 0); required")
    p.add_argument("--compare", nargs=2, metavar=("REDUCED", "SINGLE"),
                   help="no training: check the equality claim on two runs' --out folders (the ranks' run, the "
                        "single process's with --accumulate WORLD) and print it; exit 1 when it fails")
    p.add_argument("--pieces", type=int, default=2, help="with --compare: the world size of the reduced run")
    p.add_argument("--no-tensorboard", action="store_true")
    return p


def main(argv: Optional[list] = None) -> int:
    args = _parser().parse_args(argv)
    if args.compare:
        try:
            res = compare(*args.compare, pieces=args.pieces)
        except (OSError, ValueError, KeyError) as e:
            print(f"python -m tiebreak.ddp --compare: {e}", file=sys.stderr)
            return 2
        print(json.dumps(res))
        return 0 if res["ok"] else 1
    if not args.out:
        print("python -m tiebreak.ddp: --out is required (or --compare REDUCED SINGLE)", file=sys.stderr)
        return 2
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # the machine's notes: NVLink multicast off
    cfg = Config(**{k: getattr(args, k) for k in ("vocab", "d_model", "heads", "head_dim", "layers", "seq", "batch",
                                                  "accumulate", "steps", "every", "seed", "lr", "weight_decay",
                                                  "init_std", "debias_beta", "data")},
                 modes=args.modes.split(";"))
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        print("python -m tiebreak.ddp: --device cuda but torch sees no GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda", local) if use_cuda else torch.device("cpu")
    problem = cfg.validate(world)
    if problem:
        print(f"python -m tiebreak.ddp: {problem}", file=sys.stderr)
        return 2
    import torch.distributed as dist
    if use_cuda:
        torch.cuda.set_device(device)
    if world > 1 or "RANK" in os.environ:  # torchrun's environment (MASTER_ADDR, RANK, ...)
        dist.init_process_group("nccl" if use_cuda else "gloo")
    try:
        s = train(cfg, args.out, device, tensorboard=not args.no_tensorboard, log=sys.stdout)
    finally:
        if _dist() is not None:
            dist.destroy_process_group()
    if s is not None and (_rank0()):
        t = s["timing_ms"]
        print(f"world {s['world_size']} ({s['backend'] or 'no process group'}, {s['device']}): final loss "
              f"{s['final_loss']:.6f}; reduce_head_stats {t['reduce_head_stats_median']:.3f} ms median "
              f"(max {t['reduce_head_stats_max']:.3f}) per sampled step of {t['sampled_step_median']:.1f} ms "
              f"(plain step {t['plain_step_median']:.1f} ms); replicas equal: {s['replicas_equal']}")
    return 0


def _rank0() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


if __name__ == "__main__":
    sys.exit(main())
