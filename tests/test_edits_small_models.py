"""Edits a small model can make: replace that tolerates indentation and whitespace drift,
closest lines when nothing matches, line-range edits, the edited text shown back, an unchanged
rewrite refused, and the edit format chosen per model."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.tools import fuzzy
from orchestrator.tools.base import Toolbox
from orchestrator.tools.edit import edit_tools

CART = (
    "class Cart:\n"
    "    def __init__(self, items=None):\n"
    "        self.items = items\n"
    "\n"
    "    def add(self, name):\n"
    "        self.items.append(name)\n"
    "        return len(self.items)\n"
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "cart.py").write_text(CART)
    return tmp_path


@pytest.fixture
def tools(repo: Path) -> Toolbox:
    return Toolbox.of(edit_tools(repo))


async def test_replace_tolerates_indentation_drift_and_reindents_new(tools, repo):
    # the model copied the lines without their class indentation, and with a trailing space
    old = "def __init__(self, items=None):  \n    self.items = items"
    new = "def __init__(self, items=None):\n    self.items = list(items or [])"
    out = await tools.call("replace", {"path": "cart.py", "old": old, "new": new})
    assert out.ok, out.text
    assert "(matched ignoring indentation)" in out.text
    assert "   3>         self.items = list(items or [])" in out.text
    assert (repo / "cart.py").read_text() == CART.replace(
        "self.items = items", "self.items = list(items or [])")


async def test_replace_ignores_blank_lines_and_trailing_spaces(tools, repo):
    old = "    def add(self, name):   \n        self.items.append(name)\n"
    out = await tools.call("replace", {"path": "cart.py", "old": old,
                                       "new": "    def add(self, name):\n        self.items += [name]"})
    assert out.ok and "matched ignoring whitespace" in out.text
    assert "self.items += [name]\n        return len(self.items)" in (repo / "cart.py").read_text()


async def test_not_found_answers_with_the_closest_lines_so_the_next_try_succeeds(tools, repo):
    out = await tools.call("replace", {"path": "cart.py",
                                       "old": "self.item.append(nam)", "new": "x"})
    assert not out.ok and "closest lines (6-6" in out.text
    assert "   6>         self.items.append(name)" in out.text
    retry = await tools.call("replace", {"path": "cart.py", "old": "self.items.append(name)",
                                         "new": "self.items.insert(0, name)"})
    assert retry.ok and "insert(0, name)" in (repo / "cart.py").read_text()


async def test_replace_lines_edits_inserts_and_deletes_by_number(tools, repo):
    out = await tools.call("replace_lines", {"path": "cart.py", "start_line": 3, "end_line": 3,
                                             "new": "        self.items = list(items or [])"})
    assert out.ok and out.text.startswith("replaced lines 3-3 of cart.py with 1 line;")
    assert "   3>         self.items = list(items or [])" in out.text
    out = await tools.call("replace_lines", {"path": "cart.py", "start_line": 1, "end_line": 0,
                                             "new": "import os\n"})
    assert out.ok and "(+1 lines in the file)" in out.text
    assert (repo / "cart.py").read_text().startswith("import os\nclass Cart:\n")
    out = await tools.call("replace_lines", {"path": "cart.py", "start_line": 1, "end_line": 1,
                                             "new": ""})
    assert out.ok and (repo / "cart.py").read_text().startswith("class Cart:\n")
    bad = await tools.call("replace_lines", {"path": "cart.py", "start_line": 5, "end_line": 99,
                                             "new": "x"})
    assert not bad.ok and "end_line must be between 4 and 7" in bad.text


async def test_unchanged_edits_are_refused(tools, repo):
    out = await tools.call("write_file", {"path": "cart.py", "content": CART.rstrip("\n")})
    assert not out.ok and "already has exactly this content" in out.text
    same = await tools.call("replace", {"path": "cart.py", "old": "return len(self.items)",
                                        "new": "return len(self.items)"})
    assert not same.ok and "nothing changed" in same.text


async def test_a_tools_reply_copied_into_an_edit_is_refused_and_the_file_kept(tools, repo):
    # live, the 1.5B wrote replace's own answer over a whole file (handlers.js became
    # "replaced 1 occurrence in handlers.js; lines 1-1 now read:\n   1> function ...")
    reply = ("replaced 1 occurrence in cart.py; lines 3-3 now read:\n"
             "   2|     def __init__(self, items=None):\n   3>         self.items = []\n")
    numbered = "   2|     def __init__(self, items=None):\n   3|         self.items = []\n"
    for tool, args in [
        ("write_file", {"path": "cart.py", "content": reply}),
        ("write_file", {"path": "cart.py", "content": numbered}),
        ("replace", {"path": "cart.py", "old": "self.items = items", "new": reply}),
        ("replace_lines", {"path": "cart.py", "start_line": 3, "end_line": 3, "new": numbered}),
    ]:
        out = await tools.call(tool, args)
        assert not out.ok and "without line numbers" in out.text, (tool, out.text)
        assert (repo / "cart.py").read_text() == CART
    # one numbered-looking line of real code, or a comment quoting a count, is text like any
    ok = await tools.call("replace", {"path": "cart.py", "old": "self.items = items",
                                      "new": "self.items = items  # 2| columns, wrote 3 rows"})
    assert ok.ok, ok.text


def test_edit_format_chooses_the_tools(tmp_path):
    names = {fmt: [t.name for t in edit_tools(tmp_path, edit_format=fmt)]
             for fmt in ("any", "replace", "lines", "patch", "whole")}
    assert names == {"any": ["write_file", "replace", "replace_lines", "apply_patch"],
                     "replace": ["write_file", "replace"], "lines": ["write_file", "replace_lines"],
                     "patch": ["write_file", "apply_patch"], "whole": ["write_file"]}


def test_fuzzy_locate_and_nearest():
    text = "a\n  b = 1\n  c = 2\nd\n"
    (exact,) = fuzzy.locate(text, "b = 1")
    assert exact.how == "exact"
    (loose,) = fuzzy.locate(text, "b = 1\nc = 2")
    assert loose.how == "indentation" and text[loose.start:loose.end] == "  b = 1\n  c = 2"
    assert fuzzy.fit("b = 3\nc = 4", loose) == "  b = 3\n  c = 4"
    assert fuzzy.locate(text, "e = 5") == []
    near = fuzzy.nearest(text, "c = 3")
    assert near is not None and (near.start_line, near.end_line) == (3, 3) and near.ratio > 0.6
