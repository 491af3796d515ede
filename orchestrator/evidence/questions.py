"""The planner's questions for explorers, cleaned before any explorer is paid for.

Small planners copy their own prompt into the questions ("Two to six is usually right.", the
template's placeholder question), repeat themselves, or ask what names nothing ("What does the
function do?"); each such question would start an explorer that answers nothing new. Pure
functions: ``clean`` drops empty questions, sentences lifted from the planner's prompt (whole,
or mostly: half its words in runs of five the instructions hold),
questions with nothing to search for (no name, flag, quoted text, path or informative word:
what retrieval looks for), duplicates (ignoring case, spacing, punctuation and spelling), and
questions that search for what an earlier one does but for the kind of thing asked about,
and says why for each one dropped. ``from_terms`` asks about the task's own specific names when
a planner asked nothing worth an explorer.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from orchestrator.localize.retrieve import Term, terms

SPELLING = 0.85  # two long words this alike are one word spelt two ways (initialised/-ized)
_NON_WORD = re.compile(r"[^\w]+")


def normalize(text: str) -> str:
    """Lower case, words only, single spaces."""
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def clean(questions: Sequence[str], *, prompt: Sequence[str] = (), allowed: Sequence[str] = (),
          task: str = "") -> tuple[list[str], list[str]]:
    """``(kept, reasons)``: the questions worth an explorer, in order, and why the others went.

    ``prompt`` holds the texts the planner was given; a question found in them is a copy,
    unless it is one of ``allowed`` (in explore mode the user's question is a fine question).
    Given the ``task``, a question of plain words only (no name, flag, quote or path) must share
    one with it: "What is the function called?" or a tool note ("Call only: submit.") searches
    for nothing the task is about.
    """
    source = normalize("\n".join(prompt))
    # the planner's instructions without the task: a question that is mostly their words was
    # lifted from them, even when it adds a word or is cut short (the 0.5B asked "What is the
    # function, class, setting, flag, message or file ('Where is <name> computed?', never ...")
    told = _grams(source.replace(normalize(task), " ") if task else source)
    about = set(normalize(task).split())
    ok = {normalize(a) for a in allowed}
    kept: list[str] = []
    seen: list[str] = []
    looked: list[frozenset[str]] = []
    reasons: list[str] = []
    for raw in questions:
        q = " ".join(raw.split())
        key = normalize(q)
        if len(key.split()) < 2:
            reasons.append(f"{q!r}: too short to be a question")
        elif key not in ok and (key in source or _lifted(key, told)):
            reasons.append(f"{q!r}: copied from the planner's own prompt")
        elif key not in ok and not terms(q):
            reasons.append(f"{q!r}: names nothing to search for (a function, flag, message "
                           "or file)")
        elif key not in ok and about and _off_task(q, about):
            reasons.append(f"{q!r}: names no code and nothing the task mentions")
        elif any(_same(key, s) for s in seen):
            reasons.append(f"{q!r}: the same as an earlier question")
        elif (searched := _searched(q)) and searched in looked:
            reasons.append(f"{q!r}: searches for what an earlier question does")
        else:
            kept.append(q)
            seen.append(key)
            looked.append(searched)
    return kept, reasons


# the kinds of thing the planner's prompt lists ("a function, class, setting, flag, message or
# file"): asked once per kind about the same words, the live 0.5B's four questions brought four
# explorers the same windows (xp-js-label-address, r18: 80 s for one finding)
KINDS = frozenset({"function", "class", "set", "setting", "flag", "option", "message", "file",
                   "method", "variable", "constant", "value", "code"})


def _searched(question: str) -> frozenset[str]:
    """What retrieval would search a question for, the kind of thing it asks about aside."""
    return frozenset(t.pattern.lower() for t in terms(question)) - KINDS


GRAM = 5  # words in a row that a question and the planner's instructions share: lifted
LIFTED = 0.5  # the share of a question's words in such runs that makes it a copy


def _grams(text: str) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i:i + GRAM]) for i in range(len(words) - GRAM + 1)}


def _lifted(key: str, told: set[tuple[str, ...]]) -> bool:
    """At least half of the question's words lie in runs of ``GRAM`` that the instructions
    hold."""
    words = key.split()
    if len(words) < GRAM:
        return False
    covered = [False] * len(words)
    for i in range(len(words) - GRAM + 1):
        if tuple(words[i:i + GRAM]) in told:
            covered[i:i + GRAM] = [True] * GRAM
    return sum(covered) >= LIFTED * len(words)


def _off_task(question: str, about: set[str]) -> bool:
    """Plain words only, and none of them (nor a word they start) in the task."""
    found = terms(question)
    if any(t.kind != "word" for t in found):
        return False
    return not any(w.startswith(t.pattern.lower()) for t in found for w in about)


def _same(a: str, b: str) -> bool:
    """The same words in the same order, allowing a long word to be spelt differently; a
    different name (`median` vs `mean`) is a different question."""
    wa, wb = a.split(), b.split()
    return len(wa) == len(wb) and all(
        x == y or (min(len(x), len(y)) >= 6
                   and difflib.SequenceMatcher(None, x, y).ratio() >= SPELLING)
        for x, y in zip(wa, wb, strict=True))


def from_terms(specific: Sequence[Term], task: str) -> list[str]:
    """Questions about the names ``task`` quotes or spells (``Retriever.specific``): one each,
    shaped for a search ("Where does the code handle `newest`?"); a word as the task spells it,
    not its stem."""
    out = []
    for t in specific:
        if t.kind == "flag":
            out.append(f"Where does the code read the `{t.pattern}` option, and what does it do "
                       "with its value?")
        elif t.kind == "quoted":
            out.append(f"Where does the code make the text \"{t.pattern}\"?")
        elif t.kind == "name":
            out.append(f"Where is `{t.pattern}` defined, and what does it call?")
        else:
            spelt = re.search(rf"(?i)\b{re.escape(t.pattern)}\w*", task)
            out.append(f"Where does the code handle `{spelt.group(0) if spelt else t.pattern}`?")
    return out


CLUE_FILES = 2  # a failing test's word in more source files than this names a topic, not a place


@dataclass(frozen=True)
class Clue:
    """The rarest word of a failing test's name that the code holds (``failing_clue``)."""

    term: Term
    title: str  # the test's name as words
    files: int  # the source files (not tests) that hold it
    spelt: str  # as the code spells it most (`Gold` for the title's `gold`): what is asked


def failing_title(name: str) -> str:
    """A failing test's name as words: ``test_member_is_gold (tests.test_x.T.test_member_is_gold)``,
    ``tests/test_x.py::T::test_member_is_gold[1]`` and ``testMemberIsGold`` read "member is
    gold"; a JavaScript test's sentence stays as written."""
    head = name.split(" (", 1)[0].rsplit("::", 1)[-1].split("[", 1)[0].strip()
    head = re.sub(r"^test_?", "", head) if re.match(r"test(?:_|[A-Z])", head) else head
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", head).replace("_", " ").strip()


def failing_clue(names: Sequence[str], holding: Callable[[Term], Mapping[str, Sequence[str]]],
                 taken: Sequence[Term] = (), task: str = "") -> Clue | None:
    """The word of the failing tests' names (``names``) held by the fewest source files that
    are not tests, at most ``CLUE_FILES`` of them: a test named ``..._1000_points_is_gold`` is
    about the code that holds ``gold``, where the task may quote only the command it ran. A
    test whose name holds one of ``taken`` (the task's own terms, asked about already) gives
    none: it is about what they ask. A word the ``task`` uses too comes first (the test and
    the report name the same thing: xp-payslip-rounding's ``half`` of "half a cent", not the
    ``net`` of the other failing test, ``test_deductions_and_net``). ``holding`` is
    ``Retriever.holding`` (the source files that hold a term, with their lines)."""
    asked = [t.pattern.lower().lstrip("-") for t in taken]
    told = set(re.findall(r"[a-z0-9]+", task.lower()))
    best: tuple[bool, int] | None = None
    clue: Clue | None = None
    for name in names:
        title = failing_title(name)
        words = [t for t in terms(title) if t.kind == "word"]
        if any(_one_word(t.pattern, a) for t in words for a in asked):
            continue  # the test is about what the task's terms ask already (`newest first`)
        for term in words:
            held = holding(term)
            rank = (not any(w.startswith(term.pattern) for w in told), len(held))
            if 0 < len(held) <= CLUE_FILES and (best is None or rank < best):
                best, clue = rank, Clue(term, title, len(held), _spelt(term, held) or title)
    return clue


def _spelt(term: Term, held: Mapping[str, Sequence[str]]) -> str | None:
    """The commonest word starting with ``term`` in ``held``'s lines, as they spell it: a
    backquoted name is searched as written, and `gold` finds no ``("Gold", 1000)``."""
    rx = re.compile(rf"(?i)\b{re.escape(term.pattern)}\w*")
    found = Counter(m.group(0) for lines in held.values() for line in lines
                    for m in rx.finditer(line))
    return found.most_common(1)[0][0] if found else None


def with_clue(specific: Sequence[Term], task: str, clue: Clue | None) -> list[str]:
    """The explorers' questions of a run without a planner: about the task's rarest name
    (``Retriever.specific``), then the failing test's clue when there is one, else the task's
    next name; two at most (each costs the live kit's 0.5B explorer 20-70 s)."""
    if clue is None:
        return from_terms(specific, task)
    return from_terms(specific[:1], task) + from_terms([clue.term], clue.spelt)


def _one_word(stem: str, word: str) -> bool:
    """``slow`` and ``slow``, ``request`` and ``requests``; not ``week`` and ``weeklysummary``."""
    short, long = sorted((stem, word), key=len)
    return long.startswith(short) and len(long) - len(short) <= 3
