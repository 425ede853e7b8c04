# SPDX-License-Identifier: Apache-2.0
"""Page of the torch hook's scalars: `scalars.jsonl` of tiebreak.torch.ScalarLogger, one object
`{"schema": "tiebreak.scalars/1", "step": s, "scalars": {tag: value}}` per line (docs/python.md).

Tags of the form `MODULE/b<batch>h<head>/METRIC` (what `ScalarLogger.log_audit` writes from an
audit: METRIC o_mean_error_ulps, o_t) are per-head statistics: drawn per head, and as heatmaps per
(batch, head). Every other tag is a scalar curve over steps, grouped by its first path component."""

from __future__ import annotations

import re

import numpy as np

from . import figures as fg
from .inputs import num
from .page import esc, table, verdict_cell

HEAD_TAG = re.compile(r"^(?P<module>.+)/b(?P<batch>\d+)h(?P<head>\d+)/(?P<metric>[^/]+)$")
MAX_LINES = 10    # lines per panel before a group is split over several panels
MAX_PANELS = 24   # scalar panels drawn per input; the rest are in the table only


def _tags(inp):
    """tag -> (steps, values) in step order (stable: records of one step keep their file order)."""
    if "tags" not in inp.extra:
        acc = {}
        for d in inp.docs:
            step = int(d["step"])
            if not isinstance(d["scalars"], dict):
                raise ValueError(f"line with step {step}: 'scalars' is not an object")
            for tag, v in d["scalars"].items():
                acc.setdefault(tag, []).append((step, num(v)))
        tags = {}
        for tag, pts in acc.items():
            pts.sort(key=lambda p: p[0])
            tags[tag] = (np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float))
        inp.extra["tags"] = tags
    return inp.extra["tags"]


def _split(tags):
    """(head tags: (module, metric) -> {(batch, head): (steps, values)}, other tags: group -> [tag])."""
    heads, other = {}, {}
    for tag in tags:
        m = HEAD_TAG.match(tag)
        if m:
            heads.setdefault((m["module"], m["metric"]), {})[(int(m["batch"]), int(m["head"]))] = tags[tag]
        else:
            other.setdefault(tag.split("/")[0], []).append(tag)
    return heads, other


def _steps(inp):
    s = [int(d["step"]) for d in inp.docs]
    return min(s), max(s)


def verdicts(inp):
    tags = _tags(inp)
    heads, other = _split(tags)
    lo, hi = _steps(inp)
    detail = f"{len(inp.docs)} records, steps {lo}–{hi}; {sum(len(v) for v in other.values())} scalar tags"
    if heads:
        detail += f"; per-head statistics of {len({m for m, _ in heads})} module(s): {', '.join(sorted({k for _, k in heads}))}"
        t = [(abs(float(v[1][-1])), m, bh) for (m, k), per in heads.items() if k == "o_t" for bh, v in per.items()
             if np.isfinite(v[1][-1])]
        if t:
            top = max(t)
            detail += f"; largest |o_t| at the last audit: {fg.fmt(top[0])} ({top[1]} batch {top[2][0]} head {top[2][1]})"
    return [(verdict_cell(f"{len(tags)} tags", "neutral"), detail)]


def provenance(inp):
    lo, hi = _steps(inp)
    return {"shape": f"{len(inp.docs)} records, steps {lo}–{hi}",
            "data": "tiebreak.torch.ScalarLogger (scalars.jsonl)", "command_line": None, "version": None}


def section(inputs) -> str:
    out = ["<h2>Training scalars (<code>tiebreak.torch.ScalarLogger</code>)</h2>",
           "<p class=\"how\">One curve per tag over the logged steps; tags are grouped by their first path "
           "component. Per-head statistics (tags <code>MODULE/b&lt;batch&gt;h&lt;head&gt;/METRIC</code>, from "
           "<code>ScalarLogger.log_audit</code>) are drawn per head below.</p>"]
    hm_metrics, hm_cols = {}, []
    for inp in inputs:
        tags = _tags(inp)
        heads, other = _split(tags)
        panels = []
        for group in sorted(other):
            names = sorted(other[group])
            for i in range(0, len(names), MAX_LINES):
                chunk = names[i:i + MAX_LINES]
                panels.append({"title": group + (f" ({i // MAX_LINES + 1})" if len(names) > MAX_LINES else ""),
                               "xlabel": "step", "ylabel": "value", "legend": True, "legend_loc": "upper right",
                               "lines": [(t, tags[t][0], tags[t][1], {"linewidth": 1.1, "marker": "o" if len(tags[t][0]) <= 40 else None,
                                                                       "markersize": 2.5}) for t in chunk]})
        out.append(f"<h3>{esc(inp.label)}: scalars over steps</h3>")
        if len(panels) > MAX_PANELS:
            out.append(f"<p class=\"how\">{len(panels)} panels; the first {MAX_PANELS} are drawn, every tag is in the table.</p>")
        if panels:
            out.append(fg.line_grid(panels[:MAX_PANELS], ncols=3, alt=f"scalars: curves of {inp.label}"))
        if heads:
            hp = []
            for (module, metric), per in sorted(heads.items()):
                keys = sorted(per)
                lines = [(f"b{b}h{h}", per[(b, h)][0], per[(b, h)][1],
                          {"color": fg_colour(i, len(keys)), "linewidth": 1.1, "marker": "o", "markersize": 2.5})
                         for i, (b, h) in enumerate(keys)]
                hp.append({"title": f"{module}\n{metric} per head", "xlabel": "step", "ylabel": metric, "lines": lines,
                           "zero": True, "legend": True, "legend_loc": "upper right"})
                if metric.endswith("mean_error_ulps"):
                    hp.append({"title": f"{module}\ncumulative sum of {metric} over the audited steps", "xlabel": "step",
                               "ylabel": f"Σ {metric}", "zero": True, "legend": False,
                               "lines": [(None, per[k][0], np.nancumsum(per[k][1]), dict(ln[3])) for k, ln in zip(keys, lines)]})
                hm_metrics.setdefault(metric, None)
            out.append(f"<h3>{esc(inp.label)}: per-head statistics over steps</h3>")
            out.append(fg.line_grid(hp, ncols=3, alt=f"scalars: per-head statistics of {inp.label}"))
            for module in sorted({m for m, _ in heads}):
                hm_cols.append((inp, module, heads))
        rows = []
        for t in sorted(tags):
            x, y = tags[t]
            fin = y[np.isfinite(y)]
            rows.append([t, len(x), f"{int(x[0])}–{int(x[-1])}", fg.fmt(y[0]), fg.fmt(y[-1]),
                         fg.fmt(fin.min()) if fin.size else "—", fg.fmt(fin.max()) if fin.size else "—",
                         fg.fmt(fin.mean()) if fin.size else "—", len(y) - fin.size])
        tab = table(["tag", "points", "steps", "first", "last", "min", "max", "mean", "non-finite"], rows,
                    numeric=(1, 3, 4, 5, 6, 7, 8))
        out.append(tab if len(rows) <= 40 else f"<details><summary>{esc(inp.label)}: {len(rows)} tags</summary>{tab}</details>")
    if hm_cols:
        metrics = sorted(hm_metrics)
        cols = []
        for inp, module, heads in hm_cols:
            mats = []
            for metric in metrics:
                per = heads.get((module, metric), {})
                nb = max((b for b, _ in per), default=0) + 1
                nh = max((h for _, h in per), default=0) + 1
                m = np.full((nb, nh), np.nan)
                for (b, h), (_, y) in per.items():
                    fin = y[np.isfinite(y)]
                    m[b, h] = fin.mean() if fin.size else np.nan
                mats.append(m)
            cols.append((f"{inp.label} · {module}", mats, None))
        out.append("<h3>Per-head statistics, mean over the audited steps</h3>")
        out.append(fg.heatmap_grid([fg.Metric(f"{m}, mean over steps", signed=True) for m in metrics], cols,
                                   alt="scalars: per-head heatmaps"))
    return "\n".join(out)


def fg_colour(i: int, n: int):
    import matplotlib
    return matplotlib.colormaps["tab10" if n <= 10 else "viridis"](i if n <= 10 else i / max(n - 1, 1))
