"""Every bench script still loads and parses its options (a refactor of one bench's helpers
once broke another's import, unnoticed until it was run for a figure)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
HELPERS = ("simproc.py", "demokit.py")  # modules the scripts import, not scripts
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in HELPERS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_loads(script: str, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """``python bench/SCRIPT --help``, run in this process as the interpreter would run it (the
    script as ``__main__``, its folder first on ``sys.path``): its imports are what is checked,
    and those of the engine are already loaded here."""
    monkeypatch.chdir(BENCH)
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "argv", [str(BENCH / script), "--help"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(BENCH / script), run_name="__main__")
    printed = capsys.readouterr()
    assert done.value.code in (0, None), printed.err[-2000:]
    assert "usage:" in printed.out  # it parsed --help, it did not run the bench
