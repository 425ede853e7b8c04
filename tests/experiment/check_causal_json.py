#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the JSON of `tiebreak experiment causal` (docs/experiment.md) beyond its shape: every cell
of the grid present once, series of one length, the fp32 cells' delta error exactly zero and the
biased cells' not, the lowrank data giving more repeated maxima than the isotropic, verdicts that
follow from the pairing. Exit 1 with the first failure."""
import argparse
import json
import math
import sys


def num(x):
    return float(x)  # json_number: numbers, or "inf" / "-inf" / "nan"


def fail(msg):
    print(f"check_causal_json: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--preset", default="smoke")
    a = ap.parse_args()
    j = json.load(open(a.json))
    if j.get("schema") != "tiebreak.experiment/1" or j.get("kind") != "experiment_causal":
        fail("wrong schema or kind")
    if j["preset"] != a.preset or j["device"] not in ("cpu", "gpu") or not j["complete"]:
        fail("preset, device or completeness wrong")
    cfg = j["config"]
    L, H = cfg["layers"], cfg["heads"]
    cells = j["cells"]
    want = {(m, d, s) for m in j["modes"] for d in j["data"] for s in j["seeds"]}
    got = [(c["mode"], c["data"], c["seed"]) for c in cells]
    if set(got) != want or len(got) != len(want):
        fail(f"cells {got} are not the grid {sorted(want)}")
    by = {(c["mode"], c["data"], c["seed"]): c for c in cells}
    for c in cells:
        s = c["series"]
        n = len(s["step"])
        if n < 2 or s["step"][0] != 0 or s["step"][-1] != cfg["steps"] - 1 and not c["diverged"]:
            fail(f"{c['label']}: logged steps {s['step'][:3]}...{s['step'][-1:]}")
        for k in ("loss", "ref_loss", "sigma_wq", "sigma_wk", "sigma_wq_head", "sigma_wk_head", "delta_error",
                  "delta_error_cum", "repeated_max_rows", "p_one", "output_error_mean_ulps", "update_cosine"):
            if len(s[k]) != n:
                fail(f"{c['label']}: series {k} has {len(s[k])} entries, step has {n}")
        for k in ("sigma_wq_head", "delta_error", "delta_error_cum", "repeated_max_rows", "p_one"):
            if any(len(r) != L * H for r in s[k]):
                fail(f"{c['label']}: {k} rows must have layers*heads = {L * H} entries")
        if c["head_modes"] != [[c["mode"]] * H] * L:
            fail(f"{c['label']}: head_modes {c['head_modes']}")
        cum = [num(x) for x in s["delta_error_cum"][-1]]
        if c["mode"] == "fp32" and any(x != 0 for x in cum):
            fail(f"{c['label']}: fp32 O has no rounding, its delta error must be exactly 0, got {cum}")
        if c["mode"] == "bf16" and all(x == 0 for x in cum):
            fail(f"{c['label']}: bf16 O is rounded, its delta error cannot be 0 everywhere")
        if not (abs(num(c["final_ref_loss"]) - num(c["final_loss"])) < 0.05):
            fail(f"{c['label']}: the f32 reference loss {c['final_ref_loss']} is far from the kernels' {c['final_loss']}")
        if any(not (num(x) > 0) for r in s["sigma_wq"] for x in r) and not c["diverged"]:
            fail(f"{c['label']}: a spectral norm is not positive")
        # the verdict follows from the pairing
        ref = by[("fp32", c["data"], c["seed"])]
        if c["mode"] == "fp32":
            if c["verdict"] not in ("reference", "diverged") or c["excess_log_sigma"] is not None:
                fail(f"{c['label']}: the fp32 cell is the reference")
        else:
            ex = max(math.log(num(a)) - math.log(num(b)) for a, b in zip(c["series"]["sigma_wq"][-1], ref["series"]["sigma_wq"][-1]))
            if abs(ex - num(c["excess_log_sigma"])) > 1e-9:
                fail(f"{c['label']}: excess_log_sigma {c['excess_log_sigma']} is not log sigma_end - its fp32 pair's ({ex})")
            want_v = "diverged" if c["diverged"] else ("growth" if ex > cfg["growth_threshold"] else "stable")
            if c["verdict"] != want_v:
                fail(f"{c['label']}: verdict {c['verdict']}, expected {want_v}")
    # what the data is built to do: repeated maxima (and P-bar == 1) far more often on lowrank data
    def total(d, key):
        return sum(num(x) for c in cells if c["data"] == d for r in c["series"][key] for x in r)
    if "lowrank" in j["data"] and "isotropic" in j["data"]:
        if not total("lowrank", "repeated_max_rows") > 2 * total("isotropic", "repeated_max_rows"):
            fail("lowrank data should give more than twice the repeated maxima of isotropic data")
    if len(j["groups"]) != len(j["modes"]) * len(j["data"]):
        fail("one group per (mode, data)")
    for g in j["groups"]:
        if g["n"] != len(j["seeds"]) or sum(g["verdicts"].values()) != g["n"]:
            fail(f"group {g['mode']}/{g['data']}: n or verdict counts wrong")
    if not isinstance(j["conclusion"]["reproduced"], bool) or len(j["conclusion"]["text"]) < 40:
        fail("conclusion missing")
    print(f"check_causal_json: {len(cells)} cells ok; reproduced={j['conclusion']['reproduced']}")


if __name__ == "__main__":
    main()
