# SPDX-License-Identifier: Apache-2.0
"""The HTML page: one self-contained file (inline CSS, figures as data URIs, no script, no link)."""

from __future__ import annotations

import html
import json

CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1400px; color: #222; font-size: 14px; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; margin-top: 2em; }
h3 { font-size: 1.0em; margin-bottom: 0.3em; }
table { border-collapse: collapse; margin: 0.5em 0 1em 0; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.biased { color: #b00; font-weight: bold; }
.unbiased { color: #070; }
.neutral { color: #555; }
img.fig { max-width: 100%; display: block; margin: 0.4em 0; }
p.how { color: #444; max-width: 70em; }
code, pre { font-size: 12px; }
pre { white-space: pre-wrap; word-break: break-all; background: #f7f7f7; padding: 4px; }
details { margin: 0.3em 0 1em 0; }
"""


def esc(text) -> str:
    return html.escape(str(text))


def table(header, rows, *, numeric=()) -> str:
    """An HTML table; cells are escaped text unless given as Raw; columns in `numeric` right-aligned."""
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            cls = ' class="num"' if i in numeric else ""
            cells.append(f"<td{cls}>{c.html if isinstance(c, Raw) else esc(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


class Raw:
    """HTML that a table cell takes as it is (already escaped by whoever built it)."""

    def __init__(self, html_text: str):
        self.html = html_text


def verdict_cell(text: str, state: str) -> Raw:
    """state: "biased", "unbiased" or "neutral" (no verdict of its own)."""
    return Raw(f'<span class="{state}">{esc(text)}</span>')


def json_details(summary: str, value) -> str:
    return f"<details><summary>{esc(summary)}</summary><pre>{esc(json.dumps(value, indent=1))}</pre></details>"


def document(title: str, verdict_html: str, sections_html: str, provenance_html: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>\n"
        f"<h1>{esc(title)}</h1>\n"
        "<p class=\"how\">How to read each figure: docs/report.md of the tiebreak sources. "
        "Errors are signed: positive means the kernel's value is above the reference.</p>\n"
        f"<h2 id=\"verdict\">Verdicts</h2>\n{verdict_html}\n"
        f"{sections_html}\n"
        f"<h2 id=\"provenance\">Provenance</h2>\n{provenance_html}\n"
        "</body></html>\n"
    )
