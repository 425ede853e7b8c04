# SPDX-License-Identifier: Apache-2.0
"""FIXTURE ONLY: synthetic JSON in the formats of `tiebreak experiment causal|bisect`
(schema tiebreak.experiment/1; docs/report.md lists the fields the pages read) and of tiebreak.torch's
ScalarLogger (tiebreak.scalars/1, docs/python.md), for the report and notebook tests.

The series are made up by a random generator, NOT measured: every document says so in its
`preset` ("fixture"), `tiebreak_version`, `command_line` and conclusion text, so that a page drawn
from it cannot be mistaken for a result. They exist so that the pages can be tested before (and
independently of) the experiment; the notebook test runs on the real smoke preset's JSON when the
ctest `experiment_causal_smoke` exists (tests/report/CMakeLists.txt).

The derived fields are computed from the synthetic series the way the schema defines them (growth
rate = least-squares slope of log sigma_max(W_Q), excess against the fp32 cell of the same data and
seed, 95 % t intervals over seeds), so the tables and the curves of a page agree.

  python3 experiment_fixture.py causal OUT.json [--modes bf16,fp32] [--device cpu]
  python3 experiment_fixture.py bisect OUT.json
  python3 experiment_fixture.py scalars OUT.jsonl [AUDIT.json ...]
"""

from __future__ import annotations

import json
import math
import sys
import zlib

import numpy as np

LABEL = "FIXTURE (synthetic series, not an experiment run)"
# Two-sided 95 % quantiles of Student's t for 1..10 degrees of freedom (then the normal's).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)

CONFIG = {"vocab": 64, "d_model": 64, "heads": 2, "head_dim": 32, "layers": 1, "seq": 64, "batch": 2,
          "steps": 200, "lr": 0.01, "weight_decay": 0.0, "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-8,
          "causal": True, "debias_beta": 2.0, "log_every": 10, "growth_threshold": 0.05, "monitor": "W_Q"}


def _json_number(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _rows(m):
    return [[_json_number(v) for v in r] for r in np.atleast_2d(m)]


def _slope(x, y):
    """Least-squares slope of y on x and its standard error."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    xc = x - x.mean()
    b = float(np.dot(xc, y - y.mean()) / np.dot(xc, xc))
    resid = y - y.mean() - b * xc
    se = math.sqrt(float(np.dot(resid, resid)) / (len(x) - 2) / float(np.dot(xc, xc)))
    return b, se


def _interval(values):
    v = np.asarray(values, float)
    if v.size < 2:
        return float(v.mean()) if v.size else None, None
    t = T975[v.size - 2] if v.size - 1 <= len(T975) else 1.96
    half = t * float(v.std(ddof=1)) / math.sqrt(v.size)
    return float(v.mean()), [float(v.mean()) - half, float(v.mean()) + half]


def _cell(mode, data, seed, config):
    rng = np.random.default_rng(zlib.crc32(f"{mode}/{data}/{seed}".encode()))
    layers, heads, every = config["layers"], config["heads"], config["log_every"]
    steps = np.arange(0, config["steps"] + 1, every)
    n, nh = len(steps), layers * heads
    biased = mode == "bf16"
    growth = 2e-4 + (1.5e-3 if biased and data == "lowrank" else 0.0)
    # delta error per step and head: one-signed drift for the biased mode, noise for the de-biased
    # ones, exactly 0 for fp32 (its O is the reference's)
    drift = {"lowrank": -2e-4, "isotropic": -2e-5}[data] if biased else 0.0
    noise = 0.0 if mode == "fp32" else 3e-5
    head_scale = 1.0 + np.arange(nh)  # head 1 drifts twice as fast as head 0 (the bisect's culprit)
    de = drift * head_scale + noise * rng.standard_normal((n, nh))
    cum = np.cumsum(de * every, axis=0)  # every step, not only the logged ones
    log_sigma = growth * steps[:, None] + 0.01 * rng.standard_normal((n, layers)) + rng.normal(0, 0.02)
    sigma_wq = np.exp(log_sigma)
    sigma_wk = np.exp(0.8 * log_sigma + 0.005 * rng.standard_normal((n, layers)))
    share = np.linspace(0.6, 0.9, nh)
    sigma_wq_head = np.repeat(sigma_wq, heads, axis=1) * share
    sigma_wk_head = np.repeat(sigma_wk, heads, axis=1) * share
    ties = 12 if data == "lowrank" else 1
    loss = 2.0 + 2.16 * np.exp(-steps / 60.0) + 0.02 * rng.standard_normal(n)
    ref_loss = loss + (0.002 if biased else 0.0) + 0.0005 * rng.standard_normal(n)
    cos = np.clip((0.9 if biased and data == "lowrank" else 0.5) + 0.05 * rng.standard_normal((n, layers)), -1, 1)
    cos_rows = [[None] * layers] + _rows(cos[1:])
    err_ulps = (({"lowrank": -0.03, "isotropic": -0.005}[data] if biased else 0.0)
                + (0.003 * rng.standard_normal((n, nh)) if mode != "fp32" else np.zeros((n, nh))))
    rate, se = _slope(steps, log_sigma.max(axis=1))
    return {
        "mode": mode, "data": data, "seed": seed,
        "head_modes": [[mode] * heads for _ in range(layers)],
        "spectral_growth_rate": rate, "growth_rate_se": se,
        "final_loss": float(loss[-1]), "final_ref_loss": float(ref_loss[-1]), "diverged": False,
        "wall_seconds": 0.0,
        "series": {
            "step": [int(s) for s in steps], "loss": [float(v) for v in loss], "ref_loss": [float(v) for v in ref_loss],
            "sigma_wq": _rows(sigma_wq), "sigma_wk": _rows(sigma_wk),
            "sigma_wq_head": _rows(sigma_wq_head), "sigma_wk_head": _rows(sigma_wk_head),
            "delta_error": _rows(de), "delta_error_cum": _rows(cum),
            "repeated_max_rows": [[int(v) for v in r] for r in rng.poisson(ties, (n, nh))],
            "p_one": [[int(v) for v in r] for r in rng.poisson(3 * ties, (n, nh))],
            "output_error_mean_ulps": _rows(err_ulps), "update_cosine": cos_rows,
        },
    }


def causal(path, modes=("bf16", "fp32"), data=("lowrank", "isotropic"), seeds=(1, 2), device="cpu"):
    """Writes a synthetic experiment_causal document to `path`; returns it."""
    config = dict(CONFIG)
    cells = [_cell(m, d, s, config) for m in modes for d in data for s in seeds]
    ref = {(c["data"], c["seed"]): c for c in cells if c["mode"] == "fp32"}

    def log_end(c):
        return math.log(max(float(v) for v in c["series"]["sigma_wq"][-1]))

    for c in cells:
        r = ref.get((c["data"], c["seed"]))
        if c["mode"] == "fp32":
            c["excess_log_sigma"], c["verdict"] = 0.0, "reference"
        elif r is None:
            c["excess_log_sigma"], c["verdict"] = None, "stable"
        else:
            c["excess_log_sigma"] = log_end(c) - log_end(r)
            c["verdict"] = "growth" if c["excess_log_sigma"] > config["growth_threshold"] else "stable"
    groups = []
    for m in modes:
        for d in data:
            g = [c for c in cells if c["mode"] == m and c["data"] == d]
            rate, rate_ci = _interval([c["spectral_growth_rate"] for c in g])
            ex = [c["excess_log_sigma"] for c in g if c["excess_log_sigma"] is not None]
            exm, exci = _interval(ex) if m != "fp32" and ex else (None, None)
            counts = {k: sum(c["verdict"] == k for c in g) for k in ("growth", "stable", "diverged", "reference")}
            groups.append({"mode": m, "data": d, "n": len(g), "growth_rate_mean": rate, "growth_rate_ci": rate_ci,
                           "excess_log_sigma_mean": exm, "excess_log_sigma_ci": exci, "verdicts": counts})

    def grows(m, d):
        return any(g["verdicts"]["growth"] for g in groups if g["mode"] == m and g["data"] == d)

    reproduced = grows("bf16", "lowrank") and not any(
        grows(g["mode"], g["data"]) for g in groups if g["mode"] in ("debias", "stochastic") or g["data"] == "isotropic")
    doc = {
        "schema": "tiebreak.experiment/1", "kind": "experiment_causal", "tiebreak_version": LABEL,
        "command_line": f"tests/report/experiment_fixture.py causal {path} ({LABEL})",
        "preset": "fixture", "device": device, "config": config,
        "modes": list(modes), "data": list(data), "seeds": list(seeds), "cells": cells, "groups": groups,
        "conclusion": {"reproduced": reproduced,
                       "text": f"{LABEL}: these numbers were drawn by a random generator to test the report; "
                               f"they say nothing about bf16 training. The synthetic bf16 cells on low-rank data "
                               f"were made to grow, so the page shows what a reproduced failure looks like."},
    }
    with open(path, "w") as f:
        json.dump(doc, f)
    return doc


def bisect(path):
    """Writes a synthetic experiment_bisect document: head 1 of layer 0 is the made-up culprit."""
    doc = {
        "schema": "tiebreak.experiment/1", "kind": "experiment_bisect", "tiebreak_version": LABEL,
        "command_line": f"tests/report/experiment_fixture.py bisect {path} ({LABEL})",
        "preset": "fixture", "device": "cpu", "config": dict(CONFIG), "remedy": "fp32", "data": "lowrank", "seed": 1,
        "baseline": {"excess_log_sigma": 0.21, "verdict": "growth"},
        "trials": [{"heads": [[0, 0]], "excess_log_sigma": 0.19, "verdict": "growth"},
                   {"heads": [[0, 1]], "excess_log_sigma": 0.01, "verdict": "stable"}],
        "result": {"heads": [[0, 1]], "text": f"{LABEL}: remedying layer 0 head 1 alone removes the (synthetic) growth"},
    }
    with open(path, "w") as f:
        json.dump(doc, f)
    return doc


def scalars(path, audits=()):
    """Writes ScalarLogger's scalars.jsonl format (tiebreak.scalars/1, one object per line): made-up
    training curves (one non-finite value included) and, per given audit JSON, the per-head records
    ScalarLogger.log_audit derives from it (the audit's real numbers, at made-up steps)."""
    rng = np.random.default_rng(7)
    lines = []
    for i, step in enumerate(range(0, 60, 10)):
        rec = {"loss": 4.0 * math.exp(-step / 30.0) + 0.05 * float(rng.standard_normal()), "lr": 1e-3,
               "grad_norm": float("inf") if step == 20 else 1.0 + 0.1 * float(rng.standard_normal()),
               "sigma/W_Q": 1.0 + 0.002 * step, "sigma/W_K": 1.0 + 0.001 * step}
        lines.append({"schema": "tiebreak.scalars/1", "step": step, "scalars": {k: _json_number(v) for k, v in rec.items()}})
        if i < len(audits):
            a = json.load(open(audits[i]))
            sc = {}
            for h in a["heads"]:
                for key in ("o_mean_error_ulps", "o_t"):
                    sc[f"attn/b{h.get('batch', 0)}h{h.get('head', 0)}/{key}"] = h[key]
            lines.append({"schema": "tiebreak.scalars/1", "step": step, "scalars": sc})
    with open(path, "w") as f:
        for rec in lines:
            f.write(json.dumps(rec) + "\n")
    return lines


if __name__ == "__main__":
    what, out = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == "causal":
        kw = {}
        for flag in ("--modes", "--device"):
            if flag in args:
                v = args[args.index(flag) + 1]
                kw[flag[2:]] = tuple(v.split(",")) if flag == "--modes" else v
        causal(out, **kw)
    elif what == "bisect":
        bisect(out)
    elif what == "scalars":
        scalars(out, args)
    else:
        sys.exit(f"unknown fixture '{what}'")
