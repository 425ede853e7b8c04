# SPDX-License-Identifier: Apache-2.0
"""tiebreak.report: one self-contained HTML page from the JSON tiebreak writes (docs/report.md).

Pure Python (matplotlib, numpy); needs no compiled extension. `python3 -m tiebreak.report IN... -o
OUT.html` is what `tiebreak report` runs.
"""

from .inputs import ReportError, num, read_input

__all__ = ["ReportError", "num", "read_input", "render", "load"]


def _module():
    """The submodule `render`. Importing it binds the package attribute `render` to the module,
    over the function of that name: put the function back, so `report.render(...)` keeps working
    after `report.load(...)`."""
    import importlib
    mod = importlib.import_module(".render", __name__)
    globals()["render"] = _render_function
    return mod


def render(paths, output, **kw):
    """Writes the report of `paths` to `output` (render.render; imports matplotlib on first use)."""
    return _module().render(paths, output, **kw)


_render_function = render


def load(paths):
    """Reads and classifies the inputs (render.load)."""
    return _module().load(paths)
