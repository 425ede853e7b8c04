# SPDX-License-Identifier: Apache-2.0
"""tiebreak.report's two functions stay functions: importing the submodule `render` (which load()
does) once rebound the package attribute `render` to the module."""
import pytest

report = pytest.importorskip("tiebreak.report")


def test_render_stays_callable_after_load(tmp_path):
    with pytest.raises(report.ReportError):
        report.load([str(tmp_path / "missing.json")])
    assert callable(report.render) and report.render.__module__ == "tiebreak.report"
    with pytest.raises(report.ReportError):
        report.render([str(tmp_path / "missing.json")], str(tmp_path / "out.html"))
    assert callable(report.render)
