# SPDX-License-Identifier: Apache-2.0
"""Executes the notebooks (notebooks/*.ipynb) with nbclient against the built tiebreak, and checks
that they are committed without outputs.

  notebooks_test.py TIEBREAK NOTEBOOK_DIR WORKDIR [--experiment-json PATH]

Notebook 03 reads the causal experiment's JSON from $TIEBREAK_EXPERIMENT_JSON: PATH when given (the
smoke preset's output, written by the ctest experiment_causal_smoke), else a synthetic FIXTURE that
this script writes with experiment_fixture.py (labelled as such in the file and by the notebook).

Exit code 77 (ctest: skipped) with the reason when nbclient, nbformat, ipykernel or matplotlib is
missing on this machine; CI installs them (tools/install-deps.sh)."""

from __future__ import annotations

import glob
import os
import shutil
import sys


def main() -> int:
    tb, nbdir, work = sys.argv[1:4]
    experiment = None
    if len(sys.argv) == 6 and sys.argv[4] == "--experiment-json":
        experiment = os.path.abspath(sys.argv[5])
    elif len(sys.argv) != 4:
        print(f"usage: {sys.argv[0]} TIEBREAK NOTEBOOK_DIR WORKDIR [--experiment-json PATH]")
        return 1
    try:
        import ipykernel  # noqa: F401
        import matplotlib  # noqa: F401
        import nbclient
        import nbformat
    except ImportError as e:
        print(f"SKIP: {e.name} is not installed for {sys.executable} (tools/install-deps.sh installs it)")
        return 77
    paths = sorted(glob.glob(os.path.join(nbdir, "*.ipynb")))
    if not paths:
        print(f"FAIL: no notebooks in {nbdir}")
        return 1
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    os.environ["TIEBREAK_CLI"] = tb
    if experiment is None:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import experiment_fixture  # FIXTURE: synthetic series, until the smoke run is wired in (CMakeLists.txt)
        experiment = os.path.join(work, "experiment_fixture.json")
        experiment_fixture.causal(experiment)
        print(f"notebook 03 reads a synthetic FIXTURE: {experiment}")
    elif not os.path.isfile(experiment):
        print(f"FAIL: --experiment-json {experiment}: no such file (did experiment_causal_smoke run?)")
        return 1
    os.environ["TIEBREAK_EXPERIMENT_JSON"] = experiment
    os.environ["MPLBACKEND"] = "Agg"
    failed = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        dirty = [i for i, c in enumerate(nb.cells)
                 if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
        if dirty:
            print(f"FAIL: {path}: committed with outputs in code cells {dirty} (clear them: "
                  f"jupyter nbconvert --clear-output --inplace {os.path.basename(path)})")
            failed += 1
            continue
        client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                         resources={"metadata": {"path": work}})
        try:
            client.execute()
        except nbclient.exceptions.CellExecutionError as e:
            print(f"FAIL: {path}:\n{e}")
            failed += 1
            continue
        nbformat.write(nb, os.path.join(work, os.path.basename(path)))  # executed copy, for reading
        print(f"ok: {os.path.basename(path)} ({len(nb.cells)} cells)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
