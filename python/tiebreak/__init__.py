# SPDX-License-Identifier: Apache-2.0
"""tiebreak: bit-exact low-precision rounding, emulated sums and tensor cores, and the attention audit.

The numpy API (``tiebreak.round``, ``tiebreak.sum``, ``tiebreak.mma``, ``tiebreak.audit``,
``tiebreak.attention``, ...) lives
in the compiled extension ``tiebreak._core``, which this file imports lazily, on first use of one of
those names: the pure-Python subpackages (``tiebreak.report``) import without it. See docs/python.md.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public names and the module that defines each one (imported on first access).
_LAZY = {
    "round": "tiebreak._api",
    "Rounded": "tiebreak._api",
    "sum": "tiebreak._api",
    "mma": "tiebreak._api",
    "mma_instructions": "tiebreak._api",
    "audit": "tiebreak._api",
    "formats": "tiebreak._api",
    "modes": "tiebreak._api",
    "FLAGS": "tiebreak._api",
    "flag_names": "tiebreak._api",
    "attention": "tiebreak._attention",
    "Attention": "tiebreak._attention",
}
_SUBMODULES = ("analysis", "report", "torch", "ddp")

__all__ = sorted(_LAZY) + list(_SUBMODULES)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later accesses skip this function
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tiebreak' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
