# SPDX-License-Identifier: Apache-2.0
"""tiebreak.ddp (issue 23): data-parallel training of the causal experiment's model with tiebreak's
hooks. Two gloo ranks under torchrun (the entry point the 2-GPU run uses, on the CPU) against one
process running the same global batch as two micro-batches: the reduced per-head statistics equal
the single process's within the bound of tiebreak.ddp.reduction_bound (counts exactly), the
replicated spectral norms and update cosines agree across ranks, and the reduction is timed.
Skipped where torch is not installed (CI); run on the device: tools/device-check.sh python."""

import contextlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (CI): the tiebreak.torch tests run on the device")

from tiebreak import _torch_attention  # noqa: E402
from tiebreak import ddp  # noqa: E402
from tiebreak.report import kinds  # noqa: E402
from tiebreak.report.inputs import read_input  # noqa: E402
from tiebreak.torch import HeadStats  # noqa: E402

if not _torch_attention.HAVE_CUSTOM_OP:
    pytestmark = pytest.mark.skip(reason=f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)")

# Tiny: two layers (modes stochastic and bf16 | fp32 and debias per head), 4 sequences of 16 tokens, 4 steps.
ARGS = ["--vocab", "16", "--d-model", "32", "--heads", "2", "--layers", "2", "--seq", "16", "--batch", "4",
        "--steps", "3", "--every", "1", "--modes", "stochastic,bf16;fp32,debias", "--device", "cpu", "--threads", "1",
        "--no-tensorboard"]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(ddp.__file__))] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _run(cmd, timeout=120):
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


def _lines(folder):
    return [json.loads(x) for x in (folder / "headstats.jsonl").read_text().splitlines()]


def _stats(d):
    return HeadStats(*(np.array(d[k], dtype=np.float64) for k in ("n", "total", "total_sq", "positive", "negative")))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    two = tmp_path_factory.mktemp("two")
    one = tmp_path_factory.mktemp("one")
    out2 = _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                 "-m", "tiebreak.ddp", *ARGS, "--out", str(two)])
    # The single process in this one (one start of torch fewer); --threads 1 is restored after.
    threads, buf = torch.get_num_threads(), io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            assert ddp.main([*ARGS, "--accumulate", "2", "--out", str(one)]) == 0
    finally:
        torch.set_num_threads(threads)
    return two, one, out2, buf.getvalue()


def test_two_gloo_ranks_report_equals_single_process_within_the_bound(runs):
    two, one, out2, out1 = runs
    s2 = json.loads((two / "summary.json").read_text())
    s1 = json.loads((one / "summary.json").read_text())
    assert (s2["world_size"], s2["backend"], s2["config"]["accumulate"]) == (2, "gloo", 1)
    assert (s1["world_size"], s1["backend"], s1["config"]["accumulate"]) == (1, None, 2)
    assert s2["replicas_equal"] is True
    l2, l1 = _lines(two), _lines(one)
    assert [x["step"] for x in l2] == [x["step"] for x in l1] == [0, 1, 2]
    for a, b in zip(l2, l1):
        for kind in ("o", "delta"):
            r, s = _stats(a[kind]), _stats(b[kind])
            # One sample per row of every head (2 layers x 2 heads x 4 sequences x 16 rows).
            assert np.all(s.n == 4 * 16)
            for k in ("n", "positive", "negative"):
                np.testing.assert_array_equal(getattr(r, k), getattr(s, k), err_msg=f"step {a['step']} {kind} {k}")
            bound = ddp.reduction_bound(s, pieces=2)
            for k in ("total", "total_sq"):
                diff = np.abs(getattr(r, k) - getattr(s, k))
                assert np.all(diff <= bound[k]), f"step {a['step']} {kind} {k}: |diff| {diff} > bound {bound[k]}"
                # The bound discriminates: far below the size of the sums (a lost or doubled rank
                # would move them by about half their size).
                assert np.all(bound[k] < 1e-9 * (np.abs(getattr(s, k)) + np.sqrt(s.total_sq)))
            assert np.all(r.total_sq > 0) and np.any(r.positive > 0) and np.any(r.negative > 0)
        # Two ranks sum the same two micro-batch gradients (a + b == b + a) and halve them, so the
        # weights, their norms and the loss stay equal to the single process's bit for bit.
        assert a["spectral"] == b["spectral"] and a["align"] == b["align"] and a["loss"] == b["loss"]
    assert set(l2[-1]["align"]) == {f"align/layers.{i}.{w}_update_cosine" for i in (0, 1) for w in ("wq", "wk")}
    assert len(l2[-1]["spectral"]) == 2 * 2 * 3  # W_Q, W_K per layer: whole and per head
    # The same claim through the entry point the 2-GPU run is checked with.
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert ddp.main(["--compare", str(two), str(one)]) == 0
    res = json.loads(buf.getvalue())
    assert res["ok"] and res["counts_equal"] and res["replicated_bitwise_equal"] and res["max_diff_over_bound"] <= 1
    t = s2["timing_ms"]
    assert t["sampled_steps"] == 3 and 0 < t["reduce_head_stats_median"] < 5e3
    assert "reduce_head_stats" in out2 and "world 2 (gloo" in out2 and "world 1 (no process group" in out1


def test_scalars_are_one_report(runs):
    two, _, _, _ = runs
    recs = [json.loads(x) for x in (two / "scalars.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [0, 1, 2] and all(r["schema"] == "tiebreak.scalars/1" for r in recs)
    tags = set(recs[-1]["scalars"])
    for layer in (0, 1):
        for h in (0, 1):
            for m in ("o_mean_error_ulps", "o_t", "delta_mean_error", "delta_t"):
                assert f"layers.{layer}.attn/b0h{h}/{m}" in tags
    assert {"loss", "ddp/reduce_ms", "ddp/replicas_equal", "spectral/layers.0.wq_head/head1", "spectral/layers.1.wk"} <= tags
    assert recs[-1]["scalars"]["ddp/replicas_equal"] == 1.0 and recs[-1]["scalars"]["ddp/world_size"] == 2.0
    # One input of kind "torch scalars" (read_input + classify: what tiebreak report does first; no
    # matplotlib needed), then the page itself in a process of its own where matplotlib is installed.
    assert kinds.classify(read_input(str(two / "scalars.jsonl"))).name == "torch scalars"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    page = two / "report.html"
    _run([sys.executable, "-m", "tiebreak.report", str(two / "scalars.jsonl"), "-o", str(page)])
    text = page.read_text()
    assert "Training scalars" in text and "<td>layers.1.attn/b0h1/delta_t</td>" in text


def test_make_batch_is_the_experiments_data():
    cfg = ddp.Config(vocab=32, seq=12, batch=3, data="lowrank", seed=5)
    t = ddp.make_batch(cfg, 7)
    assert t.shape == (3, 12) and torch.equal(t, ddp.make_batch(cfg, 7)) and not torch.equal(t, ddp.make_batch(cfg, 8))
    assert torch.all(t[:, ::4] == 0) and torch.all((t[:, 1:4] >= 1) & (t[:, 1:4] <= 8))
    assert torch.equal(t[:, 1:4], t[:, 5:8]) and torch.equal(t[:, 1:4], t[:, 9:12])
    iso = ddp.make_batch(ddp.Config(vocab=32, seq=12, batch=3, data="isotropic", seed=5), 7)
    assert iso.max() < 32 and len(torch.unique(iso)) > 8
    assert ddp.Config(batch=6).validate(4) and not ddp.Config(batch=8, accumulate=2).validate(2)


def test_compare_fails_on_a_lost_rank(runs, tmp_path):
    two, one, _, _ = runs
    lines = [json.loads(x) for x in (two / "headstats.jsonl").read_text().splitlines()]
    for d in lines:  # as if only rank 0's half had been counted: halve the sums (counts too)
        for kind in ("o", "delta"):
            for k in d[kind]:
                d[kind][k] = [v / 2 for v in d[kind][k]]
    (tmp_path / "headstats.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    res = ddp.compare(str(tmp_path), str(one))
    assert not res["ok"] and not res["counts_equal"] and res["max_diff_over_bound"] > 1e6


def test_bad_arguments_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tiebreak.ddp", "--batch", "3", "--accumulate", "2", "--out",
                        str(tmp_path)], env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "python -m tiebreak.ddp: batch 3 is not divisible by world size x accumulate = 1 x 2"]


def test_nccl_world_of_one_on_cuda(tmp_path):
    # The 2-GPU command with one rank: the nccl backend, the kernels on CUDA tensors, the reduction's
    # copy to the GPU and back. Needs a GPU and tiebreak._cuda (the device: tools/device-check.sh python).
    from tiebreak.torch import cuda_attention_available
    if not cuda_attention_available():
        pytest.skip("no GPU of compute capability 9.0 or no tiebreak._cuda: the nccl smoke runs on the device")
    args = ["cuda" if a == "cpu" else a for a in ARGS]
    out = _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
                "-m", "tiebreak.ddp", *args, "--out", str(tmp_path)], timeout=300)
    s = json.loads((tmp_path / "summary.json").read_text())
    assert (s["world_size"], s["backend"], s["device"]) == (1, "nccl", "cuda:0") and s["replicas_equal"] is True
    assert np.isfinite(s["final_loss"]) and s["timing_ms"]["sampled_steps"] == 3 and "world 1 (nccl" in out
