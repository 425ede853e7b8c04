# SPDX-License-Identifier: Apache-2.0
"""tiebreak.report: one self-contained HTML page from the JSON tiebreak writes (docs/report.md).

Pure Python (matplotlib, numpy); needs no compiled extension. `python3 -m tiebreak.report IN... -o
OUT.html` is what `tiebreak report` runs.
"""

from .inputs import ReportError, num, read_input

__all__ = ["ReportError", "num", "read_input", "render", "load"]


def render(paths, output, **kw):
    """Writes the report of `paths` to `output` (render.render; imports matplotlib on first use)."""
    from .render import render as _render
    return _render(paths, output, **kw)


def load(paths):
    """Reads and classifies the inputs (render.load)."""
    from .render import load as _load
    return _load(paths)
