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
    try:
        import matplotlib  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        sys.stderr.write(f"tiebreak: error: report: {e.name or 'matplotlib'} is not installed for {sys.executable}: "
                         f"pip install matplotlib\n")
        return 2
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
