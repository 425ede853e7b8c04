# SPDX-License-Identifier: Apache-2.0
"""Which JSON is which: the registry of report kinds.

A kind says how to recognise a document (its `schema` family and versions, or for the schema-less
JSON of `tiebreak demo` and `tiebreak analyze` a test on its fields), which fields it needs, and how
to draw it: verdict rows for the table on top, provenance for the table at the bottom, one section
for all inputs of the kind (drawn side by side).

A new kind plugs in here, with one more `Kind(...)` in KINDS and a module beside this one. Kinds
that share a schema family (tiebreak.experiment/1: causal and bisect) tell their documents apart by
`detect` (the field `kind`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import import_module
from typing import Callable

from .inputs import Input, ReportError


def _page(name: str) -> Callable:
    """`module.function` of this package, imported on first call: reading and classifying the inputs
    (and so every error about them) needs neither matplotlib nor numpy."""
    module, fn = name.split(".")
    return lambda *args: getattr(import_module(f".{module}", __package__), fn)(*args)


@dataclass(frozen=True)
class Kind:
    name: str                     # short name shown in the tables ("audit")
    schema: str | None            # schema family ("tiebreak.audit"), None for schema-less JSON
    versions: tuple = ()          # schema versions this page reads
    detect: Callable[[dict], bool] | None = None  # does this document look like ours? (schema-less JSON, or
    #                                               kinds sharing one schema family)
    required: tuple = ()          # dotted field paths every document must have
    verdicts: Callable = None     # Input -> [(verdict cell, detail text)]
    provenance: Callable = None   # Input -> {"shape", "data", "command_line", "version"}
    section: Callable = None      # [Input] -> HTML of the kind's section
    whole_lines: bool = False     # a JSON Lines file is one input (its lines drawn together); otherwise each
    #                               line becomes an input of its own (tiebreak.torch's audits.jsonl)


KINDS = (
    Kind("audit", "tiebreak.audit", (1, 2), required=("shape.batch", "shape.heads", "heads", "summary.verdict"),
         verdicts=_page("attention.audit_verdicts"), provenance=_page("attention.audit_provenance"), section=_page("attention.audit_section")),
    Kind("attention probe", "tiebreak.attention_probe", (1,), required=("problem.batch", "problem.heads", "heads", "total", "options.mode"),
         verdicts=_page("attention.probe_verdicts"), provenance=_page("attention.probe_provenance"), section=_page("attention.probe_section")),
    Kind("audit-gemm", "tiebreak.audit-gemm", (1,), required=("shape.M", "elements", "error_ulps", "verdict.biased"),
         verdicts=_page("gemm.verdicts"), provenance=_page("gemm.provenance"), section=_page("gemm.section")),
    Kind("demo", None, detect=lambda d: {"domain", "rows", "pairs", "ties"} <= d.keys(), required=("rows", "seed"),
         verdicts=_page("attention.demo_verdicts"), provenance=_page("attention.demo_provenance"), section=_page("attention.demo_section")),
    Kind("analyze align", None, detect=lambda d: d.get("command") == "align" and "steps" in d,
         required=("steps", "cosine", "principal_angles_deg"),
         verdicts=_page("analyze.align_verdicts"), provenance=_page("analyze.align_provenance"), section=_page("analyze.align_section")),
    Kind("analyze spectral", None, detect=lambda d: {"spectral_norm", "file", "stable_rank"} <= d.keys(),
         required=("spectral_norm", "frobenius_norm"),
         whole_lines=True, verdicts=_page("analyze.spectral_verdicts"), provenance=_page("analyze.spectral_provenance"), section=_page("analyze.spectral_section")),
    Kind("analyze bias", None, detect=lambda d: {"drift", "sign_test", "bootstrap", "file"} <= d.keys(),
         required=("mean", "t", "p_value", "drift.first_alarm"),
         whole_lines=True, verdicts=_page("analyze.bias_verdicts"), provenance=_page("analyze.bias_provenance"), section=_page("analyze.bias_section")),
    Kind("experiment causal", "tiebreak.experiment", (1,), detect=lambda d: d.get("kind") == "experiment_causal",
         required=("config.heads", "modes", "data", "cells", "groups", "conclusion.reproduced", "conclusion.text"),
         verdicts=_page("experiment.causal_verdicts"), provenance=_page("experiment.causal_provenance"),
         section=_page("experiment.causal_section")),
    Kind("experiment bisect", "tiebreak.experiment", (1,), detect=lambda d: d.get("kind") == "experiment_bisect",
         required=("config", "remedy", "data", "seed", "baseline.excess_log_sigma", "baseline.verdict", "trials", "result"),
         verdicts=_page("experiment.bisect_verdicts"), provenance=_page("experiment.bisect_provenance"),
         section=_page("experiment.bisect_section")),
    Kind("torch scalars", "tiebreak.scalars", (1,), required=("step", "scalars"), whole_lines=True,
         verdicts=_page("scalars.verdicts"), provenance=_page("scalars.provenance"), section=_page("scalars.section")),
)

KNOWN_TEXT = ("tiebreak.audit/1-2, tiebreak.attention_probe/1, tiebreak.audit-gemm/1, tiebreak.experiment/1 "
              "(causal, bisect), tiebreak.scalars/1 (tiebreak.torch's scalars.jsonl), and the --json of "
              "tiebreak demo and tiebreak analyze spectral|align|bias")


def _kind_of(doc: dict, where: str) -> Kind:
    schema = doc.get("schema")
    if schema is not None:
        if not isinstance(schema, str):
            raise ReportError(f"{where}: field 'schema' is not a string")
        family, _, version = schema.partition("/")
        same = [k for k in KINDS if k.schema == family]
        for k in same:
            if not version.isdigit() or int(version) not in k.versions:
                raise ReportError(f"{where}: schema '{schema}' is not supported by this report "
                                  f"(it reads {family}/{', /'.join(str(v) for v in k.versions)})")
            if k.detect is None or k.detect(doc):
                return k
        if same:
            raise ReportError(f"{where}: {schema} document of kind {json.dumps(doc.get('kind'))[:60]}, which this "
                              f"report does not draw (it reads the kinds {', '.join(k.name for k in same)})")
        raise ReportError(f"{where}: unknown schema '{schema}' (tiebreak report reads {KNOWN_TEXT})")
    for k in KINDS:
        if k.schema is None and k.detect is not None and k.detect(doc):
            return k
    raise ReportError(f"{where}: not a JSON that tiebreak report knows: no 'schema' field and not the output of a "
                      f"known command (it reads {KNOWN_TEXT})")


def _check_fields(doc: dict, kind: Kind, where: str) -> None:
    for path in kind.required:
        node = doc
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                raise ReportError(f"{where}: {kind.name} JSON without the field '{path}' (truncated or edited file?)")
            node = node[part]


def classify(inp: Input) -> Kind:
    """Sets and returns inp.kind; every document of a JSON Lines file must be of one kind."""
    kinds = []
    for i, doc in enumerate(inp.docs):
        where = inp.path if len(inp.docs) == 1 else f"{inp.path}: line {i + 1}"
        k = _kind_of(doc, where)
        _check_fields(doc, k, where)
        kinds.append(k)
    if any(k is not kinds[0] for k in kinds):
        raise ReportError(f"{inp.path}: JSON Lines that mix kinds ({kinds[0].name} and "
                          f"{next(k for k in kinds if k is not kinds[0]).name}); give each kind its own file")
    inp.kind = kinds[0]
    return inp.kind
