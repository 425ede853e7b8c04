# SPDX-License-Identifier: Apache-2.0
"""tiebreak.report draws what tiebreak.torch.ScalarLogger really writes (scalars.jsonl), end to end:
the report's own tests (tests/report) use a fixture in its format because they run without torch.
Skipped where torch or matplotlib is not installed (CI); run on the device (docs/python.md)."""

import json

import pytest

pytest.importorskip("torch", reason="torch is not installed (CI): the tiebreak.torch tests run on the device")
pytest.importorskip("matplotlib", reason="matplotlib is not installed: tiebreak.report needs it")

from tiebreak import report  # noqa: E402
from tiebreak import torch as tbt  # noqa: E402


def test_report_draws_scalar_logger_output(tmp_path):
    with tbt.ScalarLogger(str(tmp_path), tensorboard=False) as log:
        for step in range(0, 50, 10):
            log.log(step, {"loss": 4.0 - 0.05 * step, "grad_norm": float("inf") if step == 20 else 1.0})
            log.log_audit({"schema": "tiebreak.audit/2", "step": step, "module": "attn",
                           "heads": [{"batch": 0, "head": h, "o_mean_error_ulps": 0.01 * (h + 1), "o_t": 2.0 + h}
                                     for h in range(2)]})
    page = tmp_path / "report.html"
    report.render([str(tmp_path / "scalars.jsonl")], str(page))
    text = page.read_text()
    tags = {t for line in (tmp_path / "scalars.jsonl").read_text().splitlines() for t in json.loads(line)["scalars"]}
    assert tags == {"loss", "grad_norm", "attn/b0h0/o_mean_error_ulps", "attn/b0h0/o_t", "attn/b0h1/o_mean_error_ulps",
                    "attn/b0h1/o_t"}
    assert "Training scalars" in text and f">{len(tags)} tags</span>" in text
    assert "Per-head statistics, mean over the audited steps" in text
    for t in tags:
        assert f"<td>{t}</td>" in text
