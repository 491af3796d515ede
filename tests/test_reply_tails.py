"""``bench/reply_tails.py``: where a one-line reply has given its line, and what stopping it there
would lose, read with the engine's reader on a live task's own file."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"

FIX = "11: return items[start:start + size]"
# a fence that held code, then more said after it: the edit is the fence's
FENCED = f"The slice drops the last item.\n```python\n{FIX}\n```\nThis keeps every item.\n"
# numbered lines outside a fence, then a sentence that corrects them: cut, the first reading
CORRECTED = (f"The slice is off.\n10: start = number * size\n\nNo, line 10 is right; the fix "
             f"is:\n```\n{FIX}\n```\n")
LAST = f"The slice drops the last item, so the fix is this line.\n{FIX}"  # nothing after it


def _given_at():  # the script's function, imported as the script runs (its folder on the path)
    return runpy.run_path(str(BENCH / "reply_tails.py"))["given_at"]


def test_the_line_is_given_at_a_closed_fence_or_after_numbered_lines() -> None:
    given_at = _given_at()
    assert FENCED[:given_at(FENCED)].endswith("```\n")
    assert CORRECTED[:given_at(CORRECTED)].endswith("10: start = number * size\n")
    assert given_at(LAST) is None
    assert given_at("```\n```\nnothing in it\n") is None  # an empty fence gives no line


def test_the_figures_count_the_text_after_and_the_edits_read_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"task": "py-paging", "span": "paging.py:6-11", "reply": r, "passed": p}
            for r, p in ((FENCED, True), (CORRECTED, True), (LAST, False))]
    kept = tmp_path / "samples.json"
    kept.write_text(json.dumps(rows), encoding="utf-8")
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "argv", [str(BENCH / "reply_tails.py"), str(kept)])
    runpy.run_path(str(BENCH / "reply_tails.py"), run_name="__main__")
    printed = capsys.readouterr().out
    after = len("This keeps every item.\n") + len(CORRECTED) - CORRECTED.index("\nNo,")
    total = len(FENCED) + len(CORRECTED) + len(LAST)
    assert "3 one-line replies (2 passed); 2 gave their line before their end" in printed
    assert f"({after} of {total} characters)" in printed
    # cut, the corrected reply reads line 10's wrong change instead of line 11's fix
    assert "read to a different edit when stopped there: 1 (1 of them had passed)" in printed
