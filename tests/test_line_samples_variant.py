"""``bench/line_samples.py --with-uses``: the variant of the one-line request's place tried and
set aside (r62-place-uses), shown from the module-level definitions above it that it uses."""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

from orchestrator.benchmark import load_suite
from orchestrator.engine.places import FOUND_LINES
from orchestrator.localize.localization import Span

BENCH = str(Path(__file__).resolve().parent.parent / "bench")


def _script() -> dict:
    sys.path.insert(0, BENCH)  # the script imports its neighbours
    try:
        return runpy.run_path(str(Path(BENCH) / "line_samples.py"))
    finally:
        sys.path.remove(BENCH)


def _unit(body: str, name: str, path: str = "m.py") -> Span:
    """The top-level definition ``name`` of ``body``: its line to the last indented line."""
    lines = body.splitlines()
    start = next(n for n, line in enumerate(lines, 1)
                 if re.match(rf"(def|function)\s+{name}\b", line))
    end = start
    while end < len(lines) and lines[end][:1] in (" ", "}"):
        end += 1
    return Span(path=path, start=start, end=end, focus=start,
                text=tuple(lines[start - 1:end]), why="")


def test_the_place_is_shown_from_the_definitions_above_it_that_it_uses() -> None:
    script = _script()
    with_uses, near = script["with_uses"], script["NEAR_USES"]
    task = next(t for t in load_suite("live").tasks if t.name == "xp-parcel-weight")
    body = (task.repo / task.sim.path).read_text(encoding="utf-8")
    to_kg = _unit(body, "to_kg", task.sim.path)
    shown = with_uses(to_kg, body)  # from KG_PER, through _factor, which it calls
    assert (shown.start, shown.end, shown.focus) == (3, to_kg.end, to_kg.focus)
    assert shown.text[0].startswith("KG_PER = ") and shown.text[-1] == to_kg.text[-1]
    assert with_uses(_unit(body, "_factor"), body) == _unit(body, "_factor")  # uses nothing
    unused = "A = 1\nB_TABLE = {1: 2}\n\n\ndef f(x):\n    return x\n\n\ndef g(x):\n" \
             "    return f(x) * 2\n"
    assert with_uses(_unit(unused, "g"), unused).start == 5  # from f, not from what g skips
    far = "LIMIT = 3\n" + "\n" * near + "def check(x):\n    return x < LIMIT\n"
    assert with_uses(_unit(far, "check"), far) == _unit(far, "check")
    long = "RATES = {\n" + "    1: 2,\n" * FOUND_LINES + "}\n\n\ndef rate(p):\n" \
           "    return RATES[p]\n"
    assert with_uses(_unit(long, "rate"), long) == _unit(long, "rate")  # over FOUND_LINES
    js = "'use strict';\nconst ADDRESS_FOR = {\n  label: 'billing',\n};\n\n" \
         "function addressFor(order, document) {\n  return ADDRESS_FOR[document];\n}\n"
    assert with_uses(_unit(js, "addressFor", "r.js"), js).start == 2  # the table it reads
