# SPDX-License-Identifier: Apache-2.0
"""Pages of `tiebreak experiment causal|bisect -o` (schema tiebreak.experiment/1, field `kind`
experiment_causal or experiment_bisect; docs/report.md). Per-head arrays are flattened layer-major
(index l * heads + h); `null` entries of a series (no value at that step) are drawn as gaps."""

from __future__ import annotations

import numpy as np

from . import figures as fg
from .inputs import num
from .page import esc, json_details, table, verdict_cell

# One colour per output mode, the same in every figure; modes the schema does not name yet get the
# remaining colours of tab10 in order of appearance.
MODE_COLOURS = {"bf16": "#d62728", "fp32": "#222222", "debias": "#1f77b4", "stochastic": "#2ca02c"}
_SPARE = ["#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#ff7f0e", "#7f7f7f"]


def _colour(mode: str, modes: list) -> str:
    if mode in MODE_COLOURS:
        return MODE_COLOURS[mode]
    others = [m for m in modes if m not in MODE_COLOURS]
    return _SPARE[others.index(mode) % len(_SPARE)] if mode in others else _SPARE[0]


def _head_colour(i: int, n: int):
    import matplotlib
    if n <= 10:
        return matplotlib.colormaps["tab10"](i)
    return matplotlib.colormaps["viridis"](i / max(n - 1, 1))


def _matrix(rows) -> np.ndarray:
    """[step][k] of numbers/null/non-finite strings -> float array steps x k (NaN for null)."""
    rows = list(rows)
    if not rows:
        return np.zeros((0, 0))
    width = max(len(r) for r in rows)
    m = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        m[i, :len(r)] = [num(v) for v in r]
    return m


def _vector(values) -> np.ndarray:
    return np.array([num(v) for v in values], dtype=float)


def head_labels(config: dict, count: int) -> list:
    heads = int(config.get("heads", 0)) or count
    return [f"L{i // heads}H{i % heads}" if int(config.get("layers", 1)) > 1 else f"h{i % heads}" for i in range(count)]


def _heads_text(heads) -> str:
    """[[layer, head], ...] -> "L0H1, L0H3"."""
    if not heads:
        return "none"
    return ", ".join(f"L{int(p[0])}H{int(p[1])}" for p in heads)


def _opt(v) -> str:
    """A number that may be null (no value: the fp32 reference has no excess over itself)."""
    return "—" if v is None else fg.fmt(num(v))


def _ci(ci) -> str:
    if ci is None:
        return "—"
    return f"[{fg.fmt(num(ci[0]))}, {fg.fmt(num(ci[1]))}]"


# ---------------------------------------------------------------- causal: verdicts and provenance

def _reproduced(d) -> bool:
    return bool(d["conclusion"]["reproduced"])


def causal_verdicts(inp):
    d = inp.doc
    rep = _reproduced(d)
    rows = [(verdict_cell("reproduced" if rep else "not reproduced", "biased" if rep else "unbiased"),
             " ".join(str(d["conclusion"]["text"]).split()))]
    for g in d["groups"]:
        v = g["verdicts"]
        counts = ", ".join(f"{k} {v[k]}" for k in ("growth", "stable", "diverged", "reference") if v.get(k))
        state = "biased" if v.get("growth") or v.get("diverged") else "neutral"
        rows.append((verdict_cell(f"{g['mode']} · {g['data']}: {counts or 'no cells'}", state),
                     f"{g['n']} seeds; growth rate {fg.fmt(num(g['growth_rate_mean']))} per step {_ci(g.get('growth_rate_ci'))}; "
                     f"excess log σ {_opt(g.get('excess_log_sigma_mean'))} {_ci(g.get('excess_log_sigma_ci'))}"))
    return rows


_MODEL_KEYS = ("vocab", "d_model", "heads", "head_dim", "layers", "seq", "batch", "causal")


def _config_text(config: dict, keys) -> str:
    return ", ".join(f"{k} {config[k]}" for k in keys if k in config)


def _provenance(d, data: str) -> dict:
    c = d["config"]
    rest = [k for k in c if k not in _MODEL_KEYS]
    return {"shape": _config_text(c, _MODEL_KEYS),
            "data": f"{data}; preset {d.get('preset', '?')} on {d.get('device', '?')}; config: {_config_text(c, rest)}",
            "command_line": d.get("command_line"), "version": d.get("tiebreak_version")}


def causal_provenance(inp):
    d = inp.doc
    return _provenance(d, f"modes {', '.join(d['modes'])}; data {', '.join(d['data'])}; seeds "
                          f"{', '.join(str(s) for s in d['seeds'])}")


# ---------------------------------------------------------------- causal: the page

def _cells_by(d):
    """(data, mode) -> the cells of that group, in seed order."""
    out = {}
    for c in d["cells"]:
        out.setdefault((c["data"], c["mode"]), []).append(c)
    for v in out.values():
        v.sort(key=lambda c: c["seed"])
    return out


def _mean_curve(curves):
    """Mean over seeds of (x, y) curves that share their x (the common prefix when a seed stopped
    early, e.g. diverged); None when the steps differ."""
    if len(curves) < 2:
        return None
    n = min(len(x) for x, _ in curves)
    if n == 0:
        return None
    x0 = curves[0][0][:n]
    if any(not np.array_equal(x[:n], x0) for x, _ in curves):
        return None
    ys = np.vstack([y[:n] for _, y in curves])
    with np.errstate(all="ignore"):
        finite = np.isfinite(ys)
        cnt = finite.sum(axis=0)
        mean = np.where(cnt > 0, np.where(finite, ys, 0.0).sum(axis=0) / np.maximum(cnt, 1), np.nan)
    return x0, mean


def _seed_lines(curves, colour, label):
    """Seeds as thin lines, their mean (when there are several) as a thick one carrying the label."""
    lines = []
    mean = _mean_curve(curves)
    for i, (x, y) in enumerate(curves):
        thin = mean is not None
        lines.append((None if thin or i else label, x, y,
                      {"color": colour, "linewidth": 0.6 if thin else 1.2, "alpha": 0.45 if thin else 1.0}))
    if mean is not None:
        lines.append((label, mean[0], mean[1], {"color": colour, "linewidth": 1.8}))
    return lines


def _series(cell, key):
    s = cell["series"]
    return _vector(s["step"]), _matrix(s[key])


def _layer_max(m: np.ndarray) -> np.ndarray:
    """Largest value over layers per step (the monitored matrix: config.monitor); NaN if none."""
    if m.size == 0:
        return np.zeros(m.shape[0])
    with np.errstate(all="ignore"):
        finite = np.where(np.isfinite(m), m, -np.inf).max(axis=1)
    return np.where(np.isfinite(finite), finite, np.nan)


def _group_table(inputs) -> str:
    rows = []
    for inp in inputs:
        for g in inp.doc["groups"]:
            v = g["verdicts"]
            rows.append([inp.label, g["mode"], g["data"], g["n"], fg.fmt(num(g["growth_rate_mean"])), _ci(g.get("growth_rate_ci")),
                         _opt(g.get("excess_log_sigma_mean")), _ci(g.get("excess_log_sigma_ci")),
                         v.get("growth", 0), v.get("stable", 0), v.get("diverged", 0), v.get("reference", 0)])
    return table(["input", "mode", "data", "seeds", "growth rate (log σ per step)", "95 % interval", "excess log σ",
                  "95 % interval", "growth", "stable", "diverged", "reference"], rows, numeric=(3, 4, 6, 8, 9, 10, 11))


def _panels_per_data(inputs, multi: bool):
    """[(input, data, title)] one per data kind of every input."""
    return [(inp, data, f"{inp.label} · {data}" if multi else data) for inp in inputs for data in inp.doc["data"]]


def _first_data(inp, data) -> bool:
    """The panel that carries the legend: the first data kind of each input (the modes may differ)."""
    return data == inp.doc["data"][0]


def causal_section(inputs) -> str:
    multi = len(inputs) > 1
    out = ["<h2>Causal experiment (<code>tiebreak experiment causal</code>)</h2>",
           "<p class=\"how\">One training run per (mode, data, seed); the fp32 cell of the same data and seed is "
           "the reference. Colours: one per output mode; thin lines are seeds, the thick line their mean.</p>",
           _group_table(inputs)]
    for inp in inputs:
        c = inp.doc["conclusion"]
        rep = _reproduced(inp.doc)
        out.append(f"<p><b>{esc(inp.label)}: reproduced: "
                   f"<span class=\"{'biased' if rep else 'unbiased'}\">{'yes' if rep else 'no'}</span></b>. "
                   f"{esc(' '.join(str(c['text']).split()))}</p>")
    per_data = _panels_per_data(inputs, multi)
    groups = {id(inp): _cells_by(inp.doc) for inp in inputs}

    # Spectral norms of W_Q and W_K (largest over layers), one panel per data kind.
    panels = []
    for key, name in (("sigma_wq", "W_Q"), ("sigma_wk", "W_K")):
        for inp, data, title in per_data:
            lines = []
            for mode in inp.doc["modes"]:
                cells = groups[id(inp)].get((data, mode), [])
                curves = []
                for cell in cells:
                    x, m = _series(cell, key)
                    with np.errstate(all="ignore"):
                        curves.append((x, np.log(_layer_max(m))))
                lines += _seed_lines(curves, _colour(mode, inp.doc["modes"]), mode)
            panels.append({"title": f"{title}\nln σ_max({name})", "xlabel": "step", "ylabel": f"ln σ_max({name})",
                           "lines": lines, "legend": key == "sigma_wq" and _first_data(inp, data),
                           "legend_loc": "upper left"})
    out.append("<h3>Spectral norm of W_Q and W_K over training: ln σ_max, largest over layers (the slope of the "
               "W_Q curve is the growth rate)</h3>")
    out.append(fg.line_grid(panels, ncols=len(per_data), alt="experiment: spectral norm of W_Q and W_K over steps"))

    # Per-head panels: rows (input, data), columns modes, one colour per head.
    def head_grid(key, ylabel, *, zero=False, sharey=False, legend_loc="upper left"):
        panels = []
        ncols = max(len(inp.doc["modes"]) for inp in inputs)
        for inp, data, title in per_data:
            modes = inp.doc["modes"]
            for mode in modes:
                cells = groups[id(inp)].get((data, mode), [])
                lines = []
                mats = [_series(cell, key) for cell in cells]
                nh = max((m.shape[1] for _, m in mats), default=0)
                labels = head_labels(inp.doc["config"], nh)
                for h in range(nh):
                    curves = [(x, m[:, h] if h < m.shape[1] else np.full(len(x), np.nan)) for x, m in mats]
                    lines += _seed_lines(curves, _head_colour(h, nh), labels[h])
                panels.append({"title": f"{title} · {mode}", "xlabel": "step", "ylabel": ylabel if mode == modes[0] else "",
                               "lines": lines, "zero": zero, "legend": mode == modes[0], "legend_loc": legend_loc})
            panels += [None] * (ncols - len(modes))
        return fg.line_grid(panels, ncols=ncols, sharey=sharey, panel_w=3.6, alt=f"experiment: {ylabel} per head")

    out.append("<h3>Spectral norm of each head's block of W_Q (one y scale for every panel)</h3>")
    out.append(head_grid("sigma_wq_head", "σ_max of the head's W_Q rows", sharey=True))
    out.append("<h3>Cumulative delta error per head (one y scale for every panel)</h3>")
    out.append(head_grid("delta_error_cum", "Σ over steps of δ(mode O) − δ(f32 O)", zero=True, sharey=True,
                         legend_loc="lower left"))

    # Loss and the f32-attention loss of the same weights; update cosine.
    panels = []
    for inp, data, title in per_data:
        lines = []
        for mode in inp.doc["modes"]:
            cells = groups[id(inp)].get((data, mode), [])
            colour = _colour(mode, inp.doc["modes"])
            for key, dash, name in (("loss", "-", mode), ("ref_loss", "--", f"{mode} (f32 attention)")):
                curves = [(_vector(c["series"]["step"]), _vector(c["series"][key])) for c in cells]
                mean = _mean_curve(curves)
                if mean is not None:
                    curves = [mean]
                for i, (x, y) in enumerate(curves):
                    lines.append((name if i == 0 else None, x, y, {"color": colour, "linestyle": dash, "linewidth": 1.1}))
        panels.append({"title": f"{title}\nloss", "xlabel": "step", "ylabel": "training loss", "lines": lines,
                       "legend": _first_data(inp, data), "legend_loc": "upper right"})
    for inp, data, title in per_data:
        lines = []
        for mode in inp.doc["modes"]:
            cells = groups[id(inp)].get((data, mode), [])
            curves = [(_vector(c["series"]["step"]), _vector(c["series"]["loss"]) - _vector(c["series"]["ref_loss"]))
                      for c in cells]
            lines += _seed_lines(curves, _colour(mode, inp.doc["modes"]), mode)
        panels.append({"title": f"{title}\nloss − loss with f32 attention", "xlabel": "step", "ylabel": "loss gap",
                       "lines": lines, "zero": True, "legend": _first_data(inp, data), "legend_loc": "upper left"})
    for inp, data, title in per_data:
        lines = []
        for mode in inp.doc["modes"]:
            cells = groups[id(inp)].get((data, mode), [])
            curves = []
            for cell in cells:
                x, m = _series(cell, "update_cosine")
                with np.errstate(all="ignore"):
                    cnt = np.isfinite(m).sum(axis=1) if m.size else np.zeros(len(x))
                    mean = np.where(cnt > 0, np.nansum(np.where(np.isfinite(m), m, 0.0), axis=1) / np.maximum(cnt, 1), np.nan) \
                        if m.size else np.full(len(x), np.nan)
                curves.append((x, mean))
            lines += _seed_lines(curves, _colour(mode, inp.doc["modes"]), mode)
        panels.append({"title": f"{title}\nupdate cosine", "xlabel": "step", "ylabel": "cos(ΔW_Q, previous ΔW_Q)",
                       "lines": lines, "zero": True, "legend": _first_data(inp, data), "legend_loc": "lower right"})
    out.append("<h3>Loss (solid) and the loss of the same weights with f32 attention (dashed), their "
               "difference, and the cosine of successive W_Q updates (mean over layers)</h3>")
    out.append(fg.line_grid(panels, ncols=len(per_data), alt="experiment: loss and update cosine"))

    # Heatmaps mode x head at the end of training / averaged over the logged steps.
    metrics = [fg.Metric("final cumulative delta error", signed=True),
               fg.Metric("O rounding error, mean over steps (ulps)", signed=True),
               fg.Metric("repeated-max rows per logged step", signed=False),
               fg.Metric("P-bar == 1 events per logged step", signed=False)]
    cols, ylabels = [], []
    maxheads = 0
    for inp, data, title in per_data:
        modes = inp.doc["modes"]
        nh = max((len(r) for c in inp.doc["cells"] for r in c["series"]["delta_error_cum"][:1]), default=1)
        maxheads = max(maxheads, nh)
        mats = [np.full((len(modes), nh), np.nan) for _ in metrics]
        for mi, mode in enumerate(modes):
            cells = groups[id(inp)].get((data, mode), [])
            if not cells:
                continue
            for k, (key, how) in enumerate((("delta_error_cum", "last"), ("output_error_mean_ulps", "mean"),
                                            ("repeated_max_rows", "mean"), ("p_one", "mean"))):
                per_seed = []
                for cell in cells:
                    m = _matrix(cell["series"][key])
                    if m.shape[0] == 0:
                        continue
                    with np.errstate(all="ignore"):
                        per_seed.append(m[-1] if how == "last" else np.nanmean(m, axis=0))
                if per_seed:
                    width = min(nh, min(len(v) for v in per_seed))
                    with np.errstate(all="ignore"):
                        mats[k][mi, :width] = np.nanmean(np.vstack([v[:width] for v in per_seed]), axis=0)
        ylabels.append(list(modes))
        cols.append((title, mats, None))
    out.append("<h3>Per head and mode: the final cumulative delta error, the mean rounding error of O, the "
               "tie counters (mean over seeds)</h3>")
    out.append(fg.heatmap_grid(metrics, cols, xlabel="head", ylabel="mode", yticklabels=ylabels,
                               xticklabels=head_labels(inputs[0].doc["config"], maxheads),
                               alt="experiment: per-head heatmaps, mode x head"))

    # The cells themselves, folded.
    for inp in inputs:
        rows = []
        for c in inp.doc["cells"]:
            hm = c.get("head_modes")
            rows.append([c["mode"], c["data"], c["seed"], "; ".join("/".join(l) for l in hm) if hm else "—",
                         fg.fmt(num(c["spectral_growth_rate"])), _opt(c.get("growth_rate_se")),
                         _opt(c.get("excess_log_sigma")), fg.fmt(num(c["final_loss"]), 4), fg.fmt(num(c["final_ref_loss"]), 4),
                         "yes" if c["diverged"] else "no",
                         verdict_cell(c["verdict"], "biased" if c["verdict"] in ("growth", "diverged") else "neutral"),
                         _opt(c.get("wall_seconds"))])
        out.append(f"<details><summary>{esc(inp.label)}: the {len(rows)} runs (cells)</summary>"
                   + table(["mode", "data", "seed", "head modes [layer]", "growth rate", "se", "excess log σ", "final loss",
                            "final ref loss", "diverged", "verdict", "wall s"], rows, numeric=(2, 4, 5, 6, 7, 8, 11))
                   + "</details>")
        out.append(json_details(f"{inp.label}: configuration", inp.doc["config"]))
    return "\n".join(out)


# ---------------------------------------------------------------- bisect

def bisect_verdicts(inp):
    d = inp.doc
    r = d["result"]
    found = bool(r.get("heads"))
    return [(verdict_cell(f"heads: {_heads_text(r.get('heads'))}" if found else "no head set found",
                          "biased" if found else "neutral"),
             f"remedy {d['remedy']} on {d['data']}, seed {d['seed']}; baseline excess log σ "
             f"{fg.fmt(num(d['baseline']['excess_log_sigma']))} ({d['baseline']['verdict']}); {len(d['trials'])} trials. "
             + " ".join(str(r.get("text", "")).split()))]


def bisect_provenance(inp):
    d = inp.doc
    return _provenance(d, f"bisect: remedy {d['remedy']}, data {d['data']}, seed {d['seed']}")


def bisect_section(inputs) -> str:
    out = ["<h2>Head bisection (<code>tiebreak experiment bisect</code>)</h2>",
           "<p class=\"how\">Each trial applies the remedy to the listed heads only and reruns; the excess log σ "
           "is measured against the run with every head remedied. The result is the smallest set whose remedy "
           "alone removes the growth.</p>"]
    for inp in inputs:
        d = inp.doc
        b = d["baseline"]
        out.append(f"<h3>{esc(inp.label)}: remedy <code>{esc(d['remedy'])}</code>, data {esc(d['data'])}, seed {esc(d['seed'])}</h3>")
        rows = [["baseline: no head remedied", fg.fmt(num(b["excess_log_sigma"])),
                 verdict_cell(b["verdict"], "biased" if b["verdict"] in ("growth", "diverged") else "neutral")]]
        for t in d["trials"]:
            rows.append([_heads_text(t["heads"]), fg.fmt(num(t["excess_log_sigma"])),
                         verdict_cell(t["verdict"], "biased" if t["verdict"] in ("growth", "diverged") else "unbiased")])
        out.append(table(["heads remedied", "excess log σ", "verdict"], rows, numeric=(1,)))
        r = d["result"]
        out.append(f"<p><b>Result: {esc(_heads_text(r.get('heads')))}</b>. {esc(' '.join(str(r.get('text', '')).split()))}</p>")
        out.append(json_details(f"{inp.label}: configuration", d["config"]))
    return "\n".join(out)
