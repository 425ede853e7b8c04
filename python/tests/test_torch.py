# SPDX-License-Identifier: Apache-2.0
"""tiebreak.torch: the SDPA audit hook, spectral-norm tracker, distributed reduction (two gloo
processes) and scalar logging. Skipped, with the reason shown, where torch is not installed (CI);
run on the device (docs/python.md)."""

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI): the tiebreak.torch tests run on the device")

import tiebreak as tb  # noqa: E402
from tiebreak import torch as tbt  # noqa: E402

F = torch.nn.functional


class Attention(torch.nn.Module):
    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, e // self.heads).permute(2, 0, 3, 1, 4)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_sdpa_hook_audits_forward_and_backward(tmp_path):
    torch.manual_seed(0)
    model = Attention().double()
    x = torch.randn(1, 12, 32, dtype=torch.float64)
    hook = tbt.SDPAAudit({"attn": model}, every=2, dump_dir=str(tmp_path), threads=1)
    original = F.scaled_dot_product_attention
    with hook:
        assert F.scaled_dot_product_attention is not original
        for _ in range(3):  # steps 0, 1, 2: 0 and 2 are sampled
            model(x).square().sum().backward()
            hook.step()
    assert F.scaled_dot_product_attention is original
    assert [r["step"] for r in hook.reports] == [0, 2] and hook.skipped == 0
    r = hook.reports[0]
    assert r["module"] == "attn" and r["causal"] is True and r["shape"]["heads"] == 2
    assert "dq" in r["heads"][0]  # the backward's gradients were captured
    # The same audit from the dumped folder, through the numpy API.
    folder = sorted(p for p in tmp_path.iterdir())[0]
    arrays = {p.stem: np.load(p) for p in folder.iterdir()}
    assert set(arrays) == {"q", "k", "v", "o", "do", "dq", "dk", "dv"}
    again = tb.audit(**arrays, causal=True, threads=1)
    for d in (again, r):
        for key in ("timing_s", "step", "module", "command_line"):
            d.pop(key, None)
    assert again == r
    # f64 SDPA against the f64 reference: two f64 computations of the same attention in different
    # orders, so the mean signed difference is a small fraction of an ulp of O's format (0.015 on the
    # H200 machine's CPU, 2026-12-03), nowhere near the size of a low-precision kernel's bias.
    assert abs(r["heads"][0]["o_mean_error_ulps"]) < 0.25


class Masked(torch.nn.Module):
    def forward(self, q):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4, dtype=torch.bool))


def test_sdpa_hook_skips_masks_and_leaves_other_modules():
    torch.manual_seed(1)
    q = torch.randn(1, 1, 4, 8)
    hook = tbt.SDPAAudit({"masked": Masked()}, every=1)
    with hook:
        F.scaled_dot_product_attention(q, q, q)  # not inside a chosen module: not looked at
        hook._modules[0][1](q)  # inside, but with a mask the reference does not model: counted
    assert hook.reports == [] and hook.skipped == 1


def test_spectral_norm_tracker():
    torch.manual_seed(2)
    lin = torch.nn.Linear(16, 24, bias=False)
    tracker = tbt.SpectralNormTracker({"w": lin.weight}, heads={"w": 3})
    for _ in range(3):
        sig = tracker.update()
        with torch.no_grad():
            lin.weight.mul_(1.01)
    assert sorted(sig) == ["w/head0", "w/head1", "w/head2"]
    w = lin.weight.detach().double() / 1.01
    for h in range(3):
        exact = torch.linalg.matrix_norm(w[8 * h:8 * (h + 1)], ord=2).item()
        assert sig[f"w/head{h}"] == pytest.approx(exact, rel=1e-5)


def _worker(rank, init_file, out_file):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    rng = np.random.default_rng(100 + rank)
    stats = tbt.HeadStats.zeros(3)
    for h in range(3):
        stats.push(h, rng.standard_normal(50 + 10 * rank) + 0.1 * h)
    total = tbt.reduce_head_stats(stats)
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump(total.summary(), f)
    dist.destroy_process_group()


def test_reduce_head_stats_two_gloo_processes(tmp_path):
    import torch.multiprocessing as mp

    out = tmp_path / "out.json"
    mp.spawn(_worker, args=(str(tmp_path / "init"), str(out)), nprocs=2, join=True)
    got = json.loads(out.read_text())
    single = tbt.HeadStats.zeros(3)
    for rank in (0, 1):
        rng = np.random.default_rng(100 + rank)
        for h in range(3):
            single.push(h, rng.standard_normal(50 + 10 * rank) + 0.1 * h)
    want = single.summary()
    for g, w in zip(got, want):
        assert g["n"] == w["n"] == 110 and g["positive"] == w["positive"]
        assert g["mean"] == pytest.approx(w["mean"], rel=1e-12, abs=1e-15)
        assert g["sd"] == pytest.approx(w["sd"], rel=1e-12)
    assert tbt.reduce_head_stats(single) is single  # no process group: the stats themselves


def test_scalar_logger(tmp_path):
    with tbt.ScalarLogger(str(tmp_path)) as log:
        log.log(3, {"a": 1.5, "b": float("inf")})
        log.log_audit({"schema": "tiebreak.audit/2", "step": 4, "module": "m",
                       "heads": [{"batch": 0, "head": 1, "o_mean_error_ulps": 0.25, "o_t": 3.0}]})
    lines = [json.loads(x) for x in (tmp_path / "scalars.jsonl").read_text().splitlines()]
    assert lines[0] == {"schema": "tiebreak.scalars/1", "step": 3, "scalars": {"a": 1.5, "b": "inf"}}
    assert lines[1]["scalars"] == {"m/b0h1/o_mean_error_ulps": 0.25, "m/b0h1/o_t": 3.0}
    audits = (tmp_path / "audits.jsonl").read_text().splitlines()
    assert json.loads(audits[0])["schema"] == "tiebreak.audit/2"
    if log.writer is not None:
        assert any(n.startswith("events.out.tfevents") for n in os.listdir(tmp_path / "tensorboard"))


def test_numpy_api_reads_torch_tensors():
    x = torch.tensor([1.00390625, 0.1, -3.0])
    r = tb.round(x, "bf16")
    assert r.bits.tolist() == [0x3F80, 0x3DCD, 0xC040]
    y = torch.tensor([1.0078125, -2.5], dtype=torch.bfloat16)  # bf16 tensors: exact as float32
    assert tb.round(y, "f32").values.tolist() == [1.0078125, -2.5]
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 2, 8, 16).bfloat16() for _ in range(3))
    o = F.scaled_dot_product_attention(q.double(), k.double(), v.double()).bfloat16()
    from_torch = tb.audit(q, k, v, o, threads=1)  # bf16 through DLPack, read in place
    from_numpy = tb.audit(*(tbt.to_numpy(t) for t in (q, k, v, o)), threads=1)
    assert from_torch["tensors"]["q"]["dtype"] == "bf16"
    assert from_torch["heads"] == from_numpy["heads"]
