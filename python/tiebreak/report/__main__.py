# SPDX-License-Identifier: Apache-2.0
"""`python3 -m tiebreak.report RUN.json [MORE.json ...] -o report.html` (what `tiebreak report` runs).

Error contract of the tiebreak CLI: every problem is one line `tiebreak: error: ...` on stderr and
exit code 2; nothing on stdout."""

from __future__ import annotations

import argparse
import json
import sys


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: one line, exit 2
        sys.stderr.write(f"tiebreak: error: report: {message}\n")
        sys.exit(2)


def main(argv=None) -> int:
    ap = _Parser(prog="tiebreak report", description="One self-contained HTML report from tiebreak's JSON.")
    ap.add_argument("inputs", nargs="+", metavar="RUN.json")
    ap.add_argument("-o", "--output", required=True, metavar="report.html")
    ap.add_argument("--tool-version", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--invoked-as", default=None, help=argparse.SUPPRESS)  # JSON list: the tiebreak command line
    args = ap.parse_args(argv)
    from importlib.util import find_spec

    def missing(name):
        sys.stderr.write(f"tiebreak: error: report: {name} is not installed for {sys.executable}: pip install matplotlib\n")
        return 2

    # Checked before the inputs are read (cheap: finds, does not import); an installation that is
    # found but breaks on import is caught where render imports it.
    for name in ("matplotlib", "numpy"):
        if find_spec(name) is None:
            return missing(name)
    from .inputs import ReportError
    from .render import render
    invoked = None
    if args.invoked_as is not None:
        try:
            invoked = json.loads(args.invoked_as)
        except ValueError:
            invoked = args.invoked_as
    try:
        render(args.inputs, args.output, invoked_as=invoked, tool_version=args.tool_version)
    except ReportError as e:
        sys.stderr.write(f"tiebreak: error: {' '.join(str(e).split())}\n")
        return 2
    except ImportError as e:
        if e.name in (None, "matplotlib", "numpy") or (e.name or "").startswith(("matplotlib.", "numpy.")):
            return missing(f"a working {e.name or 'matplotlib'} ({e})")
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
