"""Mechanical localisation, before any model is asked: test runners' output read into failures
(``testreport``, ``failures``), the code those failures point at (``localization``), a
tree-sitter symbol map of it (``repomap``) and the repository's own rules for agents
(``reporules``). Pure functions over text and files.
"""

from typing import Any

_TYPES = ("Check", "Localization", "Span")  # checkpoints of runs before 0.3 name them here


def __getattr__(name: str) -> Any:
    if name in _TYPES:
        from orchestrator.localize import localization

        return getattr(localization, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
