# SPDX-License-Identifier: Apache-2.0
"""Pages of `tiebreak analyze spectral|align|bias --json` (docs/analysis.md). These JSON carry no
schema field; kinds.py recognises them by their fields. spectral and bias print JSON Lines (one
object per input file), so one input may hold several documents."""

from __future__ import annotations

import numpy as np

from . import figures as fg
from .inputs import num
from .page import esc, table, verdict_cell


def _shape(doc) -> str:
    return "×".join(str(s) for s in doc.get("shape", [])) or "scalar"


# ---------------------------------------------------------------- analyze bias

def bias_verdicts(inp):
    out = []
    for d in inp.docs:
        drift = d["drift"]
        alarm = "no drift alarm" if drift["first_alarm"] is None else f"drift alarm at index {drift['first_alarm']} (direction {drift['direction']:+d})"
        out.append((verdict_cell(f"p = {fg.fmt(num(d['p_value']))}", "neutral"),
                    f"{d['file']}: mean {fg.fmt(num(d['mean']))} (t {fg.fmt(num(d['t']))}, n {d['n']}), "
                    f"bootstrap p {fg.fmt(num(d['bootstrap']['p_value']))}; {alarm}"))
    return out


def _per_file_provenance(inp, data: str) -> dict:
    """Provenance of a per-file analyze command (one JSON document per input file)."""
    return {"shape": "; ".join(f"{d['file']}: {_shape(d)}" for d in inp.docs), "data": data,
            "command_line": None, "version": None}


def bias_provenance(inp):
    return _per_file_provenance(inp, "analyze bias")


def bias_section(inputs) -> str:
    out = ["<h2>Bias of error series (<code>tiebreak analyze bias</code>)</h2>"]
    docs = [(f"{inp.label}: {d['file']}", d) for inp in inputs for d in inp.docs]
    series = [(name, d) for name, d in docs if "cumulative_sum" in d["drift"]]
    if series:
        panels = []
        for name, d in series:
            cs = [num(v) for v in d["drift"]["cumulative_sum"]]
            marks = [] if d["drift"]["first_alarm"] is None else [(int(d["drift"]["first_alarm"]), "first alarm")]
            panels.append((name, "index (token or step)", "cumulative sum of the values", [("Σ", np.arange(len(cs)), cs)], marks))
        out.append("<h3>Cumulative sum over the series (with <code>--series</code>)</h3>")
        out.append(fg.curves(panels, alt="bias: cumulative sum"))
    grouped = [(name, d) for name, d in docs if d.get("groups")]
    if grouped:
        out.append("<h3>Per-row means (with <code>--per-row</code>)</h3>")
        out.append(fg.histograms([(name, [num(g["mean"]) for g in d["groups"]]) for name, d in grouped],
                                 xlabel="row mean", alt="bias: histogram of per-row means"))
    rows = []
    for name, d in docs:
        st = d["sign_test"]
        rows.append([name, _shape(d), d["n"], d["nonfinite"], fg.fmt(num(d["mean"])), fg.fmt(num(d["sd"])), fg.fmt(num(d["t"])),
                     fg.fmt(num(d["p_value"])), f"[{fg.fmt(num(d['ci_low']))}, {fg.fmt(num(d['ci_high']))}]",
                     fg.fmt(num(d["bootstrap"]["p_value"])), f"{st['positive']}/{st['negative']}", fg.fmt(num(st["p_value"])),
                     "—" if d["drift"]["first_alarm"] is None else d["drift"]["first_alarm"]])
    out.append(table(["series", "shape", "n", "non-finite", "mean", "sd", "t", "p", "CI", "bootstrap p", "sign +/-",
                      "sign p", "first alarm"], rows, numeric=range(2, 13)))
    return "\n".join(out)


# ---------------------------------------------------------------- analyze spectral

def spectral_verdicts(inp):
    return [(verdict_cell(f"σ₁ = {fg.fmt(num(d['spectral_norm']))}", "neutral"),
             f"{d['file']} ({_shape(d)}): stable rank {fg.fmt(num(d['stable_rank']))}, converged {d['converged']}")
            for d in inp.docs]


def spectral_provenance(inp):
    return _per_file_provenance(inp, "analyze spectral")


def spectral_section(inputs) -> str:
    out = ["<h2>Spectral norms (<code>tiebreak analyze spectral</code>)</h2>"]
    docs = [(f"{inp.label}: {d['file']}", d) for inp in inputs for d in inp.docs]
    if len(docs) > 1:
        out.append("<h3>Spectral norm per file, in the order given (e.g. training steps)</h3>")
        out.append(fg.curves([("spectral norm", "file index", "σ₁", [("σ₁", np.arange(len(docs)), [num(d["spectral_norm"]) for _, d in docs])], []),
                              ("stable rank", "file index", "‖M‖_F² / σ₁²", [("stable rank", np.arange(len(docs)), [num(d["stable_rank"]) for _, d in docs])], [])],
                             alt="spectral: norm per file"))
    sliced = [(n, d) for n, d in docs if d.get("slice_spectral_norms")]
    if sliced:
        out.append("<h3>Spectral norm per slice (per head with <code>--rows-per-slice</code> = head dim) or per stacked matrix</h3>")
        out.append(fg.bars([(n, [str(i) for i in range(len(d["slice_spectral_norms"]))], [num(v) for v in d["slice_spectral_norms"]])
                            for n, d in sliced], ylabel="σ₁", xlabel="slice", alt="spectral: norm per slice"))
    out.append(table(["file", "shape", "σ₁", "error estimate", "Frobenius", "stable rank", "iterations", "converged"],
                     [[n, _shape(d), fg.fmt(num(d["spectral_norm"]), 6), fg.fmt(num(d["error_estimate"])),
                       fg.fmt(num(d["frobenius_norm"]), 6), fg.fmt(num(d["stable_rank"])), d["iterations"], str(d["converged"])]
                      for n, d in docs], numeric=range(2, 7)))
    return "\n".join(out)


# ---------------------------------------------------------------- analyze align

def align_verdicts(inp):
    d = inp.doc
    ang = d["principal_angles_deg"]
    return [(verdict_cell(f"cos = {fg.fmt(num(d['cosine']))}", "neutral"),
             f"{d['count']} matrices ({_shape(d)}), k = {d['k']}: first vs last cosine {fg.fmt(num(d['cosine']))}, "
             f"smallest principal angle {fg.fmt(num(ang[0])) if ang else '—'}°")]


def align_provenance(inp):
    d = inp.doc
    return {"shape": f"{d['count']} × {_shape(d)}", "data": "analyze align: " + ", ".join(s["source"] for s in d["steps"]),
            "command_line": None, "version": None}


def align_section(inputs) -> str:
    out = ["<h2>Alignment over a sequence of matrices (<code>tiebreak analyze align</code>)</h2>"]
    for inp in inputs:
        d = inp.doc
        steps = d["steps"]
        idx = [int(s["index"]) for s in steps]
        later = steps[1:]
        panels = [("spectral norm per matrix", "index", "σ₁", [("σ₁", idx, [num(s["spectral_norm"]) for s in steps])], []),
                  ("alignment with the previous matrix", "index", "",
                   [("cosine", [int(s["index"]) for s in later], [num(s["cosine_with_previous"]) for s in later]),
                    ("overlap left", [int(s["index"]) for s in later], [num(s["overlap_left"]) for s in later]),
                    ("overlap right", [int(s["index"]) for s in later], [num(s["overlap_right"]) for s in later])], [])]
        if d["principal_angles_deg"]:
            k = len(d["principal_angles_deg"])
            panels.append(("principal angles, first vs last (top-k subspaces)", "angle number", "degrees",
                           [("left", list(range(1, k + 1)), [num(a) for a in d["principal_angles_deg"]]),
                            ("right", list(range(1, k + 1)), [num(a) for a in d["principal_angles_right_deg"]])], []))
        out.append(f"<h3>{esc(inp.label)}: {d['count']} matrices, k = {d['k']}</h3>")
        out.append(fg.curves(panels, alt="align: spectral norm and alignment curves"))
        if "coherence" in d:
            c = d["coherence"]
            out.append(table(["terms", "coherence", "dominant share", "norm of sum", "sum of norms"],
                             [[c["terms"], fg.fmt(num(c["coherence"])), fg.fmt(num(c["dominant_share"])),
                               fg.fmt(num(c["norm_of_sum"])), fg.fmt(num(c["sum_of_norms"]))]], numeric=range(0, 5)))
        out.append(table(["index", "source", "σ₁", "stable rank", "effective rank", "cos with previous"],
                         [[s["index"], s["source"], fg.fmt(num(s["spectral_norm"]), 6), fg.fmt(num(s["stable_rank"])),
                           fg.fmt(num(s["effective_rank"])), fg.fmt(num(s.get("cosine_with_previous")))] for s in steps],
                         numeric=(0, 2, 3, 4, 5)))
    return "\n".join(out)
