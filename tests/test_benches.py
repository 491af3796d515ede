"""Every bench script still loads and parses its options (a refactor of one bench's helpers
once broke another's import, unnoticed until it was run for a figure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
HELPERS = ("simproc.py", "demokit.py")  # modules the scripts import, not scripts
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in HELPERS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_loads(script: str) -> None:
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], cwd=BENCH,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout  # it parsed --help, it did not run the bench
