#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tiebreak's attention kernels next to PyTorch SDPA (flash and cuDNN backends), in one run, one table.

    tools/attention-bench.py [--bench PATH | --tiebreak-json FILE] [--base-bench PATH] [--out DIR] [--quick] [shape options]
    tools/attention-bench.py --self-test [--bench PATH]

Runs the C++ program attention_bench (bench/attention; JSON lines), then times
torch.nn.functional.scaled_dot_product_attention with the FLASH_ATTENTION and CUDNN_ATTENTION
backends on the same shapes (bf16, B·S = --tokens, forward and forward+backward, CUDA events, median
of --reps calls after --warmup), merges both into one table (pass × shape × backend: TFLOP/s, ratio to
the flash backend and to cuDNN, the cost of each mode over bf16 and of the probe) and checks the speed
goals of issues 17 and 18. Writes DIR/attention-bench.md and DIR/attention-bench.json (date, device,
torch version, every record), the program's JSON lines to DIR/tiebreak.jsonl and its progress to
DIR/attention_bench.log. Without torch, or without the binary, the other half still runs and the
table says what is missing; without both it exits 2. With --base-bench (attention_bench built from
another tree, e.g. the commit before a change) both programs time the same cases in this one run,
alternating by pass and sequence length, and every case gets its ratio to the base tree's
(DIR/tiebreak-base.jsonl holds the base's records). docs/attention-bench.md has the details.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

SDPA_BACKENDS = (("sdpa-flash", "FLASH_ATTENTION"), ("sdpa-cudnn", "CUDNN_ATTENTION"))
MODES = ("bf16", "fp32", "debias", "stochastic")
PASSES = ("fwd", "fwd+bwd")


# --- the FLOP convention (the same as attention_bench's; the self-test compares them) ----------------
def flops(batch, heads, seq, dim, causal, pass_):
    """forward 4·B·H·S²·D (Q Kᵀ and P V), halved when causal; backward 2.5× forward."""
    f = 4.0 * batch * heads * seq * seq * dim
    if causal:
        f /= 2
    return f * 3.5 if pass_ == "fwd+bwd" else f


def shapes(args):
    """(dim, seq, batch, causal) of every shape the options ask for."""
    causal = {"off": [False], "on": [True], "both": [False, True]}[args.causal]
    return [(d, s, args.tokens // s, c) for d in args.dims for s in args.seqs for c in causal]


# --- reading, merging, tables ---------------------------------------------------------------------------
def read_jsonl(path):
    """The records of a JSON-lines file; a last line cut short (a killed run) is ignored."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def shape_key(r):
    return (r["pass"], r["dim"], r["seq"], r["batch"], r["heads"], bool(r["causal"]))


TIEBREAK_BACKENDS = ("tiebreak", "tiebreak-base")  # this tree's kernels, the base tree's (--base-bench)


def exp_of(r):
    """A tiebreak record's exponential (records of programs before --exp: software); None for SDPA."""
    if r["backend"] not in TIEBREAK_BACKENDS:
        return None
    return r.get("exp") or "software"


def label(r):
    if r["backend"] not in TIEBREAK_BACKENDS:
        return r["backend"]
    s = ("tiebreak " if r["backend"] == "tiebreak" else "base ") + r["mode"]
    if r.get("scaling", "unfused") != "unfused":
        s += " " + r["scaling"]
    if exp_of(r) == "sfu":
        s += " sfu"
    if r.get("probe"):
        s += " +probe"
    return s


def sort_key(r):
    b = {"sdpa-flash": 0, "sdpa-cudnn": 1, "tiebreak": 2}.get(r["backend"], 3)
    m = MODES.index(r["mode"]) if r.get("mode") in MODES else -1
    return (PASSES.index(r["pass"]), r["dim"], r["seq"], bool(r["causal"]), b, r.get("scaling") != "unfused",
            exp_of(r) == "sfu", m, bool(r.get("probe")))


def merge(records):
    """The timed records, sorted, each with its ratios: vs_flash / vs_cudnn (TFLOP/s over the SDPA
    backend's on the same shape and pass), and for tiebreak's (and the base tree's): cost_vs_bf16 (time
    over the bf16 mode's of the same tree with the same scaling and probe, minus 1), probe_cost (time
    over the unprobed run's, minus 1), both with the same exponential; for this tree's, vs_base (TFLOP/s
    over the base tree's same case, same exponential) and, with the SFU's exponential, vs_software
    (TFLOP/s over the same case with the software one). A ratio whose reference is missing is None."""
    res = sorted((dict(r) for r in records if r.get("kind") == "result"), key=sort_key)
    by = {}
    for r in res:
        by[(shape_key(r), r["backend"], r.get("mode"), r.get("scaling"), exp_of(r), bool(r.get("probe")))] = r
    for r in res:
        k, e = shape_key(r), exp_of(r)
        for name, ref in (("vs_flash", "sdpa-flash"), ("vs_cudnn", "sdpa-cudnn")):
            f = by.get((k, ref, None, None, None, False))
            r[name] = r["tflops"] / f["tflops"] if f and f["tflops"] > 0 else None
        r["cost_vs_bf16"] = r["probe_cost"] = r["vs_base"] = r["vs_software"] = None
        if r["backend"] in TIEBREAK_BACKENDS:
            b = by.get((k, r["backend"], "bf16", r["scaling"], e, bool(r["probe"])))
            if b and r["mode"] != "bf16":
                r["cost_vs_bf16"] = r["ms"] / b["ms"] - 1
            u = by.get((k, r["backend"], r["mode"], r["scaling"], e, False))
            if u and r["probe"]:
                r["probe_cost"] = r["ms"] / u["ms"] - 1
        if r["backend"] == "tiebreak":
            o = by.get((k, "tiebreak-base", r["mode"], r["scaling"], e, bool(r["probe"])))
            if o and o["tflops"] > 0:
                r["vs_base"] = r["tflops"] / o["tflops"]
            sw = by.get((k, "tiebreak", r["mode"], r["scaling"], "software", bool(r["probe"])))
            if e == "sfu" and sw and sw["tflops"] > 0:
                r["vs_software"] = r["tflops"] / sw["tflops"]
    return res


def sdpa_record(backend, pass_, dim, seq, batch, heads, causal):
    return {"kind": "result", "backend": backend, "mode": None, "scaling": None, "probe": None, "pass": pass_,
            "batch": batch, "heads": heads, "seq": seq, "dim": dim, "causal": causal,
            "flops": flops(batch, heads, seq, dim, causal, pass_)}


def goals(res):
    """Issues 17 and 18's speed goals, each with the worst measured value over the shapes it covers
    (None where nothing was measured): [{goal, worst, limit, met, n}]."""
    out = []
    for exp in ("software", "sfu"):
        out += goals_of(res, exp, "" if exp == "software" else " [sfu exp]")
    return out


def goals_of(res, exp, suffix):
    def tb(r, mode="bf16", probe=False):
        return (r["backend"] == "tiebreak" and r["mode"] == mode and r["scaling"] == "unfused" and exp_of(r) == exp
                and bool(r["probe"]) == probe)

    rules = [
        ("issue 17 floor: bf16 fwd >= 0.6x flash, S=4k, D=128",
         lambda r: tb(r) and r["pass"] == "fwd" and r["seq"] == 4096 and r["dim"] == 128, "vs_flash", 0.6, True),
        ("bf16 fwd >= 1.0x flash, S=4k/16k, D=128",
         lambda r: tb(r) and r["pass"] == "fwd" and r["seq"] in (4096, 16384) and r["dim"] == 128, "vs_flash", 1.0, True),
        ("bf16 fwd >= 0.9x flash, D=64 or S=1k",
         lambda r: tb(r) and r["pass"] == "fwd" and (r["dim"] == 64 or r["seq"] == 1024), "vs_flash", 0.9, True),
        ("bf16 fwd+bwd >= 0.9x flash, S=4k/16k",
         lambda r: tb(r) and r["pass"] == "fwd+bwd" and r["seq"] in (4096, 16384), "vs_flash", 0.9, True),
        ("probe cost <= 10 % (every mode)",
         lambda r: r["backend"] == "tiebreak" and r["probe"] and r["scaling"] == "unfused" and exp_of(r) == exp,
         "probe_cost", 0.10, False),
        ("debias cost <= 5 % over bf16", lambda r: tb(r, "debias"), "cost_vs_bf16", 0.05, False),
        ("stochastic cost <= 10 % over bf16", lambda r: tb(r, "stochastic"), "cost_vs_bf16", 0.10, False),
        ("fp32 cost over bf16 (reported)", lambda r: tb(r, "fp32"), "cost_vs_bf16", None, False),
        ("stretch: bf16 fwd >= 0.8x cuDNN", lambda r: tb(r) and r["pass"] == "fwd", "vs_cudnn", 0.8, True),
    ]
    rules = [(text + suffix,) + tuple(rest) for text, *rest in rules]
    if exp == "sfu":
        rules.append(("sfu exp over software, bf16 (reported)", lambda r: tb(r) or tb(r, probe=True), "vs_software",
                      None, True))
    out = []
    for text, sel, field, limit, higher in rules:
        vals = [r[field] for r in res if sel(r) and r.get(field) is not None]
        worst = (min(vals) if higher else max(vals)) if vals else None
        met = None
        if worst is not None and limit is not None:
            met = worst >= limit if higher else worst <= limit
        out.append({"goal": text, "field": field, "worst": worst, "limit": limit, "met": met, "n": len(vals)})
    return out


def fmt_ratio(x):
    return "—" if x is None else "%.2f×" % x


def fmt_pct(x):
    return "—" if x is None else "%+.1f %%" % (100 * x)


def shape_label(seq, causal):
    s = "%dk" % (seq // 1024) if seq % 1024 == 0 else str(seq)
    return "S=" + s + (" causal" if causal else "")


def pass_title(pass_, dim):
    return "%s, D = %d" % ("Forward" if pass_ == "fwd" else "Forward + backward", dim)


def compact_table(rs, first, text):
    """A row per label, a column per shape (S, causal) of the records rs: the lines of a Markdown table
    whose first header cell is `first` and whose cells are text(record) (empty where none)."""
    cols = sorted({(r["seq"], bool(r["causal"])) for r in rs})
    rows = []
    for r in rs:
        if label(r) not in rows:
            rows.append(label(r))
    cell = {(label(r), r["seq"], bool(r["causal"])): r for r in rs}
    lines = ["| %s | " % first + " | ".join(shape_label(s, c) for s, c in cols) + " |", "|---|" + "---:|" * len(cols)]
    for lab in rows:
        lines.append("| %s | %s |" % (lab, " | ".join(text(cell[(lab, s, c)]) if (lab, s, c) in cell else "" for s, c in cols)))
    return lines


def markdown(report):
    res, lines = report["results"], []
    lines.append("# tiebreak attention vs PyTorch SDPA")
    lines.append("")
    lines.append("%s · %s · torch %s (CUDA %s) · B·S = %s tokens, H = %s · median of %s timed calls after %s warm-up"
                 % (report["date"], report["device"], report["torch"], report["torch_cuda"], report["tokens"],
                    report["heads"], report["reps"], report["warmup"]))
    lines.append("")
    lines.append("TFLOP/s: forward 4·B·H·S²·D, halved when causal; backward 2.5× forward (forward+backward 3.5×). "
                 "In parentheses: ratio to SDPA's flash backend.")
    for note in report["notes"]:
        lines.append("")
        lines.append("> " + note)
    groups = {}
    for r in res:
        groups.setdefault((r["pass"], r["dim"]), []).append(r)
    for (pass_, dim), rs in sorted(groups.items(), key=lambda kv: (PASSES.index(kv[0][0]), kv[0][1])):
        lines += ["", "## " + pass_title(pass_, dim), ""]
        lines += compact_table(rs, "backend", lambda r: "%.0f" % r["tflops"] if r["backend"] == "sdpa-flash"
                               else "%.0f (%s)" % (r["tflops"], fmt_ratio(r["vs_flash"])))
    vb = [r for r in res if r.get("vs_base") is not None]
    if vb:
        lines += ["", "## Against the base tree (%s), same run" % report.get("base", "base"), "",
                  "TFLOP/s of this tree's kernels over the base tree's on the same case (> 1: faster)."]
        for (pass_, dim) in sorted({(r["pass"], r["dim"]) for r in vb}, key=lambda x: (PASSES.index(x[0]), x[1])):
            lines += ["", pass_title(pass_, dim) + ":", ""]
            lines += compact_table([r for r in vb if r["pass"] == pass_ and r["dim"] == dim], "kernel",
                                   lambda r: fmt_ratio(r["vs_base"]))
    vs = [r for r in res if r.get("vs_software") is not None]
    if vs:
        lines += ["", "## The SFU's exponential against the software one, same run", "",
                  "TFLOP/s with exp2_policy sfu (ex2.approx.ftz, modelled) over the same kernel with exp2_sw (> 1: faster)."]
        for (pass_, dim) in sorted({(r["pass"], r["dim"]) for r in vs}, key=lambda x: (PASSES.index(x[0]), x[1])):
            lines += ["", pass_title(pass_, dim) + ":", ""]
            lines += compact_table([r for r in vs if r["pass"] == pass_ and r["dim"] == dim], "kernel",
                                   lambda r: fmt_ratio(r["vs_software"]))
    g = [x for x in report["goals"] if x["n"]]
    if g:
        lines += ["", "## Goals (issues 17, 18): worst case over the shapes measured", "",
                  "| goal | worst | limit | met | cases |", "|---|---:|---:|---|---:|"]
        for x in g:
            pct = x["field"] in ("probe_cost", "cost_vs_bf16")
            f = fmt_pct if pct else fmt_ratio
            lim = "" if x["limit"] is None else f(x["limit"])
            met = "" if x["met"] is None else ("yes" if x["met"] else "**no**")
            lines.append("| %s | %s | %s | %s | %d |" % (x["goal"], f(x["worst"]), lim, met, x["n"]))
    lines += ["", "## Every timed case", "",
              "| pass | D | S | B | causal | backend | ms | TFLOP/s | ×flash | ×cuDNN | cost vs bf16 | probe cost | ×base |",
              "|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res:
        lines.append("| %s | %d | %d | %d | %s | %s | %.3f | %.1f | %s | %s | %s | %s | %s |" % (
            r["pass"], r["dim"], r["seq"], r["batch"], "yes" if r["causal"] else "no", label(r), r["ms"], r["tflops"],
            fmt_ratio(r["vs_flash"]), fmt_ratio(r["vs_cudnn"]), fmt_pct(r["cost_vs_bf16"]), fmt_pct(r["probe_cost"]),
            fmt_ratio(r.get("vs_base"))))
    bad = [r for r in report["records"] if r.get("kind") in ("error", "skipped")]
    if bad:
        lines += ["", "## Not timed", ""]
        for r in bad:
            lines.append("- %s, %s, D=%s, %s, B=%s: %s" % (label(r), r["pass"], r["dim"], shape_label(r["seq"], r["causal"]),
                                                          r["batch"], r.get("error", r["kind"])))
    return "\n".join(lines) + "\n"


def build_report(records, meta, torch_info, args, notes):
    res = merge(records)
    device = meta.get("device") or torch_info.get("device") or "unknown device"
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": device, "torch": torch_info.get("version"), "torch_cuda": torch_info.get("cuda"),
            "tiebreak_meta": meta, "tokens": args.tokens, "heads": args.heads, "warmup": args.warmup, "reps": args.reps,
            "base": getattr(args, "base_label", None) or "base", "notes": notes, "goals": goals(res), "results": res,
            "records": records}


# --- PyTorch SDPA -----------------------------------------------------------------------------------
def load_torch():
    """(torch, None) or (None, why not)."""
    try:
        import torch  # noqa: F401
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return None, "torch is not importable here (%s: %s)" % (type(e).__name__, e)
    if not torch.cuda.is_available():
        return None, "torch %s sees no CUDA device" % torch.__version__
    return torch, None


def time_sdpa(torch, args, deadline, log):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional.scaled_dot_product_attention
    out = []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    for dim, seq, batch, causal in shapes(args):
        mk = lambda grad: torch.randn(batch, args.heads, seq, dim, device="cuda", dtype=torch.bfloat16,
                                      generator=gen).requires_grad_(grad)
        q, k, v, do = mk(True), mk(True), mk(True), mk(False)

        def fwd():
            return F(q, k, v, is_causal=causal)

        def fwd_bwd():
            o = F(q, k, v, is_causal=causal)
            return torch.autograd.grad(o, (q, k, v), do)

        for backend, enum_name in SDPA_BACKENDS:
            for pass_ in args.passes:
                r = sdpa_record(backend, pass_, dim, seq, batch, args.heads, causal)
                fn = fwd if pass_ == "fwd" else fwd_bwd
                if deadline and time.monotonic() > deadline:
                    r.update(kind="skipped", error="--max-seconds reached")
                    out.append(r)
                    continue
                try:
                    with sdpa_kernel([getattr(SDPBackend, enum_name)]):
                        for _ in range(max(args.warmup, 1)):
                            fn()
                        torch.cuda.synchronize()
                        ms = []
                        for _ in range(args.reps):
                            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            a.record()
                            fn()
                            b.record()
                            b.synchronize()
                            ms.append(a.elapsed_time(b))
                except RuntimeError as e:  # the backend does not take this shape, or is not built in
                    r.update(kind="error", error=str(e).strip().splitlines()[0][:200] if str(e).strip() else "RuntimeError")
                    out.append(r)
                    log("[sdpa] %s %s D=%d %s: %s" % (backend, pass_, dim, shape_label(seq, causal), r["error"]))
                    continue
                ms.sort()
                n = len(ms)
                med = ms[n // 2] if n % 2 else (ms[n // 2 - 1] + ms[n // 2]) / 2
                r.update(reps=n, ms=med, ms_min=ms[0], ms_max=ms[-1], tflops=r["flops"] / (med * 1e-3) / 1e12)
                log("[sdpa] %s %s D=%d %s B=%d: %.1f TFLOP/s" % (backend, pass_, dim, shape_label(seq, causal), batch,
                                                               r["tflops"]))
                out.append(r)
        del q, k, v, do
        torch.cuda.empty_cache()
    return out


# --- the C++ program ----------------------------------------------------------------------------------
def bench_args(args):
    """attention_bench's options for the shapes and cases these options ask for."""
    a = ["--tokens", str(args.tokens), "--heads", str(args.heads), "--seqs", ",".join(map(str, args.seqs)),
         "--dims", ",".join(map(str, args.dims)), "--causal", args.causal, "--modes", ",".join(args.modes),
         "--probe", args.probe, "--scaling", args.scaling, "--passes", ",".join(args.passes),
         "--warmup", str(args.warmup), "--reps", str(args.reps), "--seed", str(args.seed)]
    if getattr(args, "exp", "software") != "software":  # programs before --exp know the software one only
        a += ["--exp", args.exp]
    return a


def default_bench():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for rel in ("build-device/full/bench/attention_bench", "build/bench/attention_bench"):
        p = os.path.join(here, rel)
        if os.access(p, os.X_OK):
            return p
    return None


def run_bench(path, args, out_dir, budget, log, name="tiebreak"):
    """(records, meta, note or None): the program's records in DIR/NAME.jsonl, its progress in
    DIR/NAME.log (attention_bench.log for this tree's)."""
    jl = os.path.join(out_dir, name + ".jsonl")
    cmd = [path] + bench_args(args) + ["--json", jl]
    if budget:
        cmd += ["--max-seconds", "%.0f" % budget]
    log("[attention-bench] " + " ".join(cmd))
    if os.path.exists(jl):
        os.remove(jl)
    note = None
    err = os.path.join(out_dir, "attention_bench.log" if name == "tiebreak" else name + ".log")  # progress, a line per case
    try:
        with open(err, "w") as ef:
            p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=ef, timeout=(budget + 60) if budget else None)
        if p.returncode != 0:
            with open(err) as ef:
                tail = (ef.read().strip().splitlines() or ["(no message)"])[-1]
            note = "attention_bench exited %d: %s" % (p.returncode, tail)
    except subprocess.TimeoutExpired:
        note = "attention_bench ran past its time limit and was stopped; the cases it finished are shown"
    except OSError as e:
        note = "attention_bench could not start (%s)" % e
    recs = read_jsonl(jl) if os.path.exists(jl) else []
    meta = next((r for r in recs if r.get("kind") == "meta"), {})
    return [r for r in recs if r.get("kind") != "meta"], meta, note


def knows_exp(prog):
    """Whether the attention_bench at `prog` takes --exp (programs from before it time the software
    exponential only): its --help names the option."""
    try:
        p = subprocess.run([prog, "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--exp" in p.stdout + p.stderr


def base_exp(prog, args):
    """The base tree's exponential: --base-exp, or with "auto" (the default) this tree's --exp where
    the base program knows the option, else software. (Until 2026-12-06 the default was software
    always, which timed a base's software exponential against this tree's SFU one.)"""
    choice = getattr(args, "base_exp", "auto")
    if choice != "auto":
        return choice
    return getattr(args, "exp", "software") if knows_exp(prog) else "software"


def run_trees(path, base, args, out_dir, budget, log):
    """This tree's program and the base tree's on the same cases, alternating one (pass, sequence
    length) group at a time: the first group this tree first, the next the base first, and so on, so
    that a drift of the clocks over the run favours neither. Each call may use what is left of
    `budget` (0: no limit). (records, meta, notes): the base's records have backend "tiebreak-base";
    DIR/tiebreak.jsonl and DIR/tiebreak-base.jsonl get each tree's records (meta line first),
    DIR/attention_bench.log and DIR/tiebreak-base.log their progress."""
    start = time.monotonic()
    trees = (("tiebreak", path), ("tiebreak-base", base))
    recs = {name: [] for name, _ in trees}
    metas, notes = {}, []
    logs = {"tiebreak": "attention_bench.log", "tiebreak-base": "tiebreak-base.log"}
    for name in logs:
        open(os.path.join(out_dir, logs[name]), "w").close()
    groups = [(p, s) for p in args.passes for s in args.seqs]
    base_exp_choice = base_exp(base, args)
    log("[attention-bench] base tree's exponential: %s" % base_exp_choice)
    dead = set()  # a program that failed before its first case (no device, a bad option) is not called again
    for i, (pass_, seq) in enumerate(groups):
        for name, prog in (trees if i % 2 == 0 else trees[::-1]):
            if name in dead:
                continue
            sub = argparse.Namespace(**vars(args))
            sub.passes, sub.seqs = [pass_], [seq]
            if name == "tiebreak-base":
                sub.exp = base_exp_choice
            left = max(budget - (time.monotonic() - start), 1) if budget else 0
            r, meta, note = run_bench(prog, sub, out_dir, left, log, name=name + "-part")
            for x in r:
                x["backend"] = name
            recs[name] += r
            if meta:  # the first call that got as far as its meta line
                metas.setdefault(name, meta)
            if note:
                note = ("" if name == "tiebreak" else "base tree: ") + note
                if note not in notes:
                    notes.append(note)
                if not r:
                    dead.add(name)
            part_log = os.path.join(out_dir, name + "-part.log")
            with open(part_log) as f, open(os.path.join(out_dir, logs[name]), "a") as g:
                g.write(f.read())
            os.remove(part_log)
            part_jl = os.path.join(out_dir, name + "-part.jsonl")
            if os.path.exists(part_jl):
                os.remove(part_jl)
    for name, _ in trees:
        with open(os.path.join(out_dir, name + ".jsonl"), "w") as f:
            for x in ([metas[name]] if metas.get(name) else []) + recs[name]:
                f.write(json.dumps(x) + "\n")
    return recs["tiebreak"] + recs["tiebreak-base"], metas.get("tiebreak") or metas.get("tiebreak-base") or {}, notes


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", help="the attention_bench binary (default: build-device/full/bench or build/bench)")
    p.add_argument("--tiebreak-json", help="read attention_bench's JSON lines from this file instead of running it")
    p.add_argument("--base-bench", help="attention_bench built from a base tree: both time the same cases in this run")
    p.add_argument("--base-label", default="base", help="what to call the base tree in the table (e.g. a commit)")
    p.add_argument("--no-bench", action="store_true", help="SDPA only")
    p.add_argument("--no-torch", action="store_true", help="tiebreak only")
    p.add_argument("--out", default=".", help="folder for attention-bench.md, attention-bench.json, tiebreak.jsonl")
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seqs", default="1024,4096,16384")
    p.add_argument("--dims", default="128")
    p.add_argument("--causal", default="both", choices=("off", "on", "both"))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--probe", default="both", choices=("off", "on", "both"))
    p.add_argument("--scaling", default="unfused", choices=("unfused", "fused", "both"))
    p.add_argument("--exp", default="both", choices=("software", "sfu", "both"),
                   help="the exponential: exp2_sw, the SFU's ex2.approx (modelled), or both")
    p.add_argument("--base-exp", default="auto", choices=("auto", "software", "sfu", "both"),
                   help="the base tree's exponentials (auto: this tree's --exp where the base program knows "
                        "--exp, else software, all a tree from before --exp times)")
    p.add_argument("--passes", default="fwd,fwd+bwd")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-seconds", type=float, default=0,
                   help="whole run: attention_bench gets 2/3, SDPA starts no case after the rest (0: no limit)")
    p.add_argument("--quick", action="store_true", help="smoke run: S = 1k, 4k; probe off; 1 warm-up, 3 timed calls")
    p.add_argument("--self-test", action="store_true", help="check the merge and table logic on synthetic numbers")
    args = p.parse_args(argv)
    if args.quick:
        given = set(a.split("=")[0] for a in argv)
        if "--seqs" not in given:
            args.seqs = "1024,4096"
        if "--probe" not in given:
            args.probe = "off"
        if "--warmup" not in given:
            args.warmup = 1
        if "--reps" not in given:
            args.reps = 3
    try:
        args.seqs = [int(x) for x in args.seqs.split(",")]
        args.dims = [int(x) for x in args.dims.split(",")]
    except ValueError:
        p.error("--seqs and --dims take comma-separated integers")
    args.modes = args.modes.split(",")
    args.passes = args.passes.split(",")
    for s in args.seqs:
        if s <= 0 or args.tokens % s:
            p.error("--seqs: %d does not divide --tokens %d" % (s, args.tokens))
    if any(d not in (64, 128) for d in args.dims):
        p.error("--dims: the kernels support head dims 64 and 128")
    if any(m not in MODES for m in args.modes):
        p.error("--modes: one of %s" % ",".join(MODES))
    if any(x not in PASSES for x in args.passes):
        p.error("--passes: fwd and/or fwd+bwd")
    if args.reps < 1 or args.warmup < 0:
        p.error("--reps must be >= 1 and --warmup >= 0")
    return args


def main(argv, log=lambda s: print(s, file=sys.stderr), show=print):
    args = parse_args(argv)
    if args.self_test:
        return self_test(args.bench)
    start = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    notes, records, meta = [], [], {}

    if args.tiebreak_json:
        if not os.path.exists(args.tiebreak_json):
            log("attention-bench: %s does not exist" % args.tiebreak_json)
            return 2
        recs = read_jsonl(args.tiebreak_json)
        meta = next((r for r in recs if r.get("kind") == "meta"), {})
        records += [r for r in recs if r.get("kind") != "meta"]
    elif not args.no_bench:
        path = args.bench or default_bench()
        if not path or not os.access(path, os.X_OK):
            notes.append("tiebreak not measured: attention_bench not found (%s); build it with "
                         "`cmake --build BUILD --target attention_bench` and pass --bench" % (path or "no --bench given"))
            log("attention-bench: " + notes[-1])
        elif args.base_bench:
            if not os.access(args.base_bench, os.X_OK):
                log("attention-bench: --base-bench %s is not an executable" % args.base_bench)
                return 2
            recs, meta, tnotes = run_trees(path, args.base_bench, args, args.out, args.max_seconds * 2 / 3, log)
            records += recs
            for note in tnotes:
                notes.append(note)
                log("attention-bench: " + note)
        else:
            recs, meta, note = run_bench(path, args, args.out, args.max_seconds * 2 / 3, log)
            records += recs
            if note:
                notes.append(note)
                log("attention-bench: " + note)

    torch_info = {}
    if not args.no_torch:
        torch, why = load_torch()
        if torch is None:
            notes.append("SDPA not measured: " + why)
            log("attention-bench: " + notes[-1])
        else:
            torch_info = {"version": torch.__version__, "cuda": torch.version.cuda,
                          "device": torch.cuda.get_device_name(0)}
            deadline = start + args.max_seconds if args.max_seconds else None
            records += time_sdpa(torch, args, deadline, log)

    if not any(r.get("kind") == "result" for r in records):
        log("attention-bench: nothing was measured (%s)" % ("; ".join(notes) or "no cases"))
        return 2
    report = build_report(records, meta, torch_info, args, notes)
    md = markdown(report)
    with open(os.path.join(args.out, "attention-bench.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "attention-bench.json"), "w") as f:
        json.dump(report, f, indent=1)
    show(md)
    log("attention-bench: wrote %s and %s" % (os.path.join(args.out, "attention-bench.md"),
                                             os.path.join(args.out, "attention-bench.json")))
    return 0


# --- self-test ----------------------------------------------------------------------------------------
def fake_torch_run(check):
    """main() with a stand-in `torch` in sys.modules: every SDPA call takes 2 ms of event time, the
    cuDNN backend raises RuntimeError for causal shapes. Returns the call counts."""
    import contextlib
    import types
    calls = {"sdpa": 0, "grad": 0}
    state = {"backend": None, "in_grad": False}

    class Tensor:
        def __init__(self, shape, grad=False):
            self.shape, self.grad = shape, grad

        def requires_grad_(self, g):
            self.grad = g
            return self

    class Event:
        def __init__(self, enable_timing=False):
            check(enable_timing, "events time")
            self.t = None

        def record(self):
            self.t = calls["sdpa"] * 2.0

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return other.t - self.t

    class Generator:
        def __init__(self, device):
            check(device == "cuda", "generator on the GPU")

        def manual_seed(self, s):
            pass

    def randn(*shape, device, dtype, generator):
        check(device == "cuda" and dtype == "bf16" and isinstance(generator, Generator), "randn arguments")
        return Tensor(shape)

    def sdpa(q, k, v, is_causal):
        check(all(x.grad for x in (q, k, v)) and q.shape == k.shape == v.shape, "SDPA inputs require grad")
        if state["backend"] == "CUDNN_ATTENTION" and is_causal:
            raise RuntimeError("No available kernel. Aborting execution.\nmore text")
        calls["sdpa"] += 1
        return Tensor(q.shape, True)

    def grad(out, inputs, grad_out):
        check(len(inputs) == 3 and not grad_out.grad and grad_out.shape == out.shape, "autograd.grad arguments")
        calls["grad"] += 1
        return inputs

    @contextlib.contextmanager
    def sdpa_kernel(backends):
        check(isinstance(backends, list) and len(backends) == 1, "one backend at a time")
        state["backend"] = backends[0]
        yield
        state["backend"] = None

    torch = types.ModuleType("torch")
    torch.__version__ = "9.9-fake"
    torch.version = types.SimpleNamespace(cuda="99.9")
    torch.bfloat16 = "bf16"
    torch.randn, torch.Generator = randn, Generator
    torch.cuda = types.SimpleNamespace(is_available=lambda: True, get_device_name=lambda i: "Fake H200",
                                       synchronize=lambda: None, empty_cache=lambda: None, Event=Event)
    torch.autograd = types.SimpleNamespace(grad=grad)
    nn = types.ModuleType("torch.nn")
    nn.functional = types.SimpleNamespace(scaled_dot_product_attention=sdpa)
    att = types.ModuleType("torch.nn.attention")
    att.SDPBackend = types.SimpleNamespace(FLASH_ATTENTION="FLASH_ATTENTION", CUDNN_ATTENTION="CUDNN_ATTENTION")
    att.sdpa_kernel = sdpa_kernel
    torch.nn, nn.attention = nn, att
    saved = {m: sys.modules.get(m) for m in ("torch", "torch.nn", "torch.nn.attention")}
    sys.modules.update({"torch": torch, "torch.nn": nn, "torch.nn.attention": att})
    try:
        with tempfile.TemporaryDirectory() as d:
            msgs = []
            rc = main(["--no-bench", "--quick", "--out", d], log=msgs.append, show=msgs.append)
            rep = json.load(open(os.path.join(d, "attention-bench.json")))
    finally:
        for m, v in saved.items():
            if v is None:
                sys.modules.pop(m, None)
            else:
                sys.modules[m] = v
    check(rc == 0 and rep["device"] == "Fake H200" and rep["torch"] == "9.9-fake" and rep["torch_cuda"] == "99.9",
          "report names the device and torch")
    res, recs = rep["results"], rep["records"]
    check(len(res) == 2 * 2 * 2 + 2 * 2 and all(close_to(r["ms"], 2.0) for r in res), "SDPA results, 2 ms each")
    r = next(x for x in res if x["backend"] == "sdpa-cudnn" and x["seq"] == 4096 and x["pass"] == "fwd")
    check(close_to(r["tflops"], flops(4, 16, 4096, 128, False, "fwd") / 2e-3 / 1e12) and close_to(r["vs_flash"], 1.0),
          "SDPA TFLOP/s and ratio")
    errs = [x for x in recs if x["kind"] == "error"]
    check(len(errs) == 4 and all(x["backend"] == "sdpa-cudnn" and x["causal"] for x in errs)
          and errs[0]["error"] == "No available kernel. Aborting execution.", "a refused shape is an error record")
    return calls


def close_to(a, b):
    return a is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))


def self_test(bench):
    """The merge, ratios, goals and tables on synthetic numbers; the missing-half messages; and, with
    --bench, attention_bench's --dry-run records against flops() and its exit 2 on bad options."""
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    # The base tree's exponential: "auto" follows --exp where the base program's --help names --exp.
    with tempfile.TemporaryDirectory() as tmp:
        progs = {}
        for name, text in (("new", "  --exp TEXT  the exponential"), ("old", "  --seqs TEXT")):
            progs[name] = os.path.join(tmp, name)
            with open(progs[name], "w") as f:
                f.write("#!/bin/sh\necho '%s'\n" % text)
            os.chmod(progs[name], 0o755)
        ns = argparse.Namespace(exp="sfu", base_exp="auto")
        check(base_exp(progs["new"], ns) == "sfu", "base exp auto: a program with --exp follows --exp")
        check(base_exp(progs["old"], ns) == "software", "base exp auto: a program without --exp is software")
        check(base_exp(os.path.join(tmp, "missing"), ns) == "software", "base exp auto: a missing program")
        check(base_exp(progs["new"], argparse.Namespace(exp="sfu", base_exp="software")) == "software",
              "base exp named")

    # The FLOP convention.
    check(flops(16, 16, 1024, 128, False, "fwd") == 4 * 16 * 16 * 1024 ** 2 * 128, "flops fwd")
    check(flops(16, 16, 1024, 128, True, "fwd") == 2 * 16 * 16 * 1024 ** 2 * 128, "flops causal")
    check(flops(1, 16, 16384, 64, True, "fwd+bwd") == 3.5 * flops(1, 16, 16384, 64, True, "fwd"), "flops fwd+bwd")

    # Synthetic records: flash 10 ms, cuDNN 5 ms; tiebreak bf16 8 ms, debias 8.32, fp32 9, probed bf16 8.72.
    recs = []

    def add(backend, ms, pass_="fwd", seq=4096, causal=False, mode=None, probe=None, scaling=None, exp=None):
        if backend == "tiebreak":
            r = {"kind": "result", "backend": "tiebreak", "mode": mode, "scaling": scaling or "unfused",
                 "probe": bool(probe), "pass": pass_, "batch": 16384 // seq, "heads": 16, "seq": seq, "dim": 128,
                 "causal": causal, "flops": flops(16384 // seq, 16, seq, 128, causal, pass_)}
        else:
            r = sdpa_record(backend, pass_, 128, seq, 16384 // seq, 16, causal)
        if exp:  # records without "exp" are software's (programs before --exp)
            r["exp"] = exp
        r.update(reps=5, ms=ms, ms_min=ms, ms_max=ms, tflops=r["flops"] / (ms * 1e-3) / 1e12)
        recs.append(r)
        return r

    add("tiebreak", 8.72, mode="bf16", probe=True)  # out of order on purpose
    add("sdpa-flash", 10.0)
    add("sdpa-cudnn", 5.0)
    add("tiebreak", 8.0, mode="bf16")
    add("tiebreak", 8.32, mode="debias")
    add("tiebreak", 9.0, mode="fp32")
    add("tiebreak", 12.0, mode="bf16", scaling="fused")
    add("sdpa-flash", 30.0, pass_="fwd+bwd")
    add("tiebreak", 40.0, pass_="fwd+bwd", mode="bf16")
    add("tiebreak", 2.0, seq=1024, causal=True, mode="bf16")  # no SDPA reference for this shape
    add("tiebreak", 6.4, mode="bf16", exp="sfu")  # the SFU's exponential: 1.25x software's 8 ms
    add("tiebreak", 6.72, mode="debias", exp="sfu")  # 5 % over sfu bf16, not over software's
    recs.append({"kind": "error", "backend": "sdpa-cudnn", "mode": None, "scaling": None, "probe": None,
                 "pass": "fwd+bwd", "batch": 4, "heads": 16, "seq": 4096, "dim": 128, "causal": False,
                 "flops": 1.0, "error": "No available kernel."})
    res = merge(recs)
    get = {(label(r), r["pass"], r["seq"]): r for r in res}
    close = lambda a, b: a is not None and abs(a - b) < 1e-12
    check(len(res) == 12, "merge keeps the 12 timed records, not the error")
    check([label(r) for r in res if r["pass"] == "fwd" and r["seq"] == 4096][:4] ==
          ["sdpa-flash", "sdpa-cudnn", "tiebreak bf16", "tiebreak bf16 +probe"], "sort order: SDPA first")
    check(close(get[("tiebreak bf16", "fwd", 4096)]["vs_flash"], 10.0 / 8.0), "vs_flash = 1.25")
    check(close(get[("tiebreak bf16", "fwd", 4096)]["vs_cudnn"], 5.0 / 8.0), "vs_cudnn = 0.625")
    check(close(get[("sdpa-flash", "fwd", 4096)]["vs_flash"], 1.0), "flash against itself")
    check(close(get[("tiebreak debias", "fwd", 4096)]["cost_vs_bf16"], 8.32 / 8.0 - 1), "debias cost 4 %")
    check(close(get[("tiebreak bf16 +probe", "fwd", 4096)]["probe_cost"], 8.72 / 8.0 - 1), "probe cost 9 %")
    check(get[("tiebreak bf16 +probe", "fwd", 4096)]["cost_vs_bf16"] is None, "bf16 has no cost over itself")
    check(get[("tiebreak bf16 fused", "fwd", 4096)]["cost_vs_bf16"] is None, "fused compares with fused bf16 only")
    check(close(get[("tiebreak bf16", "fwd+bwd", 4096)]["vs_flash"], 0.75), "fwd+bwd vs_flash = 0.75")
    check(get[("tiebreak bf16", "fwd+bwd", 4096)]["vs_cudnn"] is None, "no cuDNN reference: None")
    check(get[("tiebreak bf16", "fwd", 1024)]["vs_flash"] is None, "no flash reference: None")
    check(close(get[("tiebreak bf16 sfu", "fwd", 4096)]["vs_software"], 1.25), "sfu over software: 1.25")
    check(get[("tiebreak bf16", "fwd", 4096)]["vs_software"] is None, "software has no vs_software")
    check(close(get[("tiebreak debias sfu", "fwd", 4096)]["cost_vs_bf16"], 0.05), "sfu debias against sfu bf16")
    check(close(get[("tiebreak debias", "fwd", 4096)]["cost_vs_bf16"], 8.32 / 8.0 - 1), "software debias unchanged")

    g = {x["goal"]: x for x in goals(res)}
    x = g["issue 17 floor: bf16 fwd >= 0.6x flash, S=4k, D=128"]
    check(x["met"] is True and close(x["worst"], 1.25) and x["n"] == 1, "goal: floor met")
    x = g["bf16 fwd+bwd >= 0.9x flash, S=4k/16k"]
    check(x["met"] is False and close(x["worst"], 0.75), "goal: fwd+bwd missed")
    x = g["debias cost <= 5 % over bf16"]
    check(x["met"] is True and close(x["worst"], 0.04), "goal: debias 4 % met")
    x = g["probe cost <= 10 % (every mode)"]
    check(x["n"] == 1 and x["met"] is True and close(x["worst"], 8.72 / 8.0 - 1), "goal: probe cost")
    check(g["bf16 fwd >= 0.9x flash, D=64 or S=1k"]["n"] == 0, "goal without cases: n = 0")
    x = g["bf16 fwd >= 1.0x flash, S=4k/16k, D=128 [sfu exp]"]
    check(x["n"] == 1 and close(x["worst"], 10.0 / 6.4) and x["met"] is True, "goal: sfu forward apart")
    check(g["bf16 fwd >= 1.0x flash, S=4k/16k, D=128"]["n"] == 1 and close(
        g["bf16 fwd >= 1.0x flash, S=4k/16k, D=128"]["worst"], 1.25), "goal: software forward apart")
    x = g["sfu exp over software, bf16 (reported)"]
    check(x["n"] == 1 and close(x["worst"], 1.25), "goal: sfu over software reported")

    class A:  # the options build_report reads
        tokens, heads, warmup, reps = 16384, 16, 2, 5

    report = build_report(recs, {"kind": "meta", "device": "Synthetic H200"}, {"version": "0.0", "cuda": "0"}, A,
                          ["SDPA not measured: synthetic"])
    md = markdown(report)
    check("| tiebreak bf16 | 34 (—) | 69 (1.25×) |" in md, "compact table cell: TFLOP/s and ratio to flash")
    check("| sdpa-flash |  | 55 |" in md, "flash row without a ratio")
    check("| fwd | 128 | 4096 | 4 | no | tiebreak debias | 8.320 | 66.1 | 1.20× | 0.60× | +4.0 % | — |" in md,
          "long table row")
    check("## Forward + backward, D = 128" in md and "| S=1k causal | S=4k |" in md, "sections and shape columns")
    check("- sdpa-cudnn, fwd+bwd, D=128, S=4k, B=4: No available kernel." in md, "untimed cases listed")
    check("> SDPA not measured: synthetic" in md and "Synthetic H200" in md, "notes and device")
    check("| bf16 fwd+bwd >= 0.9x flash, S=4k/16k | 0.75× | 0.90× | **no** | 1 |" in md,
          "goal row")
    check("## The SFU's exponential against the software one, same run" in md and "| tiebreak bf16 sfu | 1.25× |" in md,
          "the sfu section")
    back = json.loads(json.dumps(report))
    check(back["device"] == "Synthetic H200" and len(back["results"]) == 12 and back["torch"] == "0.0", "JSON round trip")

    # A JSON-lines file cut short by a killed run.
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.jsonl")
        with open(p, "w") as f:
            f.write(json.dumps({"kind": "meta", "device": "x"}) + "\n\n" + json.dumps(recs[0]) + "\n" + '{"kind": "res')
        check(len(read_jsonl(p)) == 2, "read_jsonl skips a truncated last line")

        # Both halves missing: one clear message, exit 2, no files.
        msgs = []
        rc = main(["--no-torch", "--bench", os.path.join(d, "missing"), "--out", d], log=msgs.append)
        check(rc == 2 and any("attention_bench not found" in m for m in msgs)
              and any("nothing was measured" in m for m in msgs), "missing binary and no torch: exit 2, clear message")
        check(not os.path.exists(os.path.join(d, "attention-bench.md")), "no table when nothing was measured")
        # Only tiebreak's half (from a file): a table, with the note.
        p2 = os.path.join(d, "tb.jsonl")
        with open(p2, "w") as f:
            for r in [{"kind": "meta", "device": "Synthetic H200"}] + [r for r in recs if r["backend"] == "tiebreak"]:
                f.write(json.dumps(r) + "\n")
        msgs = []
        rc = main(["--tiebreak-json", p2, "--no-torch", "--out", d], log=msgs.append, show=msgs.append)
        check(rc == 0 and os.path.exists(os.path.join(d, "attention-bench.json")), "tiebreak-only run writes the table")

        # The program's plumbing with a stand-in that writes one case and then fails: the case is
        # kept, the failure becomes a note, the run still makes its table.
        fake = os.path.join(d, "fake_bench")
        one = [r for r in recs if r["backend"] == "tiebreak"][0]
        with open(fake, "w") as f:
            f.write("#!%s\nimport json, sys\na = sys.argv\nwith open(a[a.index('--json') + 1], 'w') as f:\n"
                    "    f.write(json.dumps({'kind': 'meta', 'device': 'Fake GPU'}) + '\\n' + json.dumps(%r) + '\\n')\n"
                    "sys.exit('attention_bench: the stand-in stops here')\n" % (sys.executable, one))
        os.chmod(fake, 0o755)
        msgs = []
        rc = main(["--bench", fake, "--no-torch", "--out", d, "--quick"], log=msgs.append, show=msgs.append)
        rep = json.load(open(os.path.join(d, "attention-bench.json")))
        check(rc == 0 and rep["device"] == "Fake GPU" and len(rep["results"]) == 1, "the program's records are read")
        check(rep["notes"] == ["attention_bench exited 1: attention_bench: the stand-in stops here"], "its failure is a note")

    # Two trees in one run (--base-bench): stand-ins for this tree's program (every case 8 ms) and
    # the base's (10 ms) that note each call's group in a shared file: the groups alternate which tree
    # goes first, every case gets vs_base = 1.25, the goals read this tree's records only, and each
    # tree's records land in its own JSON-lines file.
    with tempfile.TemporaryDirectory() as d:
        calls = os.path.join(d, "calls")
        progs = {}
        for name, ms in (("new", 8.0), ("old", 10.0)):
            progs[name] = os.path.join(d, name)
            with open(progs[name], "w") as f:
                f.write("#!%s\nimport json, sys\na = sys.argv\nv = lambda k: a[a.index(k) + 1]\n"
                        "open(%r, 'a').write('%s ' + v('--passes') + ' ' + v('--seqs') + '\\n')\n"
                        "out = [json.dumps({'kind': 'meta', 'device': 'Fake GPU'})]\n"
                        "for s in v('--seqs').split(','):\n"
                        "    for m in v('--modes').split(','):\n"
                        "        fl = 4.0 * (16384 // int(s)) * 16 * int(s) ** 2 * 128 * (3.5 if v('--passes') == 'fwd+bwd' else 1)\n"
                        "        out.append(json.dumps({'kind': 'result', 'backend': 'tiebreak', 'mode': m, 'scaling': 'unfused',"
                        " 'probe': False, 'pass': v('--passes'), 'batch': 16384 // int(s), 'heads': 16, 'seq': int(s), 'dim': 128,"
                        " 'causal': False, 'flops': fl, 'reps': 3, 'ms': %r, 'ms_min': %r, 'ms_max': %r, 'tflops': fl / %r / 1e9}))\n"
                        "open(v('--json'), 'w').write('\\n'.join(out) + '\\n')\n"
                        % (sys.executable, calls, name, ms, ms, ms, ms * 1e-3 * 1e3))
            os.chmod(progs[name], 0o755)
        msgs = []
        rc = main(["--bench", progs["new"], "--base-bench", progs["old"], "--base-label", "abc1234", "--no-torch",
                   "--out", d, "--causal", "off", "--modes", "bf16,debias", "--probe", "off", "--seqs", "1024,4096"],
                  log=msgs.append, show=msgs.append)
        order = open(calls).read().split("\n")[:-1]
        check(rc == 0 and order == ["new fwd 1024", "old fwd 1024", "old fwd 4096", "new fwd 4096",
                                    "new fwd+bwd 1024", "old fwd+bwd 1024", "old fwd+bwd 4096", "new fwd+bwd 4096"],
              "two trees: one group at a time, alternating which goes first (%s)" % order)
        rep = json.load(open(os.path.join(d, "attention-bench.json")))
        mine = [r for r in rep["results"] if r["backend"] == "tiebreak"]
        base = [r for r in rep["results"] if r["backend"] == "tiebreak-base"]
        check(len(mine) == 8 and len(base) == 8 and all(close(r["vs_base"], 1.25) for r in mine)
              and all(r["vs_base"] is None for r in base), "vs_base = 10 ms / 8 ms on every case")
        check(all(close(r["cost_vs_bf16"], 0.0) for r in base if r["mode"] == "debias"), "the base's own costs")
        g = {x["goal"]: x for x in rep["goals"]}
        check(g["debias cost <= 5 % over bf16"]["n"] == 4, "goals: this tree's cases only")
        md = open(os.path.join(d, "attention-bench.md")).read()
        check("## Against the base tree (abc1234), same run" in md and "| tiebreak bf16 | 1.25× | 1.25× |" in md,
              "the table against the base")
        check("| base debias |" in md, "the base's rows in the main tables")
        jl = read_jsonl(os.path.join(d, "tiebreak-base.jsonl"))
        check(jl[0].get("kind") == "meta" and len(jl) == 9 and all(r["backend"] == "tiebreak-base" for r in jl[1:]),
              "the base's records in their own file")
        check(len(read_jsonl(os.path.join(d, "tiebreak.jsonl"))) == 9, "this tree's records in tiebreak.jsonl")
        check(not [f for f in os.listdir(d) if "-part" in f], "no part files left")
        # A base program that fails before its first case: one note, not called again, this tree's cases kept.
        broken = os.path.join(d, "broken")
        with open(broken, "w") as f:
            f.write("#!%s\nimport sys\nif '--help' in sys.argv: sys.exit(0)\nopen(%r, 'a').write('broken\\n')\n"
                    "sys.exit('attention_bench: no CUDA device')\n" % (sys.executable, calls))
        os.chmod(broken, 0o755)
        open(calls, "w").close()
        msgs = []
        rc = main(["--bench", progs["new"], "--base-bench", broken, "--no-torch", "--out", d, "--causal", "off",
                   "--modes", "bf16", "--probe", "off", "--seqs", "1024,4096"], log=msgs.append, show=msgs.append)
        rep = json.load(open(os.path.join(d, "attention-bench.json")))
        check(rc == 0 and open(calls).read().count("broken") == 1 and len(rep["results"]) == 4
              and rep["notes"] == ["base tree: attention_bench exited 1: attention_bench: no CUDA device"],
              "a base that fails at once: called once, one note (%s)" % rep["notes"])
        msgs = []
        rc = main(["--bench", progs["new"], "--base-bench", os.path.join(d, "missing"), "--no-torch", "--out", d],
                  log=msgs.append, show=msgs.append)
        check(rc == 2 and any("--base-bench" in m and "not an executable" in m for m in msgs), "missing base: exit 2")

    # The SDPA half against a stand-in torch module (the calls the script makes, each call 2 ms;
    # cuDNN refuses causal shapes): the records, the error path, the report's torch fields.
    calls = fake_torch_run(check)
    check(calls["sdpa"] == (4 * 2 + 2 * 2) * (1 + 3), "SDPA calls: (flash: 4 shapes, cuDNN: 2) x 2 passes x (warm-up + reps)")
    check(calls["grad"] == (4 + 2) * (1 + 3), "one autograd.grad per forward+backward call")

    # attention_bench itself: its planned cases, their FLOP counts, its bad-option exits.
    if bench:
        args = parse_args(["--quick", "--dims", "64,128", "--probe", "both", "--scaling", "both"])
        p = subprocess.run([bench, "--dry-run"] + bench_args(args), capture_output=True, text=True, timeout=60)
        plan = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
        check(p.returncode == 0, "dry run exits 0")
        check(len(plan) == 2 * 2 * 2 * 4 * 2 * 2 * 2 * 2,
              "dry run: dims x seqs x causal x modes x scalings x exps x probe x passes")
        check(sorted({r.get("exp") for r in plan}) == ["sfu", "software"], "dry run: both exponentials (--exp both)")
        check(all(r["kind"] == "plan" and r["flops"] == flops(r["batch"], r["heads"], r["seq"], r["dim"], r["causal"],
                                                                  r["pass"]) for r in plan), "dry run FLOP counts")
        check({(r["seq"], r["batch"]) for r in plan} == {(1024, 16), (4096, 4)}, "B = tokens / S")
        # interleaved timing (the default): the cases timed together are those of one shape and pass,
        # every mode and probe setting, and no other
        shape_of = lambda r: (r["dim"], r["seq"], r["causal"], r["scaling"], r["exp"], r["pass"])
        groups = {}
        for r in plan:
            groups.setdefault((r["dim"], r.get("group")), set()).add(shape_of(r))
        check(all(len(v) == 1 for v in groups.values()) and len(groups) == len({shape_of(r) for r in plan}),
              "dry run: a group per shape and pass (%d groups)" % len(groups))
        check(all(sum(1 for r in plan if (r["dim"], r.get("group")) == k) == 4 * 2 for k in groups),
              "dry run: each group holds every mode with the probe off and on")
        p = subprocess.run([bench, "--dry-run", "--order", "sequential"] + bench_args(args), capture_output=True,
                           text=True, timeout=60)
        seq_plan = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
        check(len({(r["dim"], r.get("group")) for r in seq_plan}) == len(plan), "--order sequential: a group per case")
        for bad in (["--seqs", "1000"], ["--dims", "96"], ["--modes", "bf8"], ["--reps", "0"], ["--probe", "maybe"],
                    ["--order", "random"], ["--no-such-option"]):
            p = subprocess.run([bench, "--dry-run"] + bad, capture_output=True, text=True, timeout=60)
            check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and not p.stdout,
                  "exit 2 with one line for %s" % bad)

    for f in fails:
        print("self-test FAILED: " + f, file=sys.stderr)
    print("attention-bench self-test: %d failures%s" % (len(fails), "" if bench else " (no --bench: program not checked)"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
