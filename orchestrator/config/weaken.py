"""What an untrusted repository's own role map may not do: weaken what the user set.

A repository may add (models, roles, judges, deny rules, its own team overlays) without trust,
never weaken. Against the layers below its file (packaged and the user's ``roles.toml``) it may
not lower a model's price (nor re-point a priced model at another provider or id; a new alias
of a model priced below costs at least that), raise a model's daily token cap, drop a judge
from the pipeline, narrow ``[policy] deny``, lower ``run.max_reviews`` or turn off
``run.protect_tests``; and a role's model and fallbacks and the pipeline that the user's own
``roles.toml`` sets keep the user's value. What it tries is taken out of its layer and listed
(``Weakened.notes``); the run warns once. Keys that decide where API keys go or what may run
(``trust.PROTECTED``: the sandbox, ``policy.allow`` ...) are refused until trusted, not
ignored (``trust.check``). A trusted repository's file is used as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.config.schema import DEFAULT_STEPS
from orchestrator.config.trust import KeyPath, leaves

_PRICES = ("input", "cached_input", "output")
TRUST_HINT = ("review it, then run `orchestrate trust` (or pass --trust-repo-config) to let "
              "the repository change them")


@dataclass
class Weakened:
    """A repository layer with what would weaken the user's settings taken out."""

    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def drop(self, path: KeyPath, why: str) -> None:
        node: Any = self.data
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and path[-1] in node:
            self.notes.append(f"{'.'.join(path)} = {_short(node.pop(path[-1]))} ({why})")

    def replace(self, path: KeyPath, value: Any, why: str) -> None:
        node: Any = self.data
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else None
        if isinstance(node, dict):
            self.notes.append(f"{'.'.join(path)} = {_short(node.get(path[-1]))} ({why})")
            node[path[-1]] = value


def weaken_check(data: Mapping[str, Any], below: Mapping[str, Any], user: Mapping[str, Any],
                 judges: Collection[str] = ()) -> Weakened:
    """``data`` (one untrusted repository file) without what would weaken ``below`` (the layers
    under it merged) or replace what ``user`` (the user's own ``roles.toml``) says of roles and
    the pipeline; ``judges`` are the roles whose kind judges a change. Its ``[teams.*]``
    overlays are checked the same way."""
    found = Weakened(_copy(data))
    for path, value in list(leaves({k: v for k, v in found.data.items() if k != "teams"})):
        if _users(path) and _at(user, path) not in (_MISSING, value):
            found.drop(path, "your roles.toml sets it")
    _models(found, below)
    _pipeline(found, below, judges)
    _policy(found, below)
    _run(found, below)
    teams = found.data.get("teams")
    if isinstance(teams, dict):
        for name, overlay in teams.items():
            if isinstance(overlay, dict):
                inner = weaken_check(overlay, below, user, judges)
                teams[name] = inner.data
                found.notes += [f"teams.{name}.{note}" for note in inner.notes]
    return found


def _users(path: KeyPath) -> bool:
    """A key the user's own file decides: a role's model and fallbacks, the pipeline."""
    return (len(path) == 3 and path[0] == "roles" and path[2] in ("model", "fallback")) or (
        path[:1] == ("pipeline",))


def _models(found: Weakened, below: Mapping[str, Any]) -> None:
    models = _at(found.data, ("models",))
    if not isinstance(models, dict):
        return
    mine = _at(below, ("models",))
    mine = mine if isinstance(mine, Mapping) else {}
    for alias, spec in models.items():
        if not isinstance(spec, dict):
            continue
        where = ("models", alias)
        known = mine.get(alias)
        if isinstance(known, Mapping):
            for key in ("provider", "id"):
                if key in spec and spec[key] != known.get(key):
                    found.drop((*where, key), f"your model {alias} is {known.get(key)!r}")
            floor = _price(known)
        else:
            floor = _floor(mine, spec.get("provider"), spec.get("id"))
        _prices(found, where, spec, floor, known is not None)
        cap = known.get("quota_tokens_per_day") if isinstance(known, Mapping) else None
        if isinstance(cap, int) and _num(spec.get("quota_tokens_per_day"), cap) > cap:
            found.drop((*where, "quota_tokens_per_day"), f"above your daily cap {cap}")


def _prices(found: Weakened, where: KeyPath, spec: Mapping[str, Any], floor: dict[str, float],
            known: bool) -> None:
    price = spec.get("price")
    price = price if isinstance(price, Mapping) else {}
    for key in _PRICES:
        least = floor.get(key, 0.0)
        if least <= 0 or _num(price.get(key, None if known else 0.0), least) >= least:
            continue
        if known:  # the price below stays
            found.drop((*where, "price", key), f"lower than your price {least:g}")
        else:  # a new alias of a model you price: never cheaper than you price it
            found.replace((*where, "price", key), least,
                          f"lower than your price {least:g} for {spec.get('id')}; {least:g} used")


def _pipeline(found: Weakened, below: Mapping[str, Any], judges: Collection[str]) -> None:
    theirs = _at(found.data, ("pipeline", "steps"))
    if not isinstance(theirs, list | tuple):
        return
    steps = _at(below, ("pipeline", "steps"))
    mine = list(steps) if isinstance(steps, list | tuple) else list(DEFAULT_STEPS)
    missing = [s for s in mine if s in judges and s not in theirs]
    if missing:
        found.drop(("pipeline", "steps"), f"drops the judge {', '.join(missing)}")


def _policy(found: Weakened, below: Mapping[str, Any]) -> None:
    deny = _at(found.data, ("policy", "deny"))
    mine = _at(below, ("policy", "deny"))
    if not isinstance(deny, list | tuple) or not isinstance(mine, list | tuple):
        return
    missing = [d for d in mine if d not in deny]
    if missing:  # kept: the repository adds its rules to yours
        found.replace(("policy", "deny"), [*mine, *(d for d in deny if d not in mine)],
                      f"leaves out your {', '.join(map(str, missing))}; yours kept")


def _run(found: Weakened, below: Mapping[str, Any]) -> None:
    run = _at(found.data, ("run",))
    if not isinstance(run, dict):
        return
    reviews = _at(below, ("run", "max_reviews"))
    reviews = reviews if isinstance(reviews, int) else 1
    if _num(run.get("max_reviews"), reviews) < reviews:
        found.drop(("run", "max_reviews"), f"fewer reviews than your {reviews}")
    if run.get("protect_tests") is False and _at(below, ("run", "protect_tests")) is not False:
        found.drop(("run", "protect_tests"), "turns off test protection")


def _price(spec: Mapping[str, Any]) -> dict[str, float]:
    price = spec.get("price")
    price = price if isinstance(price, Mapping) else {}
    return {k: float(v) for k, v in price.items() if k in _PRICES and _is_num(v)}


def _floor(models: Mapping[str, Any], provider: Any, model_id: Any) -> dict[str, float]:
    """The highest price the layers below give the same provider and model id."""
    floor: dict[str, float] = {}
    for spec in models.values():
        if isinstance(spec, Mapping) and (spec.get("provider"), spec.get("id")) == (provider,
                                                                                      model_id):
            for key, value in _price(spec).items():
                floor[key] = max(floor.get(key, 0.0), value)
    return floor


_MISSING = object()


def _at(tree: Any, path: KeyPath) -> Any:
    for key in path:
        if not isinstance(tree, Mapping) or key not in tree:
            return _MISSING
        tree = tree[key]
    return tree


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _num(value: Any, default: float) -> float:
    return float(value) if _is_num(value) else default


def _copy(value: Any) -> Any:
    return {k: _copy(v) for k, v in value.items()} if isinstance(value, Mapping) else value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
