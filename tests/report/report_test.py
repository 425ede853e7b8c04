# SPDX-License-Identifier: Apache-2.0
"""Tests of `tiebreak report` (docs/report.md) on JSON the built `tiebreak` writes.

  report_test.py render  TIEBREAK WORKDIR   every kind except demo (two attention modes) in one page; the CLI's
                                            error contract (exit 2, one line) for every bad input
  report_test.py browser TIEBREAK WORKDIR   every kind, demo included, opened in headless Chromium:
                                            no console message, every <img> decoded; keeps the
                                            screenshot WORKDIR/report-screenshot.png

The experiment pages (tiebreak.experiment/1) and the torch scalars page (tiebreak.scalars/1) are
drawn from FIXTURES (experiment_fixture.py: synthetic series, labelled as such in the files): the
experiment command is not part of this test, and the scalars are written by tiebreak.torch, which
needs torch. Everything else is JSON the built tiebreak writes.

Exit code 77 (ctest: skipped) with the reason on stdout when matplotlib, or for `browser` Chromium,
is missing on this machine; CI installs both (tools/install-deps.sh), so there it runs.
"""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import experiment_fixture  # noqa: E402  (FIXTURES: synthetic experiment and scalars JSON)

SKIP = 77


def fail(msg: str) -> None:
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, **kw)


def must(cmd, **kw) -> subprocess.CompletedProcess:
    r = run(cmd, **kw)
    if r.returncode != 0:
        fail(f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stderr}")
    return r


def bf16(x):
    """Rounds float32 values to bf16 (nearest-even) to build a GEMM input; stored as f4 .npy, the
    usual way bf16 reaches a .npy file (docs/gemm-audit.md)."""
    import numpy as np
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32)


def generate(tb: str, work: str, with_demo: bool, modes) -> dict:
    """Real JSON of every kind, written by the built tiebreak on tiny problems; returns kind -> files."""
    import numpy as np
    files = {"audit": [], "attention probe": [], "audit-gemm": [], "analyze bias": [], "analyze spectral": [],
             "analyze align": [], "demo": [], "experiment causal": [], "experiment bisect": [], "torch scalars": [],
             "torch audits": []}
    for mode in modes:
        out = os.path.join(work, f"att_{mode}.safetensors")
        must([tb, "attention", "--mode", mode, "--emulate", "--shape", "1,2,64,64", "--seed", "3", "-q", "-o", out])
        files["attention probe"].append(os.path.join(work, f"att_{mode}.probe.json"))
        audit = os.path.join(work, f"audit_{mode}.json")
        must([tb, "audit", out, "-q", "-o", audit])
        files["audit"].append(audit)
    rng = np.random.default_rng(1)
    g = os.path.join(work, "gemm")
    os.makedirs(g, exist_ok=True)
    a, b = bf16(rng.standard_normal((32, 64))), bf16(rng.standard_normal((64, 32)) + 0.5)
    np.save(os.path.join(g, "a.npy"), a)
    np.save(os.path.join(g, "b.npy"), b)
    np.save(os.path.join(g, "d.npy"), (a @ b).astype(np.float32))
    files["audit-gemm"].append(os.path.join(work, "gemm.json"))
    must([tb, "audit-gemm", g, "-q", "--block", "8", "--identify", "-o", files["audit-gemm"][0]])
    np.save(os.path.join(work, "errors.npy"), rng.standard_normal((4, 50)) * 0.1 + 0.02)
    bias = os.path.join(work, "bias.json")
    with open(bias, "w") as f:
        f.write(must([tb, "analyze", "bias", os.path.join(work, "errors.npy"), "--json", "--per-row", "--series"]).stdout)
    files["analyze bias"].append(bias)
    ws = []
    for i in range(3):
        ws.append(os.path.join(work, f"w{i}.npy"))
        np.save(ws[-1], rng.standard_normal((8, 6)) + 0.3 * i)
    spectral = os.path.join(work, "spectral.jsonl")  # JSON Lines: one object per file
    with open(spectral, "w") as f:
        f.write(must([tb, "analyze", "spectral", ws[0], ws[1], "--json", "--rows-per-slice", "4"]).stdout)
    files["analyze spectral"].append(spectral)
    align = os.path.join(work, "align.json")
    with open(align, "w") as f:
        f.write(must([tb, "analyze", "align", *ws, "--json", "-k", "2"]).stdout)
    files["analyze align"].append(align)
    if with_demo:
        demo = os.path.join(work, "demo.json")
        with open(demo, "w") as f:
            f.write(must([tb, "demo", "--json"]).stdout)
        files["demo"].append(demo)
    # FIXTURES (synthetic, see experiment_fixture.py): the experiment pages and the torch scalars,
    # whose per-head records carry the real audits' numbers. The browser test puts two experiments
    # side by side (two and four modes).
    fixtures = os.path.join(work, "fixture")
    os.makedirs(fixtures)
    variants = [("bf16", "fp32")] + ([("bf16", "fp32", "debias", "stochastic")] if with_demo else [])
    for i, ms in enumerate(variants):
        path = os.path.join(fixtures, f"causal{i}.json")
        experiment_fixture.causal(path, modes=ms, device="cpu" if i == 0 else "gpu")
        files["experiment causal"].append(path)
    files["experiment bisect"].append(os.path.join(fixtures, "bisect.json"))
    experiment_fixture.bisect(files["experiment bisect"][0])
    files["torch scalars"].append(os.path.join(fixtures, "scalars.jsonl"))
    experiment_fixture.scalars(files["torch scalars"][0], files["audit"])
    if with_demo:
        # ScalarLogger.log_audit's audits.jsonl: one audit per line with the hook's step and module
        # (here the real audits of this run, two lines): one column per line.
        files["torch audits"].append(os.path.join(work, "audits.jsonl"))
        with open(files["torch audits"][0], "w") as f:
            for i, path in enumerate(files["audit"][:2]):
                f.write(json.dumps(dict(json.load(open(path)), step=10 * i, module="attn")) + "\n")
    return files


class _Page(html.parser.HTMLParser):
    """What a self-contained page may hold: the tags, their src/href values, and the table cells."""

    def __init__(self):
        super().__init__()
        self.imgs, self.links, self.scripts, self.h2 = [], [], 0, []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag == "script":
            self.scripts += 1
        for key in ("href", "src"):
            if key in a and tag != "img":
                self.links.append(a[key])
        self._in_h2 = tag == "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.h2.append(data)

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False


def render_and_check(tb: str, work: str, files: dict) -> tuple:
    inputs = [p for k in files for p in files[k]]
    out = os.path.join(work, "report.html")
    r = must([tb, "report", *inputs, "-o", out])
    if r.stdout or r.stderr:
        fail(f"report: expected no output, got stdout {r.stdout!r} stderr {r.stderr!r}")
    text = open(out, encoding="utf-8").read()
    page = _Page()
    page.feed(text)
    # Self-contained: every figure a data URI, nothing else fetched, no script.
    if not page.imgs or any(not s.startswith("data:image/png;base64,") for s in page.imgs):
        fail(f"figures not embedded as data URIs: {[s[:40] for s in page.imgs]}")
    if page.links or page.scripts:
        fail(f"page refers to other resources {page.links} or holds {page.scripts} scripts")
    # One section per kind given, the verdict table first and the provenance last.
    headings = "".join(page.h2)
    want = {"audit": "Attention audits", "attention probe": "Attention probe counters", "audit-gemm": "GEMM audits",
            "analyze bias": "Bias of error series", "analyze spectral": "Spectral norms",
            "analyze align": "Alignment over a sequence", "demo": "Tie-breaking demonstration",
            "experiment causal": "Causal experiment", "experiment bisect": "Head bisection",
            "torch scalars": "Training scalars", "torch audits": "Attention audits"}
    for kind, title in want.items():
        if (title in headings) != bool(files[kind]) and not (kind == "torch audits" and files["audit"]):
            fail(f"section '{title}' present: {title in headings}, inputs of kind {kind}: {files[kind]}")
    if not (page.h2[0] == "Verdicts" and page.h2[-1] == "Provenance"):
        fail(f"sections in the wrong order: {page.h2}")
    # The verdicts say what the JSON says (the audit's own verdict, per file).
    for path in files["audit"]:
        s = json.load(open(path))["summary"]
        cell = f'<span class="{"biased" if s["verdict"] == "biased" else "unbiased"}">{s["verdict"]}</span>'
        row = text[text.index(f"{os.path.basename(path)}</td><td>audit</td>"):][:400]
        if cell not in row or f"{s['heads_biased']} of {s['heads']} heads biased" not in row:
            fail(f"verdict row of {path} does not match its JSON: {row}")
    # Provenance: every input's absolute path and its command line where the JSON records it.
    for path in inputs:
        if os.path.abspath(path) not in text:
            fail(f"provenance lacks {path}")
    for path in files["attention probe"] + files["audit"]:
        cl = " ".join(json.load(open(path))["command_line"])
        if cl not in text:
            fail(f"provenance lacks the command line of {path}: {cl}")
    check_experiment(text, files)
    return out, len(page.imgs)


def _row(text: str, path: str, kind: str, n: int = 1) -> str:
    """The verdict table's rows of `path` (the n rows that follow its first cell)."""
    key = f"{os.path.basename(path)}</td><td>{kind}</td>"
    i = text.index(key)
    return text[i:text.index("</table>", i)].split("</tr>")[:n]


def check_experiment(text: str, files: dict) -> None:
    """The experiment and scalars pages say what their JSON says (verdict rows, tables, provenance)."""
    esc = __import__("html").escape
    for path in files["experiment causal"]:
        d = json.load(open(path))
        rows = _row(text, path, "experiment causal", 1 + len(d["groups"]))
        rep = "reproduced" if d["conclusion"]["reproduced"] else "not reproduced"
        if f'<span class="{"biased" if d["conclusion"]["reproduced"] else "unbiased"}">{rep}</span>' not in rows[0]:
            fail(f"conclusion row of {path} does not say '{rep}': {rows[0][:300]}")
        for g, row in zip(d["groups"], rows[1:]):
            counts = ", ".join(f"{k} {g['verdicts'][k]}" for k in ("growth", "stable", "diverged", "reference")
                               if g["verdicts"][k])
            if f"{g['mode']} · {g['data']}: {counts}</span>" not in row or f"{g['n']} seeds" not in row:
                fail(f"group row of {path} for {g['mode']}/{g['data']} does not say '{counts}': {row[:300]}")
        if esc(d["command_line"]) not in text or esc(" ".join(d["conclusion"]["text"].split())) not in text:
            fail(f"page lacks the command line or the conclusion of {path}")
        for key in ("lr", "log_every", "growth_threshold", "monitor"):
            if f"{key} {d['config'][key]}" not in text:
                fail(f"provenance of {path} lacks config '{key} {d['config'][key]}'")
    for path in files["experiment bisect"]:
        d = json.load(open(path))
        heads = ", ".join(f"L{l}H{h}" for l, h in d["result"]["heads"])
        if f"heads: {heads}</span>" not in _row(text, path, "experiment bisect")[0]:
            fail(f"bisect verdict of {path} does not name heads {heads}")
        for t in d["trials"]:
            if f"<td>{', '.join(f'L{l}H{h}' for l, h in t['heads'])}</td>" not in text:
                fail(f"bisect table lacks the trial {t['heads']}")
    for path in files["torch audits"]:  # JSON Lines of audits: one verdict row per line, labelled with it
        for i, line in enumerate(open(path)):
            d = json.loads(line)
            key = f"{os.path.basename(path)} line {i + 1} (step {d['step']}, module {d['module']})</td><td>audit</td>"
            if key not in text or f">{d['summary']['verdict']}</span>" not in text[text.index(key):][:300]:
                fail(f"no verdict row '{key}' with verdict {d['summary']['verdict']}")
    for path in files["torch scalars"]:
        tags = {t for line in open(path) for t in json.loads(line)["scalars"]}
        if f">{len(tags)} tags</span>" not in _row(text, path, "torch scalars")[0]:
            fail(f"scalars verdict of {path} does not count its {len(tags)} tags")
        for t in tags:
            if f"<td>{esc(t)}</td>" not in text:
                fail(f"scalars table lacks the tag {t}")
        if files["audit"] and "Per-head statistics, mean over the audited steps" not in text:
            fail("scalars page lacks the per-head heatmaps of the audit records")


def check_errors(tb: str, work: str, files: dict) -> None:
    """Every bad input: exit 2, exactly one line `tiebreak: error: ...` naming the problem, nothing on
    stdout, no output file."""
    good = files["audit"][0]
    bad = os.path.join(work, "bad")
    os.makedirs(bad, exist_ok=True)

    def write(name, text):
        p = os.path.join(bad, name)
        with open(p, "w") as f:
            f.write(text)
        return p

    cut = json.load(open(good))
    del cut["heads"][0]["o_t"]
    probe = json.load(open(files["attention probe"][0]))
    causal = json.load(open(files["experiment causal"][0]))
    no_cum = json.loads(json.dumps(causal))
    del no_cum["cells"][0]["series"]["sigma_wq"]  # read before the first figure is drawn: a cheap case
    fakemp = os.path.join(bad, "fake")
    os.makedirs(os.path.join(fakemp, "matplotlib"), exist_ok=True)
    write("fake/matplotlib/__init__.py", "raise ImportError('matplotlib is absent in this test')\n")
    out = os.path.join(bad, "out.html")
    env_nomp = dict(os.environ, PYTHONPATH=fakemp)
    env_nopy = dict(os.environ, TIEBREAK_PYTHON=os.path.join(bad, "no-such-python3"))
    env_nopkg = dict(os.environ, TIEBREAK_PYTHON_DIR=bad)
    cases = [
        ("unknown JSON", [write("unknown.json", '{"loss": [1, 2]}')], None, "not a JSON that tiebreak report knows"),
        ("unknown schema", [write("schema.json", '{"schema": "other.tool/1"}')], None, "unknown schema 'other.tool/1'"),
        ("newer schema", [write("v9.json", json.dumps(dict(probe, schema="tiebreak.attention_probe/9")))], None,
         "schema 'tiebreak.attention_probe/9' is not supported"),
        ("malformed", [write("malformed.json", '{"schema": "tiebreak.audit/2", ')], None, "malformed JSON"),
        ("empty", [write("empty.json", "")], None, "the file is empty"),
        ("NaN literal", [write("nan.json", '{"x": NaN}')], None, "malformed JSON"),
        ("array", [write("array.json", "[1, 2]")], None, "not a JSON object"),
        ("missing field", [write("cut.json", json.dumps(cut))], None, "missing field 'o_t'"),
        ("required field", [write("noverdict.json", json.dumps({"schema": "tiebreak.audit-gemm/1"}))], None,
         "without the field 'shape.M'"),
        ("mixed JSON Lines", [write("mixed.jsonl", json.dumps(probe) + "\n" + open(good).read().replace("\n", "") + "\n")],
         None, "mix kinds"),
        ("experiment kind", [write("kind.json", json.dumps(dict(causal, kind="experiment_sweep")))], None,
         'tiebreak.experiment/1 document of kind "experiment_sweep", which this report does not draw'),
        ("experiment series", [write("nocum.json", json.dumps(no_cum))], None,
         "cannot draw the experiment causal page: missing field 'sigma_wq'"),
        ("scalars line", [write("scalars.jsonl", '{"schema": "tiebreak.scalars/1", "step": 1, "scalars": {"a": 1}}\n'
                                                 '{"schema": "tiebreak.scalars/1", "step": 2}\n')], None,
         "line 2: torch scalars JSON without the field 'scalars'"),
        ("missing file", [os.path.join(bad, "absent.json")], None, "no such file"),
        ("directory", [bad], None, "is a directory"),
        ("no python", [good], env_nopy, "pip install matplotlib"),
        ("no matplotlib", [good], env_nomp, "pip install matplotlib"),
        ("no package", [good], env_nopkg, "has no tiebreak/report/__main__.py"),
    ]
    for name, args, env, expect in cases:
        r = run([tb, "report", *args, "-o", out], env=env)
        lines = r.stderr.splitlines()
        if r.returncode != 2 or r.stdout or len(lines) != 1 or not lines[0].startswith("tiebreak: error: ") \
                or expect not in lines[0] or os.path.exists(out):
            fail(f"{name}: expected exit 2 and one line with '{expect}', got exit {r.returncode}, "
                 f"stdout {r.stdout!r}, stderr {r.stderr!r}, output written {os.path.exists(out)}")
    for name, argv, expect in (("no -o", [good], "--output is required"), ("no input", ["-o", out], "inputs is required"),
                               ("missing folder", [good, "-o", os.path.join(bad, "no", "x.html")], "no such directory")):
        r = run([tb, "report", *argv])
        if r.returncode != 2 or len(r.stderr.splitlines()) != 1 or expect not in r.stderr:
            fail(f"{name}: expected exit 2 and '{expect}', got exit {r.returncode}: {r.stderr!r}")


CHECK_SCRIPT = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const bad = imgs.filter(i => !(i.complete && i.naturalWidth > 0 && i.naturalHeight > 0));
  const d = document.createElement('div');
  d.id = 'tiebreak-check';
  d.textContent = 'images=' + imgs.length + ' broken=' + bad.length;
  document.body.appendChild(d);
});
</script>"""


def browser(report: str, nimg: int, work: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    flags = ["--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
             f"--user-data-dir={os.path.join(work, 'chromium-profile')}"]
    # A copy with a check script appended (the report itself holds no script): on load it writes the
    # number of images and of images that did not decode into the DOM, which --dump-dom returns.
    checked = os.path.join(work, "report-checked.html")
    with open(checked, "w", encoding="utf-8") as f:
        f.write(open(report, encoding="utf-8").read().replace("</body>", CHECK_SCRIPT + "</body>"))
    r = run([chromium, *flags, "--virtual-time-budget=10000", "--dump-dom", "file://" + checked])
    status = f"images={nimg} broken=0"
    if r.returncode != 0 or f'<div id="tiebreak-check">{status}</div>' not in r.stdout:
        tail = r.stdout[r.stdout.find('tiebreak-check') - 10:][:80] if "tiebreak-check" in r.stdout else "(no status)"
        fail(f"chromium: expected '{status}', got exit {r.returncode}, {tail}\n{r.stderr[-2000:]}")
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    if console:
        fail("console messages:\n" + "\n".join(console))
    shot = os.path.join(work, "report-screenshot.png")
    if os.path.exists(shot):
        os.unlink(shot)
    r = run([chromium, *flags, "--window-size=1400,2400", f"--screenshot={shot}", "file://" + os.path.abspath(report)])
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    if r.returncode != 0 or not os.path.exists(shot) or console:
        fail(f"chromium --screenshot: exit {r.returncode}, file {os.path.exists(shot)}, console {console}\n{r.stderr[-2000:]}")
    with open(shot, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            fail(f"{shot} is not a PNG")
    print(f"screenshot: {shot} ({os.path.getsize(shot)} bytes); {nimg} figures decoded, no console message")


def main() -> int:
    what, tb, work = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e.name} is not installed for {sys.executable} (tools/install-deps.sh installs it)")
        return SKIP
    if what == "browser" and not (shutil.which("chromium") or shutil.which("chromium-browser")):
        print("SKIP: chromium is not installed (Debian's chromium package; tools/install-deps.sh installs it)")
        return SKIP
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    # render runs in the sanitizer build too, where one `attention --emulate` takes 2 s: two modes
    # there, the four side by side in the browser test.
    modes = ("bf16", "fp32") if what == "render" else ("bf16", "fp32", "debias", "stochastic")
    files = generate(tb, work, with_demo=(what == "browser"), modes=modes)
    report, nimg = render_and_check(tb, work, files)
    if what == "render":
        check_errors(tb, work, files)
        print(f"report of {sum(len(v) for v in files.values())} inputs, {nimg} figures; error contract holds")
    else:
        browser(report, nimg, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
