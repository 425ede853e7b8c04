# SPDX-License-Identifier: Apache-2.0
"""Reading the JSON tiebreak writes: one document or JSON Lines, numbers per docs/json.md."""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field


class ReportError(Exception):
    """A problem with the arguments or an input: one line, exit code 2 (the CLI's contract)."""


def num(value) -> float:
    """A JSON number of tiebreak's as a float: numbers as they are, the strings "inf", "-inf" and
    "nan" as the non-finite values they stand for (docs/json.md), null (no value) as NaN."""
    if value is None:
        return math.nan
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    raise ReportError(f"expected a number, found {json.dumps(value)[:40]}")


@dataclass
class Input:
    """One input file: its documents (one, or one per line of a JSON Lines file) and its kind."""

    path: str
    docs: list
    size: int
    sha256: str
    kind: object = None  # kinds.Kind, set by kinds.classify
    label: str = ""      # short name used in figures ("A: run.json")
    extra: dict = field(default_factory=dict)

    @property
    def doc(self) -> dict:
        return self.docs[0]


def _reject_constant(name: str):
    # json.loads accepts NaN/Infinity, which tiebreak never writes (docs/json.md).
    raise ValueError(f"'{name}' is not JSON (tiebreak writes non-finite numbers as strings)")


def _parse(text: str, where: str):
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise ReportError(f"{where}: malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:
        raise ReportError(f"{where}: malformed JSON: {e}") from None


def read_input(path: str) -> Input:
    """Reads `path`: a JSON document, or JSON Lines (one object per line, as `tiebreak analyze
    spectral|bias` print for several files). Every document must be a JSON object."""
    if os.path.isdir(path):
        raise ReportError(f"{path}: is a directory (expected a JSON file)")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except OSError as e:
        raise ReportError(f"{path}: cannot read: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ReportError(f"{path}: malformed JSON: not UTF-8 (byte {e.start})") from None
    if not text.strip():
        raise ReportError(f"{path}: malformed JSON: the file is empty")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    try:
        docs = [json.loads(text, parse_constant=_reject_constant)]
    except (json.JSONDecodeError, ValueError):
        if len(lines) < 2:
            _parse(text, path)  # raises with the decoder's position
        docs = [_parse(ln, f"{path}: line {i + 1}") for i, ln in enumerate(lines)]
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            where = path if len(docs) == 1 else f"{path}: line {i + 1}"
            raise ReportError(f"{where}: not a JSON object (tiebreak writes objects), found {type(d).__name__}")
    return Input(path=path, docs=docs, size=len(raw), sha256=hashlib.sha256(raw).hexdigest())
