# SPDX-License-Identifier: Apache-2.0
"""Page of `tiebreak audit-gemm` (schema tiebreak.audit-gemm/1, docs/gemm-audit.md)."""

from __future__ import annotations

import numpy as np

from . import figures as fg
from .inputs import num
from .page import esc, json_details, table, verdict_cell

# Fields this page draws or tabulates; any other top-level field (added within the schema version,
# docs/gemm-audit.md) is shown as JSON so that nothing the file says is silently dropped.
_KNOWN = {"schema", "source", "container", "layout", "shape", "tensors", "options", "elements", "error_ulps",
          "error_relative", "blocks", "verdict", "identification", "timing_s", "tool", "command_line"}


def verdicts(inp):
    d = inp.doc
    biased = bool(d["verdict"]["biased"])
    rs = d["error_ulps"]["row_signed"]
    e = d["elements"]
    detail = (f"{d['shape']['M']} x {d['shape']['N']} x {d['shape']['K']}: row error {fg.fmt(num(rs['mean']))} ulp "
              f"(t {fg.fmt(num(rs['t']))}); elements above/below/equal the exact product {e['above']}/{e['below']}/{e['exact']}")
    ident = d.get("identification")
    if ident:
        repro = [c["name"] for c in ident["candidates"] if c["reproduces"]]
        detail += "; reproduced bit for bit by " + (", ".join(repro) if repro else "no candidate")
    return [(verdict_cell("biased" if biased else "no bias detected", "biased" if biased else "unbiased"), detail)]


def provenance(inp):
    d = inp.doc
    t = d["tensors"]
    fmts = ", ".join(f"{k} {v['dtype']}→{v['format']}" for k, v in sorted(t.items()))
    return {
        "shape": f"M={d['shape']['M']} N={d['shape']['N']} K={d['shape']['K']}",
        "data": f"{d.get('source', '?')} ({d.get('container', '?')}; layouts a {d['layout']['a']}, b {d['layout']['b']}; {fmts})",
        "command_line": d.get("command_line"),
        "version": f"{d['tool']['name']} {d['tool']['version']}" if "tool" in d else None,
    }


def _block_grid(blocks, key):
    rows = sorted({int(b["row"]) for b in blocks})
    cols = sorted({int(b["col"]) for b in blocks})
    m = np.full((max(len(rows), 1), max(len(cols), 1)), np.nan)
    ri = {r: i for i, r in enumerate(rows)}
    ci = {c: i for i, c in enumerate(cols)}
    for b in blocks:
        m[ri[int(b["row"])], ci[int(b["col"])]] = num(b[key])
    return m


def section(inputs) -> str:
    out = ["<h2>GEMM audits (<code>tiebreak audit-gemm</code>)</h2>",
           "<p class=\"how\">Heatmaps: one cell per block of D (<code>--block</code> rows × columns; row and column "
           "block index on the axes), inputs side by side with one colour scale per row.</p>"]
    with_blocks = [inp for inp in inputs if inp.doc.get("blocks")]
    if with_blocks:
        metrics = [fg.Metric("block mean error (ulps)", signed=True), fg.Metric("t of the block mean", signed=True),
                   fg.Metric("share of elements above the exact product", signed=False, unit_range=(0.0, 1.0))]
        cols = [(inp.label, [_block_grid(inp.doc["blocks"], "mean_ulps"), _block_grid(inp.doc["blocks"], "t"),
                             _block_grid(inp.doc["blocks"], "share_above")], None) for inp in with_blocks]
        out.append(fg.heatmap_grid(metrics, cols, xlabel="column block", ylabel="row block",
                                   alt="gemm: per-block error, t and share above"))
        out.append("<h3>Distribution of the block mean errors</h3>")
        out.append(fg.histograms([(inp.label, [num(b["mean_ulps"]) for b in inp.doc["blocks"]]) for inp in with_blocks],
                                 xlabel="block mean error (ulps)", alt="gemm: histogram of block mean errors"))
    out.append("<h3>Elements by the sign of their error</h3>")
    out.append(fg.sign_bars([(inp.label, int(inp.doc["elements"]["above"]), int(inp.doc["elements"]["exact"]),
                              int(inp.doc["elements"]["below"])) for inp in inputs], alt="gemm: elements by sign"))
    for inp in inputs:
        d = inp.doc
        rows = []
        for key, name in (("row_signed", "signed error, ulps (rows)"), ("row_directed", "directed error, ulps (rows)"),
                          ("col_signed", "signed error, ulps (columns)")):
            s = d["error_ulps"].get(key)
            if s is None:
                continue
            rows.append([name, s["n"], fg.fmt(num(s["mean"])), fg.fmt(num(s["sd"])), fg.fmt(num(s["t"])), fg.fmt(num(s["p"])),
                         f"[{fg.fmt(num(s['ci95'][0]))}, {fg.fmt(num(s['ci95'][1]))}]",
                         f"{s['sign_positive']}/{s['sign_negative']}",
                         verdict_cell("biased" if s["biased"] else "no", "biased" if s["biased"] else "unbiased")])
        out.append(f"<h3>{esc(inp.label)}: statistics (max |error| {fg.fmt(num(d['error_ulps']['max_abs']))} ulps)</h3>")
        out.append(table(["statistic", "n", "mean", "sd", "t", "p", "95 % interval", "sign +/-", "biased"], rows,
                         numeric=range(1, 6)))
        ident = d.get("identification")
        if ident:
            out.append(f"<p>Identification on {ident['tiles']} tiles ({ident['elements']} elements):</p>")
            out.append(table(["candidate", "instruction", "promote", "split-K", "reduction", "mismatches", "reproduces D"],
                             [[c["name"], c["instruction"], c["promote"], c["split_k"], c["reduction"], c["mismatches"],
                               "yes" if c["reproduces"] else "no"] for c in ident["candidates"]], numeric=(2, 3, 5)))
            for n in ident.get("notes", []):
                out.append(f"<p class=\"how\">{esc(n)}</p>")
        extra = {k: v for k, v in d.items() if k not in _KNOWN}
        if extra:
            out.append(json_details(f"{inp.label}: other fields ({', '.join(sorted(extra))})", extra))
    return "\n".join(out)
