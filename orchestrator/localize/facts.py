"""A failing test's assertion restated as a fact: what the code returned and what the test
expects, with the values the test runner printed.

Pure functions over a parsed failure (``testreport.parse``). pytest prints the assertion's
source on the frame line (``assert page(items, 1, 3) == [1, 2, 3]``) and its values on the
``E`` lines (``assert [1, 2] == [1, 2, 3]``, and ``+  where 2 = median([1, 2, 3, 4])`` for a
call it could name); unittest prints ``AssertionError: 2 != 2.5``. ``facts`` pairs the source's
sides with the values: "`page(items, 1, 3)` returned `[1, 2]`, the test expects `[1, 2, 3]`".
An error that is not an assertion becomes "`<line>` raised ZeroDivisionError: ...".

unittest shortens long sequences and dicts on its first line (``Lists differ: ['202[56
chars]s', ...]``) and prints their difference below it: its items are the fact
("`self.report("slow")` lacks `'... GET /api/orders ... 1840 ms'`, which the test expects";
"has `'pension': Decimal('40.89')` where the test expects `'pension': Decimal('40.90')`"), not
the shortened line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from orchestrator.localize.testreport import FailureReport, TestFailure

MAX_FACTS = 4
MAX_VALUE = 300
_COMPARE = re.compile(r"^assert (?P<left>.+?) (?P<op>==|!=|<=|>=|<|>|is not|is|not in|in) "
                      r"(?P<right>.+)$")
_WHERE = re.compile(r"^\+\s*where (?P<value>.+?) = (?P<call>.+)$")
_UNITTEST = re.compile(r"^AssertionError: (?P<left>.+?) (?P<op>!=|==|not less than|not greater "
                       r"than) (?P<right>.+)$")
_SHORTENED = re.compile(r"^AssertionError: .*\[\d+ chars\].* != ")
_ITEM = re.compile(r"^First differing element (?P<index>\d+):$")
_RAISED = re.compile(r"^(?P<exc>(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception))(?::\s*(?P<msg>.*))?$")
_EXPECTS = {"==": "", "!=": "something other than ", "<": "less than ", "<=": "at most ",
            ">": "more than ", ">=": "at least ", "is": "", "is not": "not ",
            "in": "it to be in ", "not in": "it not to be in "}


def _short(value: str) -> str:
    value = " ".join(value.split())
    return value if len(value) <= MAX_VALUE else value[: MAX_VALUE - 3] + "..."


def fact(failure: TestFailure) -> str | None:
    """The failure's assertion (or error) as one sentence, or None when it shows no values."""
    errors = [e.strip() for e in failure.error if e.strip()]
    source = failure.frames[-1].code.strip() if failure.frames else ""
    wheres = {m["value"]: m["call"] for e in errors if (m := _WHERE.match(e))}
    if errors and _SHORTENED.match(errors[0]) and (said := _differ(errors, source)):
        return said
    for e in errors:
        m = _COMPARE.match(e)
        if m:
            return _compared(m["left"], m["op"], m["right"], source, wheres)
        m = _UNITTEST.match(e)
        if m:  # ``assertEqual(got, expected)`` says ``got != expected``
            op = {"!=": "==", "==": "!="}.get(m["op"], m["op"])
            args = _arguments(source)
            named = f"assert {args[0]} {op} {args[1]}" if len(args) >= 2 else source
            return _compared(m["left"], op, m["right"], named, wheres)
    for e in errors:
        m = _RAISED.match(e)
        if m and m["exc"] != "AssertionError":
            said = f"{m['exc']}: {m['msg']}" if m["msg"] else m["exc"]
            return (f"`{_short(source)}` raised {_short(said)}" if source
                    else f"the test raised {_short(said)}")
    return None


def _differ(errors: list[str], source: str) -> str | None:
    """unittest's difference of two shortened values: the items the first has where the
    second has others (its ndiff ``-`` and ``+`` lines, paired when they pair), else its first
    differing item."""
    args = _arguments(source if source.rstrip().endswith(")") else source.rstrip() + ")")
    name = f"`{_short(args[0])}`" if args else "the result"
    minus = [x for e in errors if e.startswith("- ") for x in _items_of(e[1:])]
    plus = [x for e in errors if e.startswith("+ ") for x in _items_of(e[1:])]
    extra = [x for x in minus if x not in plus]  # a short value's line holds all its items
    lacks = [x for x in plus if x not in minus]
    if extra and len(extra) == len(lacks):
        return f"{name} has " + "; ".join(
            f"`{_short(x)}` where the test expects `{_short(y)}`"
            for x, y in list(zip(extra, lacks, strict=True))[:3])
    said = []
    if lacks:
        said.append(f"{name} lacks {_items(lacks)}, which the test expects")
    if extra:
        said.append(f"{name} has {_items(extra)}, which the test does not expect")
    if said:
        return "; ".join(said)
    for i, e in enumerate(errors[:-2]):
        if m := _ITEM.match(e):
            return (f"item {m['index']} of {name} is `{_short(errors[i + 1])}`, the test "
                    f"expects `{_short(errors[i + 2])}`")
    return None


def _items_of(line: str) -> list[str]:
    """The items on one line of a pretty-printed sequence or dict: one, without the bracket
    that opens or closes the whole and its trailing comma; or all of a value printed whole."""
    item = line.strip().rstrip(",")
    if item[:1] in "[({" and _depth(item) > 0:
        item = item[1:]
    if item[-1:] in ")]}" and _depth(item) < 0:
        item = item[:-1]
    item = item.rstrip(",").strip()
    if item[:1] + item[-1:] in ("[]", "()", "{}") and _depth(item[1:-1]) == 0:
        return _arguments(f"({item[1:-1]})")
    return [item] if item else []


def _depth(text: str) -> int:
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


def _items(items: list[str]) -> str:
    shown = ", ".join(f"`{_short(x)}`" for x in items[:3])
    return shown + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _compared(left: str, op: str, right: str, source: str, wheres: dict[str, str]) -> str:
    """``left op right`` as printed, named by the assertion's source where it can be."""
    if op == "==" and right in wheres and left not in wheres:  # ``assert 3 == f(x)``
        return f"`{_short(wheres[right])}` returned `{_short(right)}`, the test expects " \
               f"`{_short(left)}`"
    expr = wheres.get(left)
    src = _COMPARE.match(source)
    if expr is None and src is not None and src["op"] == op:
        expr = src["left"]
    op = {"not less than": ">=", "not greater than": "<="}.get(op, op)
    expects = _EXPECTS.get(op, op + " ")
    if expr is None or expr == left:
        return f"the test got `{_short(left)}` where it expects {expects}`{_short(right)}`"
    verb = "returned" if "(" in expr else "is"
    return f"`{_short(expr)}` {verb} `{_short(left)}`, the test expects {expects}`{_short(right)}`"


def _arguments(source: str) -> list[str]:
    """The top-level arguments of the call on ``source`` (``self.assertEqual(f(1, 2), 3)``)."""
    start = source.find("(")
    if start < 0 or not source.rstrip().endswith(")"):
        return []
    inner, out, depth, cur = source.rstrip()[start + 1:-1], [], 0, ""
    for ch in inner:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()] if cur.strip() else out


def facts(reports: Iterable[FailureReport]) -> list[str]:
    """One fact per failing test that shows values, each named by its test, repeats dropped."""
    out: dict[str, str] = {}
    for report in reports:
        for failure in report.failures:
            said = fact(failure)
            if said and said not in out:
                out[said] = f"{failure.name}: {said}" if failure.name != "(command)" else said
    return list(out.values())[:MAX_FACTS]
