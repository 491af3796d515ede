"""Where a role map comes from: its layers, merged in precedence order, each leaf remembering
which layer set it (``orchestrate roles --explain`` prints that).

Lowest first: the defaults the pipeline's agent files give their roles, the packaged
``roles.toml``, the user's ``$XDG_CONFIG_HOME/orchestrate/roles.toml``, the repository's
``roles.toml`` (its keys that touch secrets or safety only once the user trusts it, see
``trust.py``), each ``--roles FILE``, the ``--team NAME`` overlay, ``ORCHESTRATE_*``
environment variables, ``--set`` flags. An environment variable names a key path with ``__``
between the parts, like ``--set``: ``ORCHESTRATE_EXPLORER__PARALLEL=4`` is
``--set explorer.parallel=4``; ``ORCHESTRATE_RUN__MAX_ATTEMPTS=5`` is ``--set run.max_attempts=5``.
Variables without ``__`` (``ORCHESTRATE_DATABASE_URL``) are not role map keys.

``load_roles`` and ``resolve`` take the same keywords, ``Where``: where the layers come from.
The merged map is validated once, by ``schema.validate``.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, Unpack

from orchestrator.config import trust
from orchestrator.config.blame import source_of
from orchestrator.config.definitions import Registry, load_registry
from orchestrator.config.kinds import SPECS
from orchestrator.config.packaged import DEFAULT_ROLES, packaged_file
from orchestrator.config.schema import (
    DEFAULT_STEPS,
    SECTIONS,
    KeyPath,
    RoleMap,
    validate,
)
from orchestrator.config.trust import leaves, user_config_dir
from orchestrator.config.weaken import TRUST_HINT, weaken_check
from orchestrator.errors import ConfigError

DEFAULT_SOURCE = "built-in default"
ENV_PREFIX = "ORCHESTRATE_"
__all__ = ["Layer", "Resolved", "Where", "explain", "load_roles", "read_layer", "resolve",
           "resolve_overrides", "resolve_roles", "resolve_setup", "role_layers",
           "user_config_dir", "Setup"]


class Where(TypedDict, total=False):
    """Where a role map's layers come from: the keywords of ``load_roles`` and ``resolve``.

    ``repo``: the repository (its ``roles.toml`` files and agent files); ``files``: the
    ``--roles`` files, in order; ``sets``: ``--set`` items; ``team``: the ``[teams.NAME]``
    overlay; ``base_text``: replaces the packaged ``roles.toml``; ``user_dir``: the user's config
    directory (its ``roles.toml``, ``agents/`` and trust records; none without it);
    ``trust_repo``: trust the repository's own file for this call only; ``env``: adds the
    ``ORCHESTRATE_*`` layer; ``registry``: the run's agent definitions (by default the packaged
    ones, the user's and the repository's); ``agent_files``: agent definitions given for this
    run (a fleet job's), above all the others.
    """

    repo: Path | None
    files: Sequence[Path]
    sets: Sequence[str]
    team: str | None
    base_text: str | None
    user_dir: Path | None
    trust_repo: bool
    env: Mapping[str, str] | None
    registry: Registry | None
    agent_files: Sequence[Path]


class Layer(NamedTuple):
    """One source of role map keys, in precedence order."""

    name: str  # what errors call it: a file path, "--set KEY=VALUE", ...
    data: dict[str, Any]
    repo: bool = False  # the repository's own file: its protected keys need the user's trust
    digest: str = ""  # sha256 of the bytes parsed, which is what trust is given to


@dataclass(frozen=True)
class Resolved:
    """A validated role map with where each of its keys came from, and the run's agents."""

    roles: RoleMap
    sources: Mapping[KeyPath, str]
    merged: Mapping[str, Any]  # the keys some layer set (the rest are built-in defaults)
    registry: Registry
    ignored: tuple[str, ...] = ()  # what an untrusted repository tried and was not let do

    def source(self, path: KeyPath) -> str:
        """The layer that set the key at ``path``, or ``built-in default``."""
        if not _has(self.merged, path):
            return DEFAULT_SOURCE
        for n in range(len(path), 0, -1):
            if path[:n] in self.sources:
                return self.sources[path[:n]]
        return DEFAULT_SOURCE


def load_roles(**where: Unpack[Where]) -> RoleMap:
    """Merge the layers in precedence order and validate the result once (see ``Where``)."""
    return resolve(**where).roles


def role_layers(*, repo: Path | None = None, files: Sequence[Path] = (),
                base_text: str | None = None, user_dir: Path | None = None) -> list[Layer]:
    """The role map files, lowest first: packaged, the user's, the repository's, ``--roles``."""
    layers = [Layer("packaged roles.toml", tomllib.loads(base_text or default_roles_text()))]
    if user_dir is not None and (user_dir / trust.USER_ROLES).is_file():
        layers.append(read_layer(user_dir / trust.USER_ROLES))
    layers += [read_layer(f, repo=True) for f in (trust.repo_config_files(repo) if repo else ())]
    return layers + [read_layer(Path(f)) for f in files]


def resolve(**where: Unpack[Where]) -> Resolved:
    """Every layer merged and validated once; see the module doc for the order."""
    repo, user_dir, team = where.get("repo"), where.get("user_dir"), where.get("team")
    layers = role_layers(repo=repo, files=where.get("files", ()), base_text=where.get("base_text"),
                         user_dir=user_dir)
    trusted = where.get("trust_repo", False) or repo is None or trust.repo_trusted(
        user_dir, repo, {Path(lay.name): lay.digest for lay in layers if lay.repo})
    registry = where.get("registry")
    if registry is None:
        registry = load_registry(repo, user_dir=user_dir, trusted=trusted,
                                 agent_files=where.get("agent_files", ()))
    ignored: list[str] = []
    if not trusted:
        judges = {name for name, agent in registry.items() if SPECS[agent.kind].judge}
        layers, ignored = _without_weakening(layers, user_dir, judges)
    merged, sources = merge_layers(layers)
    untrusted = {layer.name for layer in layers if layer.repo}
    if team is not None:
        merged, sources = _apply_team(merged, sources, team, untrusted)
    role_names = {*registry, *merged.get("roles", {})}
    later = [*env_layers(where.get("env") or {}, role_names),
             *[Layer(f"--set {s}", parse_set(s)) for s in where.get("sets", ())]]
    merged, sources = merge_layers([Layer("merged", merged), *later], sources)
    _packaged_defaults_for_packaged_models(merged, sources, layers[0])
    for name in _pipeline_roles(merged):
        # registry[name] raises, for a file that could not be used, why it could not
        agent = registry[name] if name in registry or name in registry.unusable else None
        if agent is not None:
            _beneath(merged, sources, agent.source, {"roles": {name: agent.defaults()}})
    merged["team"] = team
    if repo is not None and untrusted and not where.get("trust_repo", False):
        first = next(i for i, layer in enumerate(layers) if layer.repo)
        below, _ = merge_layers(layers[:first])
        trust.check(repo, {Path(lay.name): lay.digest for lay in layers if lay.repo}, merged,
                    below, lambda path: source_of(path, sources) in untrusted, user_dir)
    return Resolved(validate(merged, sources), sources, merged, registry,
                    (*ignored, *registry.ignored))


def _without_weakening(layers: list[Layer], user_dir: Path | None,
                       judges: Collection[str]) -> tuple[list[Layer], list[str]]:
    """The layers with what each repository file may not do without trust taken out of it
    (``weaken.py``), and one line per file saying what was."""
    user_name = str(user_dir / trust.USER_ROLES) if user_dir is not None else None
    user = next((lay.data for lay in layers if lay.name == user_name), {})
    kept, lines = [], []
    for i, layer in enumerate(layers):
        if not layer.repo:
            kept.append(layer)
            continue
        below, _ = merge_layers(kept[:i])
        found = weaken_check(layer.data, below, user, judges)
        kept.append(layer._replace(data=found.data))
        if found.notes:
            lines.append(f"{layer.name} is not trusted; ignored: {'; '.join(found.notes)}; "
                         f"{TRUST_HINT}")
    return kept, lines


class Setup(NamedTuple):
    """What a run in a repository uses: its role map, its agents, what was ignored."""

    roles: RoleMap
    registry: Registry
    ignored: tuple[str, ...] = ()


PACKAGED_ROLE_KEYS = ("fallback", "tier", "effort")  # chosen for the packaged role's model


def _packaged_defaults_for_packaged_models(merged: dict[str, Any], sources: dict[KeyPath, str],
                                           packaged: Layer) -> None:
    """A role that another layer moved to a model of its own (not one the packaged map defines)
    keeps none of the packaged map's fallback, tier and effort for that role: they were chosen
    for the packaged model (a fallback on the packaged provider, a tier its provider offers),
    and would warn about models the map never uses or fail on a provider without tiers."""
    own = {alias for alias, model in packaged.data.get("models", {}).items()
           if isinstance(model, Mapping)
           and source_of(("models", alias, "provider"), sources) == packaged.name}
    for role, spec in (merged.get("roles") or {}).items():
        if not isinstance(spec, dict) or spec.get("model") in own:
            continue
        if "model" not in spec or source_of(("roles", role, "model"), sources) == packaged.name:
            continue  # no layer moved it (an agent file's default model comes later)
        for key in PACKAGED_ROLE_KEYS:
            if key in spec and source_of(("roles", role, key), sources) == packaged.name:
                del spec[key]
                sources.pop(("roles", role, key), None)


def resolve_setup(
    repo: Path | None,
    roles: RoleMap | None,
    role_files: Sequence[str | os.PathLike[str]] = (),
    sets: Sequence[str] = (),
    team: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    trust_repo_config: bool = False,
    agent_files: Sequence[str | os.PathLike[str]] = (),
) -> Setup:
    """The role map and the agent definitions a run in ``repo`` uses: ``roles`` when given (with
    ``sets`` applied), else every layer; and what an untrusted repository was not let do. With
    ``env``, the user's config directory and the ``ORCHESTRATE_*`` variables are layers too."""
    user_dir = user_config_dir(env) if env is not None else None
    if roles is not None:
        role_map = resolve_overrides(roles, sets) if sets else roles
        trusted = trust_repo_config or repo is None or trust.repo_trusted(
            user_dir, repo, {f: trust.fingerprint(f) for f in trust.repo_config_files(repo)})
        registry = load_registry(repo, user_dir=user_dir, trusted=trusted,
                                 agent_files=[Path(f) for f in agent_files])
        return Setup(role_map, registry, registry.ignored)
    found = resolve(repo=repo, files=[Path(f) for f in role_files], sets=sets, team=team,
                    user_dir=user_dir, trust_repo=trust_repo_config, env=env,
                    agent_files=[Path(f) for f in agent_files])
    return Setup(found.roles, found.registry, found.ignored)


def resolve_roles(
    repo: Path | None,
    roles: RoleMap | None,
    role_files: Sequence[str | os.PathLike[str]] = (),
    sets: Sequence[str] = (),
    team: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    trust_repo_config: bool = False,
) -> RoleMap:
    """The role map of ``resolve_setup``: the one given, or the layers merged.

    The user's config directory comes from ``env`` (``XDG_CONFIG_HOME``); without ``env`` there
    is no user layer, no ``ORCHESTRATE_*`` layer and no recorded trust. ``trust_repo_config``
    trusts the repository's own ``roles.toml`` for this call (see ``orchestrator.config.trust``).
    """
    return resolve_setup(repo, roles, role_files, sets, team, env=env,
                         trust_repo_config=trust_repo_config)[0]


def resolve_overrides(roles: RoleMap, sets: Sequence[str]) -> RoleMap:
    """Apply ``--set`` style overrides to an already resolved role map."""
    data = roles.model_dump(mode="json")
    layers = [Layer("role map", data), *[Layer(f"--set {s}", parse_set(s)) for s in sets]]
    merged, sources = merge_layers(layers)
    return validate(merged, sources)


def default_roles_text() -> str:
    return packaged_file(DEFAULT_ROLES).read_text(encoding="utf-8")


def read_layer(path: Path, *, repo: bool = False) -> Layer:
    """Parse one TOML file; a syntax error becomes a ConfigError naming the file and line."""
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read role map ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    try:
        return Layer(str(path), tomllib.loads(text), repo, hashlib.sha256(raw).hexdigest())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def parse_set(item: str) -> dict[str, Any]:
    """``explorer.parallel=20`` -> ``{"roles": {"explorer": {"parallel": 20}}}``."""
    key, sep, raw = item.partition("=")
    parts = [p.strip() for p in key.split(".") if p.strip()]
    if not sep or len(parts) < 2:
        raise ConfigError(
            f"--set {item!r}: expected ROLE.KEY=VALUE (e.g. explorer.parallel=20) "
            "or SECTION.NAME.KEY=VALUE (e.g. models.spark.id=gpt-5.1-mini)"
        )
    if parts[0] not in SECTIONS:
        parts = ["roles", *parts]
    return _tree(parts, _value(raw))


def merge_layers(
    layers: Sequence[Layer], sources: dict[KeyPath, str] | None = None
) -> tuple[dict[str, Any], dict[KeyPath, str]]:
    """Merge layers in order (later wins, tables merge key by key); ``sources`` records which
    layer set each key. A layer named "merged" is an earlier result and records nothing."""
    merged: dict[str, Any] = {}
    sources = dict(sources or {})
    for layer in layers:
        _merge_into(merged, layer.data, (), layer.name if layer.name != "merged" else None,
                    sources)
    return merged, sources


def _merge_into(dst: dict, src: Mapping, path: tuple, name: str | None, sources: dict) -> None:
    for key, value in src.items():
        here = (*path, key)
        if isinstance(value, Mapping) and isinstance(dst.get(key), dict):
            _merge_into(dst[key], value, here, name, sources)
        else:
            dst[key] = _copy(value)
            if name is not None:
                sources[here] = name


def _copy(value: Any) -> Any:
    return {k: _copy(v) for k, v in value.items()} if isinstance(value, Mapping) else value


def _apply_team(
    merged: dict[str, Any], sources: dict[KeyPath, str], team: str, untrusted: set[str]
) -> tuple[dict[str, Any], dict[KeyPath, str]]:
    """Overlay ``[teams.TEAM]``; each key keeps the name of the file that wrote it."""
    overlay = merged.get("teams", {}).get(team)
    if overlay is None:
        known = ", ".join(sorted(merged.get("teams", {}))) or "none defined"
        raise ConfigError(f"--team {team}: no [teams.{team}] in the role map (teams: {known})")
    by_file: dict[str, dict[str, Any]] = {}
    for path, value in leaves(overlay):
        origin = source_of(("teams", team, *path), sources)
        name = f"{origin} [teams.{team}]"
        if origin in untrusted:
            untrusted.add(name)
        _set_path(by_file.setdefault(name, {}), path, value)
    return merge_layers([Layer("merged", merged), *(Layer(n, d) for n, d in by_file.items())],
                        sources)


def _set_path(tree: dict[str, Any], path: KeyPath, value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def env_layers(env: Mapping[str, str], roles: Collection[str]) -> list[Layer]:
    """``ORCHESTRATE_A__B=value`` variables as ``--set a.b=value`` layers, in name order."""
    layers = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
        if len(parts) < 2 or not all(parts):
            raise ConfigError(f"${name}: expected ORCHESTRATE_ROLE__KEY or "
                              "ORCHESTRATE_SECTION__NAME__KEY (e.g. ORCHESTRATE_EXPLORER__PARALLEL)")
        if parts[0] not in SECTIONS:
            parts = ["roles", *parts]
        if parts[0] in ("roles", "teams") and parts[1] not in roles:
            dashed = parts[1].replace("_", "-")  # a variable name cannot hold a '-'
            parts[1] = dashed if dashed in roles else parts[1]
        layers.append(Layer(f"${name}", _tree(parts, _value(env[name]))))
    return layers


def _value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _tree(parts: Sequence[str], value: Any) -> dict[str, Any]:
    tree: dict[str, Any] = {parts[-1]: value}
    for p in reversed(parts[:-1]):
        tree = {p: tree}
    return tree


def _pipeline_roles(merged: Mapping[str, Any]) -> list[str]:
    pipeline = merged.get("pipeline")
    pipeline = pipeline if isinstance(pipeline, Mapping) else {}
    steps = pipeline.get("steps", DEFAULT_STEPS)
    steps = steps if isinstance(steps, list | tuple) else []
    return [s for s in (*steps, pipeline.get("summarizer", "summarizer")) if isinstance(s, str)]


def _beneath(merged: dict[str, Any], sources: dict[KeyPath, str], name: str,
             data: Mapping[str, Any]) -> None:
    """Add the keys of ``data`` that no layer set, as set by ``name`` (the lowest layer)."""
    for path, value in leaves(data):
        if _has(merged, path):
            continue
        node = merged
        for key in path[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                return  # a malformed map: validation names it
        node[path[-1]] = value
        sources[path] = name


def _has(tree: Mapping[str, Any], path: KeyPath) -> bool:
    node: Any = tree
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def explain(resolved: Resolved) -> list[tuple[str, Any, str]]:
    """``(key, value, source)`` for every key of the resolved map (teams left out)."""
    data = resolved.roles.model_dump(mode="json", exclude={"teams", "team"})
    return [(".".join(path), value, resolved.source(path)) for path, value in leaves(data)]
