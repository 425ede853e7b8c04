#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every build and test dependency of tiebreak on a fresh Debian machine.
# Idempotent; run as root (CI is root) or with sudo available.
#   tools/install-deps.sh            what tools/dev needs
#   tools/install-deps.sh sanitize   also clang and its runtimes (ASan, UBSan, libFuzzer) for
#                                    tools/sanitize.sh
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

debs=(
  cmake ninja-build g++ make pkg-config git
  libboost-dev            # Boost.Multiprecision (header-only) for the exact reference
  libeigen3-dev           # Eigen 3.4 for analysis/
  libfmt-dev              # fmt
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev        # Google Benchmark
  libcli11-dev            # CLI11
  nlohmann-json3-dev      # nlohmann/json
  python3 python3-pip python3-venv python3-dev   # python3-dev: headers for the extension (python/)
  chromium                # headless, for the report test (tests/report: every figure renders, screenshot)
)
if [ "${1:-}" = sanitize ]; then
  debs+=(clang libclang-rt-dev)  # Debian's default clang (14 on bookworm) and libclang_rt.{asan,ubsan,fuzzer}
fi

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# Python side: what the benchmarks compare against (numpy + ml_dtypes; optional); nanobind,
# scikit-build-core and pytest for the Python package (python/: CMake builds its extension when
# nanobind is importable, ctest python_pytest runs pytest; without them both are left out); and what
# `tiebreak report` and the notebooks need (matplotlib; nbclient, nbformat and ipykernel run the
# notebooks in their ctest). The report tests skip without them, so a failure here stops the script:
# CI must run them. About 40 s on a fresh machine (docs/report.md).
if [ "${TIEBREAK_SKIP_PIP:-0}" != 1 ]; then
  python3 -m pip install -q --disable-pip-version-check numpy ml_dtypes || \
    echo "install-deps: pip install numpy ml_dtypes failed (only the comparison benchmark needs them)"
  py_pips=(nanobind scikit-build-core pytest)
  if ! python3 -c "import nanobind, scikit_build_core, pytest" 2>/dev/null; then
    python3 -m pip install -q --disable-pip-version-check "${py_pips[@]}" 2>/dev/null || \
      python3 -m pip install -q --disable-pip-version-check --break-system-packages "${py_pips[@]}" || \
      echo "install-deps: pip install ${py_pips[*]} failed (the Python package and its test are left out)"
  fi
  report_pips=(matplotlib nbclient nbformat ipykernel)
  if ! python3 -c "import matplotlib, nbclient, nbformat, ipykernel" 2>/dev/null; then
    # Debian's own python3 refuses pip outside a venv (PEP 668) unless told otherwise.
    python3 -m pip install -q --disable-pip-version-check "${report_pips[@]}" 2>/dev/null || \
      python3 -m pip install -q --disable-pip-version-check --break-system-packages "${report_pips[@]}"
  fi
fi
