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

# Python side: numpy + ml_dtypes (the comparison benchmark), nanobind + scikit-build-core (the
# Python package's extension, python/: CMake builds it when nanobind is importable) and pytest (its
# tests, ctest python_pytest). Optional: without them the package and its test are left out.
if [ "${TIEBREAK_SKIP_PIP:-0}" != 1 ]; then
  python3 -m pip install -q --disable-pip-version-check numpy ml_dtypes nanobind scikit-build-core pytest || \
    echo "install-deps: pip install numpy ml_dtypes nanobind scikit-build-core pytest failed (the Python package and the comparison benchmark need them)"
fi
