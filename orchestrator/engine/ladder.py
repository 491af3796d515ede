"""The build's strategy ladder: what the next attempt does, so that a retry is never a replay.

A failed attempt climbs one rung: (a) ``one_shot``, one call for the whole files the failure
pins; with ``one_line``, then ``one_line``: one call for just the wrong line of the code the
explorers found or the failure points at (``oneline.py``), then, when the failure pins nothing,
of each place the task's words lead to (``localize/leads.py``), once each; (b)
``one_shot_fact``, the same call with the failure restated as facts (the values the assertion
compared) and the one function around the failing line named, for the attempts
``one_shot_attempts`` allows after the first; (c) ``tool_loop``, the role's tools; (d)
``next_model``, the next model of the role's fallback chain (a one-shot with the facts when the
role one-shots, else its tool loop), one rung per model. The last rung repeats while attempts
and time are left; with ``tool_loop = false`` there is no (c), and after the others the sampled
requests cycle instead (one_line, one_shot_fact), each at the role's highest temperature: a new
draw, never the last rung, so the same-failure stop does not end them. When the failure pins no
code and the explore step left places to point at (``state.leads``), the one-line request comes
before the whole-file one-shot; with ``unpinned_lines_only`` it is then the only one-shot
rung, and the only one that cycles (live, on those tasks the whole-file rungs passed 1 of 46
attempts, the one-line request 11 of 53: a faster map's extra time buys more draws of it).
Pure: the rung of attempt ``n`` follows from the role's settings and the run's localisation
and leads, so a resumed run takes the same one.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.config.schema import RoleSpec
from orchestrator.state import Strategy

ONE_SHOTS: frozenset[Strategy] = frozenset({"one_shot", "one_line", "one_shot_fact"})


@dataclass(frozen=True)
class Rung:
    """One step of the ladder: a strategy on the model at ``model_step`` of the role's chain."""

    strategy: Strategy
    model_step: int = 0
    resampled: bool = False  # a cycled request: sampled at the role's highest temperature


def rungs(spec: RoleSpec, chain: int, *, line_first: bool = False) -> list[Rung]:
    """The ladder of a build role whose model chain has ``chain`` models; ``line_first``: the
    one-line request before the whole files (the failure pins no code and the explore step
    found places to point it at: live, the first whole-file one-shot never passed an
    explore-needed task in 40 runs, and cost 50-66 s of the 300)."""
    out: list[Rung] = []
    if lines_only(spec, line_first):
        out.append(Rung("one_line"))
    elif spec.one_shot:
        first = [Rung("one_shot"), Rung("one_line")] if spec.one_line else [Rung("one_shot")]
        out += first[::-1] if line_first else first
        out += [Rung("one_shot_fact")] * (spec.one_shot_attempts - 1)
    if not cycle(spec, line_first=line_first):  # the sampled requests repeat instead
        out.append(Rung("tool_loop"))
    out += [Rung("next_model", step) for step in range(1, chain)]
    return out


def lines_only(spec: RoleSpec, line_first: bool) -> bool:
    """Whether every one-shot attempt is the one-line request (``unpinned_lines_only`` on an
    explore-needed task: the failure pins nothing and the explore step left places; the
    role map refuses it without ``one_shot`` and ``one_line``)."""
    return line_first and spec.unpinned_lines_only


def cycle(spec: RoleSpec, *, line_first: bool = False) -> list[Rung]:
    """The rungs that repeat after the ladder when the role has no tool loop: each sampled
    request once per round, at the role's highest temperature (empty: the last rung repeats)."""
    if spec.tool_loop or not spec.one_shot:
        return []
    lines = [Rung("one_line", resampled=True)] if spec.one_line else []
    if lines_only(spec, line_first):
        return lines
    return [*lines, Rung("one_shot_fact", resampled=True)]


def rung_for(spec: RoleSpec, chain: int, n: int, *, line_first: bool = False
             ) -> tuple[Rung, bool]:
    """The rung of build attempt ``n`` (1-based) and whether it is the ladder's last (a
    cycled rung never is: it samples anew)."""
    ladder, again = rungs(spec, chain, line_first=line_first), cycle(spec, line_first=line_first)
    if n <= len(ladder) or not again:
        i = min(n - 1, len(ladder) - 1)
        return ladder[i], i == len(ladder) - 1 and not again
    return again[(n - 1 - len(ladder)) % len(again)], False
