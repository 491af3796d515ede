"""The smallest build request: which line of this code is wrong, and what should it say?

A small model shown whole files copies them back unchanged (on the live explore-needed tasks the
1.5B gave the rate table back with the wrong rate in it, twice); asked for one line it has to
pick one. The ``one_line`` rung (``ladder.py``, ``[roles.<build>] one_line = true``) shows the
code the explorers found or the definition the task names (else the failure's first), numbered,
asks for a sentence on what is wrong first and then ``N: corrected text`` lines for lines of that
code (asked for the line alone, the live 1.5B fixed none of five tasks in 30 samples, mostly
naming the right line and giving it back unchanged; asked for the reason first, it fixed two of
them within four samples: ``bench/line_samples.py``). Pure functions on strings: the prompt's
text and the edit.

A reply that reprints the whole numbered code with one line changed is read the same way (only
lines that differ count); a line's indentation is the file's, whatever the reply's; a number
off goes to the line the text clearly corrects, and so does a corrected line given with no
number at all (in backticks in the reason, or alone in a fence); a number outside the code
shown, or text equal to one of its lines (a copy), changes nothing and is said. A change said
as a substitution ("should read `'shipping'` instead of `'billing'`") is made on the one line
that holds the old text. A reply that rewrites the code in another shape — a table folded
onto one line, a function reprinted without numbers — is aligned to the code token by token,
and its few changed tokens go where they align (``_rewritten``); the file keeps its own
layout. A reply that changes nothing but picks a line — names it, copies it back, quotes it —
is asked once more for that line (``named_line``; the second turn is ``oneshot.ask``'s).
"""

from __future__ import annotations

import difflib
import re

from orchestrator.localize.localization import Span

MARGIN = 0.2  # how much more a corrected line must resemble another line to go there
MAX_LINES = 3  # lines one reply may change: more is a rewrite, not a line
# "<18>: text" too: the request's form, "<number>: <the corrected line>", copied with its brackets
_LINE = re.compile(r"^[ \t>*-]*(?:line[ \t]+)?<?(\d{1,6})>?[ \t]*[:|.)][ \t]?(.*)$", re.I | re.M)
_HEAD = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[A-Za-z_][\w.]*\s*[=:(])")
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.S)
_QUOTED = re.compile(r"```[^\n`]*\n(.*?)```|`([^`\n]+)`", re.S)  # a fence, or inline code
_SWAP = re.compile(
    r"(?:chang|replac|switch|updat)\w*\s+(?:\w+\s+){0,3}?`(?P<a>[^`\n]+)`\s+(?:to|with|into|by)\s+"
    r"`(?P<b>[^`\n]+)`|\bshould\s+(?:\w+\s+){0,3}?`(?P<b2>[^`\n]+)`\s+instead\s+of\s+"
    r"`(?P<a2>[^`\n]+)`"
    r"|\bfrom\s+`(?P<a3>[^`\n]+)`\s+to\s+`(?P<b3>[^`\n]+)`", re.I)
_NAMED = re.compile(r"\bline\s+(?:number\s+)?(\d{1,6})\b", re.I)
RESEMBLES = 0.6  # how alike an unnumbered corrected line and the line it corrects must be
_TOKEN = re.compile(r"\w+|[^\w\s]")
_NUMBERS = re.compile(r"^[ \t]*\d{1,6}[ \t]*[|:][ \t]?", re.M)  # a reprint's own numbering
ALIGNED = 0.75  # share of a rewrite's tokens that must be the code's own, in order
# ... or this share, when each line it changes keeps the name that line assigns or calls: the
# 1.5B swapped py-config-merge's two lines as `merged = dict(DEFAULTS.copy())` and
# `merged.update(user)`, 10 of its 16 tokens the code's. Over the 816 one-line replies of the
# kept live runs r37-r42 read again (bench/kept_replies.py), two more edits pass (that swap,
# twice), one more fails and none that passed is lost (the 0.6 share alone, over 635 of them: ten
# more fail, among them `14| COMBINED_RATES = {` for a table's first line, `return str(kg):`)
HEADED = 0.6
DROPPED = 8  # tokens of the code a rewrite may leave out between the ones it keeps
QUOTED_CHARS = 8  # a quoted piece of code this long names the one line that holds it ...
_BARE = re.compile(r"[\w.]+(?:\(\))?")  # ... unless it is a bare name (`tier_for`: its def)


def numbered(span: Span) -> str:
    """``span``'s lines as the prompts number them."""
    return "\n".join(f"{i:>4}| {t}" for i, t in enumerate(span.text, span.start))


# room a one-line reply's reason takes before its lines (live, the 1.5B's passing one-line
# replies were 60-190 tokens; reasons alone 50-120)
REASON_TOKENS = 160
# characters a token of reprinted numbered code: the 1.5B reprinted xp-invoice-tax's 15-line
# rate table (770 characters) in a 450-token reply, 2.2 characters a token with its reason
REPRINT_CHARS_PER_TOKEN = 2


# room each further correction takes when several are asked for (``line_alternatives``): live,
# the 1.5B's three-correction replies ran 120-300 tokens, 8 of 28 cut at 256
ALTERNATIVE_TOKENS = 64


def reply_cap(cap: int | None, span: Span, alternatives: int = 1) -> int | None:
    """The one-line reply's token cap for ``span``: ``cap`` (``line_max_output``), raised to
    room for a reason and the code reprinted whole, numbered, when that is more. A reply is
    read the same whether it gives a line or reprints the code with the line changed, and a
    small model reprints a table rather than pick its line: cut at 256 tokens, the live 1.5B's
    greedy reply to xp-invoice-tax's rate table stopped before Quebec's line and changed
    nothing; given 640 it ended at 450 tokens with Quebec's rate corrected, and passed
    (``bench/line_samples.py --caps 256,640``). Short code keeps ``cap``. Each correction
    past the first of ``alternatives`` adds ``ALTERNATIVE_TOKENS``."""
    if cap is None:
        return None
    shown = len(numbered(span)) + 1
    more = ALTERNATIVE_TOKENS * (max(1, alternatives) - 1)
    return max(cap, REASON_TOKENS + -(-shown // REPRINT_CHARS_PER_TOKEN)) + more


def whole_lines(reply: str, finish_reason: str | None) -> str:
    """``reply`` without its last line when the reply was cut at its cap (``"length"``): that
    line is unfinished, and written into the code it would be a syntax error."""
    return reply[:reply.rfind("\n") + 1] if finish_reason == "length" else reply


def line_edit(current: str, span: Span, reply: str) -> tuple[str | None, str]:
    """``current`` with the lines ``reply`` corrects (``N: text``, ``N| text``, for lines of
    ``span``) replaced, and "" — or None and why nothing changed."""
    lines = current.splitlines(keepends=True)
    fenced = _FENCE.findall(reply or "")
    # a numbered line may also sit in backticks inside the reason ("should be `10| ...`")
    inline = [m.group(2) for m in _QUOTED.finditer(reply or "") if m.group(2)]
    text = "\n".join([*fenced, *inline] if fenced else [reply or "", *inline])
    edits: dict[int, str] = {}
    given = 0
    shown = {k: _flat(lines[k - 1]) for k in range(span.start, min(span.end, len(lines)) + 1)}
    for m in _LINE.finditer(text):
        n, new = int(m.group(1)), _unquoted(m.group(2))
        if n not in shown or _flat(new) in shown.values():
            continue  # outside the code, or a line of it given back as it is
        given += 1
        edits.setdefault(_anchored(n, _flat(new), shown), new)
    if not edits and (said := _substituted(reply or "", lines, shown)) is not None:
        given, edits = 1, dict([said])
    if not edits and (said := _unnumbered(reply or "", shown)) is not None:
        given, edits = 1, dict([said])
    if not edits and (rewrite := _rewritten(lines, span, reply or "")) is not None:
        return rewrite, ""
    if not edits:
        return None, (f"no line of {span.path} {span.start}-{span.end} was given a new text "
                      "(answer 'N: corrected line')")
    if given > MAX_LINES:
        return None, f"{given} lines changed: more than {MAX_LINES} is not one line"
    for n, new in edits.items():
        old = lines[n - 1]
        indent = old[:len(old) - len(old.lstrip())]
        ending = old[len(old.rstrip("\r\n")):] or "\n"
        lines[n - 1] = f"{indent}{new.strip()}{ending}" if new.strip() else ending
    return "".join(lines), ""


# a list item that opens one of several corrections: "1. ", "2) ", "**3.** ", "Option 2:"
_ITEM = re.compile(r"^[ \t]{0,3}(?:\*\*|#{1,4}[ \t]*)?(?:\d{1,2}[.)](?:\*\*)?[ \t]|"
                   r"(?:correction|option|alternative|fix)[ \t]*\d{1,2}\b[^\n]*?:)", re.I | re.M)
# a numbered line as the request asks for it (``N: text``) or as the code is shown (``N| text``)
_GIVEN = re.compile(r"^[ \t>*-]*(?:line[ \t]+)?<?\d{1,6}>?[ \t]*[:|][ \t]?.*$", re.I | re.M)


def alternatives(current: str, span: Span, reply: str, limit: int) -> list[str]:
    """Up to ``limit`` pieces of ``reply`` that each make a different edit of ``current``
    (``line_edit``), in order: the reply read whole, then each item of a list of
    corrections in it ("1. ...", "2. ..."), then each numbered line alone. Asked for several
    corrections in one reply (``line_alternatives``), the live 1.5B lists them, each as a
    fenced line, inline code or ``N: text``; read whole, the reply is the first of them (or
    all of them on different lines at once), so each is checked on its own. A piece that
    changes nothing, or makes an edit an earlier one made, is left out."""
    starts = list(_ITEM.finditer(reply))
    items = [reply[m.end():nxt.start() if nxt is not None else len(reply)]
             for m, nxt in zip(starts, [*starts[1:], None], strict=True)] if len(starts) > 1 else []
    out: list[str] = []
    made: set[str] = {current}
    for piece in [reply, *items, *(m.group(0) for m in _GIVEN.finditer(reply))]:
        if len(out) >= limit:
            break
        new, _ = line_edit(current, span, piece)
        if new is not None and new not in made:
            made.add(new)
            out.append(piece)
    return out


def named_line(current: str, span: Span, reply: str) -> int | None:
    """The line of ``span`` a reply that changed nothing picked as the wrong one, or None: the
    one line it gave back numbered as it is (a copy), else the first line of the code it names
    ("line 14"), else the first piece of code it quotes that is, or is held by, one line of the
    code alone, a bare name aside (the function's name names its ``def``, not the wrong line).
    Live (r65-r73), half the routed one-line samples changed nothing, and 205 of those 251
    replies picked a line so, 18 of them the reference fix's (``bench/named_lines.py``): "The
    line that is wrong is line 14 in the `tier_for` function ... returns 'Silver' instead"
    (xp-loyalty-tier's very bug), and no new text."""
    lines = current.splitlines()
    shown = {k: _flat(lines[k - 1]) for k in range(span.start, min(span.end, len(lines)) + 1)
             if _flat(lines[k - 1])}
    fenced = _FENCE.findall(reply or "")
    inline = [m.group(2) for m in _QUOTED.finditer(reply or "") if m.group(2)]
    text = "\n".join([reply or "", *fenced, *inline])
    copies = {int(m.group(1)) for m in _LINE.finditer(text)
              if shown.get(int(m.group(1))) == _flat(_unquoted(m.group(2)))}
    if len(copies) == 1:
        return copies.pop()
    for m in _NAMED.finditer(reply or ""):
        if int(m.group(1)) in shown:
            return int(m.group(1))
    for m in _QUOTED.finditer(reply or ""):
        piece = _flat(_NUMBERS.sub("", m.group(1) or m.group(2) or ""))
        if not piece or "\n" in (m.group(1) or "").strip():
            continue
        same = [k for k, t in shown.items() if t == piece]
        held = same or ([k for k, t in shown.items() if piece in t]
                        if len(piece) >= QUOTED_CHARS and not _BARE.fullmatch(piece) else [])
        if len(held) == 1:
            return held[0]
    return None


def _substituted(reply: str, lines: list[str], shown: dict[int, str]
                 ) -> tuple[int, str] | None:
    """A change said as a substitution, one way only ("change `> needed` to `>= needed`",
    "should read `'shipping'` instead of `'billing'`", "from `5000` to `500`"; not "it sets
    `'billing'` instead of `'shipping'`", which says the bug), the last first, made on the
    one line of the code that holds the old text once — or, when several do, on the one the reply
    names ("line 7"). Live (r37), the 1.5B wrote the label table's fix so: "line number 7 ...
    should read `'shipping'` instead of `'billing'`", with `'billing'` on two lines."""
    named = {int(m.group(1)) for m in _NAMED.finditer(reply)}
    for m in reversed(list(_SWAP.finditer(reply))):
        old = m["a"] or m["a2"] or m["a3"] or ""
        new = m["b"] or m["b2"] or m["b3"] or ""
        if not old.strip() or old == new:
            continue
        holding = [k for k in shown if lines[k - 1].count(old) == 1]
        if len(holding) > 1:
            holding = [k for k in holding if k in named]
        if len(holding) == 1:
            k = holding[0]
            return k, lines[k - 1].replace(old, new, 1).rstrip("\r\n")
    return None


def _unnumbered(reply: str, shown: dict[int, str]) -> tuple[int, str] | None:
    """The corrected line a reply gives without its number — in backticks ("the correct line
    should be `await store.save(id, ...)`") or alone in a fence — and the line of the code it
    corrects: the last such text that is no line of the code as it is, nor a piece of the line
    it resembles (a quote of the wrong code), and resembles one line clearly (``_resembled``).
    Live, the reason-first request was answered so with the right fix on two tasks whose every
    numbered line was a copy (js-missing-await, py-config-merge in r16)."""
    for m in reversed(list(_QUOTED.finditer(reply))):
        new = (m.group(1) or m.group(2) or "").strip()
        if not new or "\n" in new or _LINE.match(new):
            continue
        flat = _flat(new)
        k = _resembled(flat, shown)
        if k is not None and flat not in shown.values() and flat not in shown[k]:
            return k, new
    return None


def _rewritten(lines: list[str], span: Span, reply: str) -> str | None:
    """The file with the change a reply makes by rewriting the code in another shape, or None.
    Each piece of code the reply quotes (a fence, its numbering dropped, or inline code), the
    last first, then its numbered lines together whatever their numbers, is aligned to the
    span token by token; the first whose tokens are mostly the code's own in order
    (``ALIGNED``), fit one place of it, change something, leave out no more than
    ``DROPPED`` of the code's tokens between the ones they keep and touch at most
    ``MAX_LINES`` lines, is applied where its tokens align; a piece fewer of whose tokens are
    the code's (``HEADED``) only when each line it changes keeps its head (``_headed``). Live
    (``bench/line_samples.py``), the 1.5B wrote the label table's fix as ``const ADDRESS_FOR =
    { invoice: 'billing', ..., label: 'shipping', };``: one line for five, the right fix, read
    before as no line at all."""
    end = min(span.end, len(lines))
    block = "".join(lines[span.start - 1:end])
    code = list(_TOKEN.finditer(block))
    pieces = [_NUMBERS.sub("", m.group(1)) if m.group(1) is not None else m.group(2)
              for m in reversed(list(_QUOTED.finditer(reply)))]
    numbered_lines = [m.group(2) for m in _LINE.finditer(reply)]
    if len(numbered_lines) > 1:  # a reprint numbered from elsewhere (7-11 for lines 4-8)
        pieces.append("\n".join(numbered_lines))
    for piece in pieces:
        aligned = _aligned(block, code, piece)
        if aligned is None or aligned[0] == block:
            continue
        new, share = aligned
        old_lines, new_lines = block.splitlines(), new.splitlines()
        changes = [op for op in difflib.SequenceMatcher(
            None, old_lines, new_lines, autojunk=False).get_opcodes() if op[0] != "equal"]
        if share < ALIGNED and not all(_headed(old_lines[i1:i2], new_lines[j1:j2])
                                       for _, i1, i2, j1, j2 in changes):
            continue
        if sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in changes) <= MAX_LINES:
            return "".join(lines[:span.start - 1]) + new + "".join(lines[end:])
    return None


def _headed(old: list[str], new: list[str]) -> bool:
    """Whether ``new`` changes lines ``old`` one for one, each keeping its head: the name it
    assigns or calls (``merged =``, ``merged.update(``)."""
    return len(old) == len(new) and all(_head(a) and _head(a) == _head(b)
                                        for a, b in zip(old, new, strict=True))


def _aligned(block: str, code: list[re.Match[str]], piece: str) -> tuple[str, float] | None:
    """``block`` with the tokens ``piece`` changes, where they align, and the share of
    ``piece``'s tokens that are the code's own in order; None when that share is under
    ``HEADED``, or ``piece`` leaves out too much."""
    mine = list(_TOKEN.finditer(piece))
    words = [t.group() for t in code]
    ops = difflib.SequenceMatcher(None, words, [t.group() for t in mine],
                                  autojunk=False).get_opcodes()
    while ops and ops[0][0] == "delete":  # the piece starts further into the code ...
        ops.pop(0)
    while ops and ops[-1][0] == "delete":  # ... or stops before its end
        ops.pop()
    kept = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal")
    if len(mine) < 3 or kept < HEADED * len(mine):
        return None
    shown = words[ops[0][1]:ops[-1][2]]
    if sum(words[i:i + len(shown)] == shown for i in range(len(words))) > 1:
        return None  # the piece fits more than one place (`Decimal("0.14975")` in a rate table)
    # whole lines left out are not shown, not deleted (a reprint that skips what it keeps)
    ops = [op for op in ops if not (op[0] == "delete" and _whole_lines(block, code, *op[1:3]))]
    if sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag in ("delete", "replace")) > DROPPED:
        return None
    out = block
    for tag, i1, i2, j1, j2 in reversed(ops):
        if tag == "equal" or _layout(code[i1:i2]) and _layout(mine[j1:j2]):
            continue  # a separator dropped or added (a folded table's last comma) is layout
        text = piece[mine[j1].start():mine[j2 - 1].end()] if j2 > j1 else ""
        if i2 > i1:  # replaced or left out: the code's tokens, and for a deletion their gap
            stop = code[i2].start() if tag == "delete" and i2 < len(code) else code[i2 - 1].end()
            out = out[:code[i1].start()] + text + out[stop:]
            continue
        before = piece[mine[j1 - 1].end():mine[j1].start()] if j1 > 0 else ""
        after = piece[mine[j2 - 1].end():mine[j2].start()] if j2 < len(mine) else ""
        gap = block[code[i1 - 1].end():code[i1].start()] if 0 < i1 < len(code) else ""
        if i1 == 0 or "\n" in gap:  # at a line's start: before the next token, on its line
            at = code[i1].start() if i1 < len(code) else len(block)
            out = out[:at] + text + (after or " ") + out[at:]
        else:  # after the token it follows, spaced as the piece spaces it
            at = code[i1 - 1].end()
            out = out[:at] + before + text + out[at:]
    return out, kept / len(mine)


def _whole_lines(block: str, code: list[re.Match[str]], i1: int, i2: int) -> bool:
    """Whether the code's tokens ``i1:i2`` are whole lines of ``block``."""
    before = block[code[i1 - 1].end():code[i1].start()] if i1 > 0 else "\n"
    after = block[code[i2 - 1].end():code[i2].start()] if i2 < len(code) else "\n"
    return "\n" in before and "\n" in after


def _layout(tokens: list[re.Match[str]]) -> bool:
    return all(t.group() in ",;" for t in tokens)


def _resembled(new: str, shown: dict[int, str]) -> int | None:
    """The one line of the code that starts as ``new`` does, else the line it resembles most
    when that is at least ``RESEMBLES`` alike and no other line is as close."""
    if (keyed := _keyed(new, shown)) is not None:
        return keyed
    alike = sorted(((difflib.SequenceMatcher(None, text, new).ratio(), k)
                    for k, text in shown.items() if text), reverse=True)
    if not alike or alike[0][0] < RESEMBLES or (len(alike) > 1 and alike[1][0] == alike[0][0]):
        return None
    return alike[0][1]


def _flat(line: str) -> str:
    return " ".join(line.split())


def _anchored(n: int, new: str, shown: dict[int, str]) -> int:
    """The line ``new`` corrects: ``n``, or the one line of the code that starts as it does
    (a table's key, the name assigned), or else the line it clearly resembles more. A small
    model's number is often off: live, the 1.5B wrote "10" for the rate table's QC line 18,
    whose text it gave back changed — taken at its word it replaced Manitoba's rate."""
    if _head(new) != _head(shown[n]) and (keyed := _keyed(new, shown)) is not None:
        return keyed

    def like(k: int) -> float:
        return difflib.SequenceMatcher(None, shown[k], new).ratio()
    best = max(shown, key=lambda k: (like(k), -abs(k - n)))
    return best if like(best) > like(n) + MARGIN else n


def _keyed(new: str, shown: dict[int, str]) -> int | None:
    """The one line of the code that starts as ``new`` does (a table's key, the name assigned)."""
    head = _head(new)
    same = [k for k, text in shown.items() if head and _head(text) == head]
    return same[0] if len(same) == 1 else None


def _head(line: str) -> str:
    m = _HEAD.match(line)
    return m.group(1) if m else ""


def _unquoted(text: str) -> str:
    """A line's new text without the backticks a model puts around code."""
    stripped = text.strip()
    if len(stripped) > 1 and stripped[0] == stripped[-1] == "`":
        return stripped.strip("`")
    return text.rstrip()
