# SPDX-License-Identifier: Apache-2.0
"""tiebreak: Python side of the project (this minimal file imports nothing, so that
``tiebreak.report`` runs without the compiled extension; see docs/report.md)."""
