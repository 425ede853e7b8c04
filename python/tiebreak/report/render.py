# SPDX-License-Identifier: Apache-2.0
"""One self-contained HTML page from tiebreak's JSON files (docs/report.md)."""

from __future__ import annotations

import datetime
import os
import platform
import string

from . import kinds
from .inputs import Input, ReportError, read_input
from .page import Raw, document, esc, table, verdict_cell


def _labels(inputs) -> None:
    letters = string.ascii_uppercase
    for i, inp in enumerate(inputs):
        tag = letters[i] if i < len(letters) else f"#{i + 1}"
        inp.label = f"{tag}: {os.path.basename(inp.path)}" + (f" {inp.extra['line']}" if "line" in inp.extra else "")


def _command_text(argv) -> str:
    if argv is None:
        return None
    if isinstance(argv, list):
        return " ".join(str(a) for a in argv)
    return str(argv)


def _split_lines(inp: Input) -> list:
    """A JSON Lines file of a kind drawn one document at a time (e.g. the audits.jsonl of
    tiebreak.torch's ScalarLogger: one audit per line) becomes one input per line, side by side."""
    if inp.kind.whole_lines or len(inp.docs) == 1:
        return [inp]
    out = []
    for i, d in enumerate(inp.docs):
        part = Input(path=inp.path, docs=[d], size=inp.size, sha256=inp.sha256, kind=inp.kind)
        where = ", ".join(f"{k} {d[k]}" for k in ("step", "module") if k in d)
        part.extra["line"] = f"line {i + 1}" + (f" ({where})" if where else "")
        out.append(part)
    return out


def load(paths) -> list:
    """Reads and classifies every input (ReportError for the first that cannot be read or is unknown)."""
    inputs = []
    for p in paths:
        inp = read_input(p)
        kinds.classify(inp)
        inputs.extend(_split_lines(inp))
    _labels(inputs)
    return inputs


def _call(fn, inputs, what):
    """Runs a page function; a field it needs but the file lacks (or of the wrong type) becomes one
    line naming the file(s), not a traceback."""
    try:
        return fn(inputs)
    except ReportError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        names = ", ".join(i.path for i in (inputs if isinstance(inputs, list) else [inputs]))
        detail = f"missing field {e}" if isinstance(e, KeyError) else str(e)
        raise ReportError(f"{names}: cannot draw the {what}: {detail}") from None


def render_html(inputs, *, invoked_as=None, tool_version=None) -> str:
    import matplotlib

    verdict_rows = []
    for inp in inputs:
        for cell, detail in _call(inp.kind.verdicts, inp, f"{inp.kind.name} verdict"):
            verdict_rows.append([inp.label, inp.kind.name, cell, detail])
    sections = []
    for kind in kinds.KINDS:
        group = [inp for inp in inputs if inp.kind is kind]
        if group:
            sections.append(_call(kind.section, group, f"{kind.name} page"))
    prov_rows = []
    for inp in inputs:
        p = _call(inp.kind.provenance, inp, f"{inp.kind.name} provenance")
        schema = inp.doc.get("schema", "(none: " + inp.kind.name + " --json)")
        prov_rows.append([inp.label, os.path.abspath(inp.path), f"{inp.size} bytes, sha256 {inp.sha256[:16]}…",
                          f"{inp.kind.name}, {schema}" + (f", {len(inp.docs)} JSON lines" if len(inp.docs) > 1 else ""),
                          p.get("shape") or "—", p.get("data") or "—",
                          _command_text(p.get("command_line")) or "not recorded in this JSON",
                          p.get("version") or "not recorded in this JSON"])
    made = (f"Made by tiebreak report{(' ' + tool_version) if tool_version else ''}"
            f"{(': ' + _command_text(invoked_as)) if invoked_as else ''}; Python {platform.python_version()}, "
            f"matplotlib {matplotlib.__version__}; "
            f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.")
    provenance = (table(["input", "file", "size", "kind", "shape", "data", "command line", "version"], prov_rows)
                  + f"<p class=\"how\">{esc(made)}</p>")
    title = "tiebreak report: " + ", ".join(os.path.basename(i.path) for i in inputs)
    if len(title) > 120:
        title = f"tiebreak report: {len(inputs)} inputs"
    return document(title, table(["input", "kind", "verdict", "details"], verdict_rows), "\n".join(sections), provenance)


def render(paths, output, *, invoked_as=None, tool_version=None) -> None:
    """Reads `paths`, writes the page to `output` (atomically: a failed run leaves no partial file)."""
    if not paths:
        raise ReportError("no input files (tiebreak report RUN.json [MORE.json ...] -o report.html)")
    out_dir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(out_dir):
        raise ReportError(f"-o {output}: no such directory '{out_dir}'")
    for p in paths:
        if os.path.exists(output) and os.path.exists(p) and os.path.samefile(p, output):
            raise ReportError(f"-o {output}: is also an input (the report would overwrite it)")
    inputs = load(paths)
    text = render_html(inputs, invoked_as=invoked_as, tool_version=tool_version)
    tmp = f"{output}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, output)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ReportError(f"-o {output}: cannot write: {e.strerror}") from None
