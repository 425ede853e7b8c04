# SPDX-License-Identifier: Apache-2.0
"""Pages of the attention JSON: `tiebreak audit` (tiebreak.audit/1, /2), the attention probe
counters (tiebreak.attention_probe/1) and `tiebreak demo --json` (docs/audit.md, docs/attention.md,
docs/cli.md)."""

from __future__ import annotations

import math

import numpy as np

from . import figures as fg
from .inputs import num
from .page import Raw, esc, table, verdict_cell


def _grid(heads, batch: int, nheads: int, value):
    """batch x head matrix of value(head_object); NaN where the JSON has no such head."""
    m = np.full((max(batch, 1), max(nheads, 1)), np.nan)
    for h in heads:
        b, i = int(h["batch"]), int(h["head"])
        if 0 <= b < m.shape[0] and 0 <= i < m.shape[1]:
            m[b, i] = value(h)
    return m


def _head_count(doc, key="shape"):
    s = doc[key]
    return int(s["batch"]), int(s["heads"])


def _shape_text(s: dict) -> str:
    text = f"B={s['batch']} H={s['heads']} Hkv={s['kv_heads']} Sq={s['seq_q']} Sk={s['seq_k']} D={s['dim']}"
    if "causal" in s:
        text += " causal" if s["causal"] else ""
    return text


# ---------------------------------------------------------------- tiebreak audit

def audit_verdicts(inp):
    d = inp.doc
    s = d["summary"]
    biased = s["verdict"] == "biased"
    detail = (f"{s['heads_biased']} of {s['heads']} heads biased; pooled O error {fg.fmt(num(s['o_mean_error_ulps']))} "
              f"ulp (t {fg.fmt(num(s['o_t']))}), directed {fg.fmt(num(s['o_directed_mean_error_ulps']))} ulp; "
              f"rows with a repeated maximum {fg.fmt(num(s['tie_row_share']))}")
    if "heads_delta_biased" in s:
        detail += f"; delta biased in {s['heads_delta_biased']} heads (Σ e_δ {fg.fmt(num(s['delta_error_sum']))})"
    return [(verdict_cell(s["verdict"], "biased" if biased else "unbiased"), detail)]


def audit_provenance(inp):
    d = inp.doc
    return {
        "shape": _shape_text(d["shape"]) + (" causal" if d.get("causal") else ""),
        "data": f"{d.get('source', '?')} ({d.get('container', '?')}, {d.get('layout', '?')}); reference on {d.get('device', 'cpu')}",
        "command_line": d.get("command_line"),  # written by tiebreak audit since 2026-12-03
        "version": f"{d['tool']['name']} {d['tool']['version']}" if "tool" in d else None,
    }


def audit_section(inputs) -> str:
    has_delta = any("delta" in h for inp in inputs for h in inp.doc["heads"])
    metrics = [fg.Metric("O signed error (ulps)", signed=True), fg.Metric("t of O signed error", signed=True, fmt_digits=2),
               fg.Metric("repeated-maximum row share", signed=False, unit_range=(0.0, 1.0))]
    if has_delta:
        metrics.append(fg.Metric("delta error (ulps)", signed=True))
    cols = []
    for inp in inputs:
        d = inp.doc
        b, h = _head_count(d)
        heads = d["heads"]
        ms = [_grid(heads, b, h, lambda x: num(x["o_mean_error_ulps"])),
              _grid(heads, b, h, lambda x: num(x["o_t"])),
              _grid(heads, b, h, lambda x: num(x["tie_row_share"]))]
        if has_delta:
            ms.append(_grid(heads, b, h, lambda x: num(x["delta"]["mean_ulps"]) if "delta" in x else math.nan))
        cols.append((inp.label, ms, _grid(heads, b, h, lambda x: 1.0 if x["biased"] else 0.0) > 0))
    out = ["<h2>Attention audits (<code>tiebreak audit</code>)</h2>",
           "<p class=\"how\">Heatmaps: one cell per (batch, head), inputs side by side with one colour scale per row; "
           "a black frame marks a head the audit calls biased. Grey: no value.</p>",
           fg.heatmap_grid(metrics, cols, alt="audit: per-head signed error, t and repeated-maximum share")]
    ci_cols = []
    for inp in inputs:
        heads = inp.doc["heads"]
        labels = [f"b{x['batch']} h{x['head']}" for x in heads]
        signed = ("signed", [num(x["o_mean_error_ulps"]) for x in heads],
                  [num(x["o_ci_ulps"][0]) for x in heads], [num(x["o_ci_ulps"][1]) for x in heads])
        directed = ("directed", [num(x["o"]["directed"]["mean_ulps"]) for x in heads],
                    [num(x["o"]["directed"]["ci_low"]) for x in heads], [num(x["o"]["directed"]["ci_high"]) for x in heads])
        ci_cols.append((inp.label, labels, [signed, directed]))
    out.append("<h3>Mean error of O per head, with its 95 % interval (b batch, h head)</h3>")
    out.append(fg.ci_plot(ci_cols, alt="audit: per-head mean error with 95 % interval"))
    out.append("<h3>Rows by the sign of their mean error</h3>")
    sign_cols = []
    for inp in inputs:
        t = {"p": 0, "z": 0, "n": 0}
        for x in inp.doc["heads"]:
            sg = x["o"]["signed"]
            t["p"] += int(sg["sign_positive"])
            t["z"] += int(sg["sign_zero"])
            t["n"] += int(sg["sign_negative"])
        sign_cols.append((inp.label, t["p"], t["z"], t["n"]))
    out.append(fg.sign_bars(sign_cols, alt="audit: rows by sign of the error"))
    for inp in inputs:
        d = inp.doc
        rows = []
        for x in d["heads"]:
            rows.append([f"{x['batch']}.{x['head']}", x["rows"], fg.fmt(num(x["o_mean_error_ulps"])), fg.fmt(num(x["o_t"])),
                         fg.fmt(num(x["o_p_value"])), fg.fmt(num(x["o_directed_mean_error_ulps"])),
                         fg.fmt(num(x["o_directed_t"])), fg.fmt(num(x["tie_row_share"])),
                         fg.fmt(num(x["delta"]["mean_ulps"])) if "delta" in x else "—",
                         verdict_cell("biased" if x["biased"] else "unbiased", "biased" if x["biased"] else "unbiased")])
        out.append(f"<details><summary>{esc(inp.label)}: per-head table</summary>")
        out.append(table(["batch.head", "rows", "O mean (ulps)", "t", "p", "directed mean", "directed t",
                          "repeated-max share", "delta mean (ulps)", "verdict"], rows, numeric=range(1, 9)))
        out.append("</details>")
    return "\n".join(out)


# ---------------------------------------------------------------- attention probe counters

def _probe_t(e) -> float:
    """t of the mean error against 0 from the counters' count, mean and sd (sd/√count its standard
    error); NaN below two events or with sd 0 and mean 0."""
    n, mean, sd = num(e["count"]), num(e["mean"]), num(e["sd"])
    if n < 2:
        return math.nan
    if sd == 0:
        return math.nan if mean == 0 else math.copysign(math.inf, mean)
    return mean / (sd / math.sqrt(n))


def probe_label(inp) -> str:
    o = inp.doc["options"]
    return f"{inp.label} · {o['mode']} ({o['scaling']})"


def probe_verdicts(inp):
    d = inp.doc
    e = d["total"]["output_error"]
    rows = int(d["problem"]["batch"]) * int(d["problem"]["heads"]) * int(d["problem"]["seq_q"])
    detail = (f"mode {d['options']['mode']}, {d['backend']}: O rounding error {fg.fmt(num(e['mean']))} ulp "
              f"(t {fg.fmt(_probe_t(e))} over {e['count']} elements); rows with a repeated maximum "
              f"{d['total']['repeated_max_exact']} of {rows}; P-bar == 1 events {d['total']['p_one']}")
    return [(verdict_cell("counters (no verdict)", "neutral"), detail)]


def probe_provenance(inp):
    d = inp.doc
    p = d["problem"]
    src = d["inputs"]
    data = f"inputs {src['source']}" + (f" from {src['path']}" if src.get("path") else f", seed {src['seed']}")
    return {
        "shape": _shape_text(p) + ("" if p.get("causal") else ""),
        "data": f"{data}; output {d.get('output', '?')}; backend {d.get('backend', '?')}",
        "command_line": d.get("command_line"),
        "version": f"{d['tool']['name']} {d['tool']['version']}" if "tool" in d else None,
    }


def probe_section(inputs) -> str:
    metrics = [fg.Metric("O rounding error, mean (ulps)", signed=True),
               fg.Metric("t of the rounding error", signed=True),
               fg.Metric("repeated-maximum row share", signed=False, unit_range=(0.0, 1.0)),
               fg.Metric("delta error, mean (absolute)", signed=True, fmt_digits=2)]
    cols = []
    for inp in inputs:
        d = inp.doc
        b, h = int(d["problem"]["batch"]), int(d["problem"]["heads"])
        sq = max(int(d["problem"]["seq_q"]), 1)
        heads = d["heads"]
        cols.append((probe_label(inp), [
            _grid(heads, b, h, lambda x: num(x["output_error"]["mean"])),
            _grid(heads, b, h, lambda x: _probe_t(x["output_error"])),
            _grid(heads, b, h, lambda x: num(x["repeated_max_exact"]) / sq),
            _grid(heads, b, h, lambda x: num(x["delta_error"]["mean"]))], None))
    out = ["<h2>Attention probe counters (<code>tiebreak attention</code>, <code>OUT.probe.json</code>)</h2>",
           "<p class=\"how\">The kernel's own view: the error of rounding O against its f32 value inside the kernel "
           "(t = mean / (sd / √count) from the counters). Runs side by side, one colour scale per row.</p>",
           fg.heatmap_grid(metrics, cols, alt="probe: per-head rounding error, t and repeated-maximum share"),
           "<h3>Sign of the rounding error of O, all elements</h3>",
           fg.sign_bars([(probe_label(inp), int(inp.doc["total"]["output_error"]["positive"]),
                          int(inp.doc["total"]["output_error"]["zero"]), int(inp.doc["total"]["output_error"]["negative"]))
                         for inp in inputs], alt="probe: sign of the rounding error")]
    rows = []
    for inp in inputs:
        d = inp.doc
        t = d["total"]
        rows.append([probe_label(inp), d["backend"], t["repeated_max_exact"], t["repeated_max_near"], t["p_one"],
                     fg.fmt(num(t["output_error"]["mean"])), fg.fmt(num(t["output_error"]["sd"])),
                     fg.fmt(_probe_t(t["output_error"])), fg.fmt(num(t["delta_error"]["mean"])),
                     fg.fmt(_probe_t(t["delta_error"]))])
    out.append(table(["run", "backend", "repeated max (exact)", "(near)", "P-bar == 1", "O error mean (ulps)", "sd",
                      "t", "delta error mean", "t"], rows, numeric=range(2, 10)))
    return "\n".join(out)


# ---------------------------------------------------------------- tiebreak demo --json

def demo_verdicts(inp):
    d = inp.doc
    out = []
    same = [r for r in d["rows"] if r["accumulate"] == "f32" and r["tail"] == "same-sign" and r["mode"] == "rne"]
    if same:
        r = same[0]
        out.append((verdict_cell(f"ties: {fg.fmt(num(r['share_away']))} away", "biased" if num(r["share_away"]) > 0.5 else "unbiased"),
                    f"rne after an f32 accumulation with a same-sign tail: {r['ties_away']} of {r['ties']} ties "
                    f"rounded away from zero (mean error on ties {fg.fmt(num(r['mean_error_ulps_ties']))} ulp)"))
    for m in d.get("attention", {}).get("modes", []):
        nb = int(m["heads_biased"])
        out.append((verdict_cell(f"{m['mode']}: {'biased' if nb else 'unbiased'}", "biased" if nb else "unbiased"),
                    f"attention ({d['attention']['backend']}), mode {m['mode']}: {nb} of {len(m['heads'])} heads biased, "
                    f"delta biased in {m['heads_delta_biased']}"))
    return out


def demo_provenance(inp):
    d = inp.doc
    a = d.get("attention")
    return {
        "shape": (f"{d['pairs']} bf16 pairs" + (f"; attention {_shape_text(a['shape'])}" if a else "")),
        "data": f"seed {d['seed']}, embedded workload",
        "command_line": None,
        "version": None,
    }


def demo_section(inputs) -> str:
    out = ["<h2>Tie-breaking demonstration (<code>tiebreak demo</code>)</h2>"]
    for inp in inputs:
        d = inp.doc
        rows = d["rows"]
        labels = [f"{r['accumulate']} / {r['tail']} / {r['mode']}" for r in rows]
        out.append(f"<h3>{esc(inp.label)}: every same-binade pair of bf16 values ({d['pairs']} pairs, {d['ties']} ties)</h3>")
        out.append(fg.bars([("share of ties rounded away from zero", labels, [num(r["share_away"]) for r in rows]),
                            ("mean error on ties (ulps, + = away)", labels, [num(r["mean_error_ulps_ties"]) for r in rows])],
                           ylabel="", alt="demo: share of ties rounded away", xlabel="accumulator / tail / mode"))
        out.append(table(["accumulate", "tail", "mode", "ties", "away", "toward", "share away", "mean error ties (ulps)",
                          "mean error all (ulps)"],
                         [[r["accumulate"], r["tail"], r["mode"], r["ties"], r["ties_away"], r["ties_toward"],
                           fg.fmt(num(r["share_away"])), fg.fmt(num(r["mean_error_ulps_ties"])),
                           fg.fmt(num(r["mean_error_ulps_all"]))] for r in rows], numeric=range(3, 9)))
        a = d.get("attention")
        if not a:
            continue
        b, h = int(a["shape"]["batch"]), int(a["shape"]["heads"])
        metrics = [fg.Metric("O signed error (ulps)", signed=True), fg.Metric("t of O signed error", signed=True),
                   fg.Metric("repeated-maximum row share", signed=False, unit_range=(0.0, 1.0)),
                   fg.Metric("delta error (ulps)", signed=True)]
        cols = []
        for m in a["modes"]:
            heads = m["heads"]
            cols.append((m["mode"], [_grid(heads, b, h, lambda x: num(x["o_mean_ulps"])),
                                     _grid(heads, b, h, lambda x: num(x["o_t"])),
                                     _grid(heads, b, h, lambda x: num(x["tie_rows"]) / max(num(x["rows"]), 1)),
                                     _grid(heads, b, h, lambda x: num(x["delta_mean_ulps"]))],
                         _grid(heads, b, h, lambda x: 1.0 if x["o_biased"] else 0.0) > 0))
        out.append(f"<h3>{esc(inp.label)}: flash attention in each output mode ({esc(a['backend'])}, "
                   f"{esc(_shape_text(a['shape']))}), audited against the f64 reference</h3>")
        out.append(fg.heatmap_grid(metrics, cols, alt="demo: per-head error by output mode"))
    return "\n".join(out)
