"""The role map: ``roles.toml`` layers merged once into frozen, strict pydantic models.

Precedence, lowest first: the packaged default, the user's ``roles.toml`` (in
``$XDG_CONFIG_HOME/orchestrate/``), the repository's ``roles.toml``, each ``--roles FILE``, the
``--team`` overlay, then ``--set role.key=value`` flags. Every leaf remembers which layer set it,
so an error names the file, the key path and what is allowed, and keys that touch secrets or
safety are refused when the repository's own file set them without the user's trust (``trust``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from . import trust
from .errors import ConfigError
from .role import ROLES, Role

Tier = Literal["standard", "priority", "flex", "ultrafast"]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
Api = Literal["responses", "chat"]
EditFormat = Literal["any", "replace", "lines", "patch", "whole"]
_EFFORT_ALIASES = {"light": "low", "max": "xhigh"}
SECTIONS = (
    "providers", "models", "roles", "teams", "run", "verify", "policy", "quota", "sandbox",
)


def _effort_alias(v: Any) -> Any:
    return _EFFORT_ALIASES.get(v, v) if isinstance(v, str) else v


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _standard_tier() -> dict[Tier, str | None]:
    return {"standard": None}


class Provider(_Strict):
    """An OpenAI-compatible endpoint and how our tier names map onto its ``service_tier``."""

    base_url: str | None = Field(None, description="None means the provider's public endpoint.")
    api_key_env: str = Field(description="Environment variable that holds the API key.")
    tiers: dict[Tier, str | None] = Field(
        default_factory=_standard_tier,
        description="Our tier -> the provider's service_tier value (None: send none).",
    )
    timeout_s: float = 600.0
    api: Api = Field(
        "chat", description="The wire API its models speak: the Responses API (/v1/responses; "
        "OpenAI's codex models speak only this) or Chat Completions (/v1/chat/completions).")
    responses_format: Literal["text.format", "response_format"] = Field(
        "text.format", description="Responses API only: where structured output is asked for. "
        "llama.cpp's /v1/responses ignores text.format and reads the chat-style response_format.")


class Price(_Strict):
    """USD per million tokens."""

    input: float = 0.0
    cached_input: float = 0.0
    output: float = 0.0


class ModelSpec(_Strict):
    """A model alias: where it lives, how big its window is, what it costs, how it takes tools."""

    provider: str
    id: str
    api: Api | None = Field(None, description="Overrides the provider's api for this model.")
    context_window: int = Field(gt=0)
    max_output: int = Field(gt=0)
    price: Price = Price()
    tools: Literal["native", "json"] = "native"
    structured: Literal["json_schema", "json_object", "prompt"] = "json_schema"
    tool_args: Literal["required", "all"] = Field(
        "required", description="json tool mode: offer only required tool arguments (small "
        "models fill optional ones with inventions) or all of them.")
    temperature: float | None = Field(None, ge=0, le=2, description="None: the server's default.")
    quota_tokens_per_day: int | None = None
    efforts: tuple[Effort, ...] | None = Field(
        None, description="The reasoning efforts the model accepts (None: any); a role whose "
        "chain reaches this model with another effort is a configuration error.")
    edits: EditFormat = Field(
        "any", description="How this model edits files as a builder: replace (text), lines "
        "(line ranges), patch (unified diff), whole (whole files) or any (all of them).")


class RoleSpec(_Strict):
    """How one role runs: model, tier, effort, parallelism, fallback chain, context policy."""

    model: str
    tier: Tier = "standard"
    effort: Annotated[Effort | None, BeforeValidator(_effort_alias)] = None
    parallel: int = Field(1, ge=1, le=32)
    fallback: tuple[str, ...] = ()
    max_turns: int = Field(30, ge=1, le=500)
    context_fork_at: float = Field(0.8, gt=0.1, le=0.98)
    context_window_cap: int | None = Field(None, gt=0)
    output_reserve: int | None = Field(None, gt=0)


class RunSettings(_Strict):
    max_attempts: int = Field(3, ge=1, le=20)
    max_reviews: int = Field(1, ge=0, le=5)
    command_timeout_s: float = Field(300.0, gt=0)
    explorer_timeout_s: float = Field(600.0, gt=0, description="A slower explorer is recorded as failed.")
    digest_tokens_per_explorer: int = Field(1500, ge=100)
    digest_tokens_total: int = Field(8000, ge=100)
    preflight: bool = Field(True, description="Run the acceptance commands before any model "
                            "call and give the planner and builder their localised failures.")


class VerifySettings(_Strict):
    commands: tuple[str, ...] = Field((), description="Acceptance commands; these win over the plan's.")


class PolicySettings(_Strict):
    """Command policy for the builder: regexes matched against each command it runs."""

    allow: tuple[str, ...] = Field((), description="Patterns that are always allowed.")
    deny: tuple[str, ...] = Field((), description="Patterns refused on top of the built-in list.")


class SandboxSettings(_Strict):
    """The OS sandbox around every builder and verify command (see ``orchestrator/sandbox.py``).

    A repository's own ``roles.toml`` may set these only once the user trusts it (``trust``).
    """

    mode: Literal["auto", "bwrap", "none"] = Field(
        "auto", description="auto/bwrap: bubblewrap, refusing to run commands where it cannot "
        "start; none: no sandbox at all (a loud warning on every run).")
    file_size_mb: int = Field(256, ge=1, description="Largest file a command may write.")
    memory_mb: int = Field(4096, ge=64, description="Data segment limit per process.")
    cpu_s: int = Field(600, ge=1, description="CPU seconds per process.")
    processes: int = Field(256, ge=8, description="Processes and threads a command may run.")
    process_cgroup: bool = Field(
        True, description="As root (where the process rlimit does not bind), cap processes with "
        "a pids cgroup; it costs ~10 ms per command on cgroup v1. false: no cap as root.")
    tmp_mb: int = Field(1024, ge=16, description="Size of the private /tmp and home scratch.")
    read_only: tuple[str, ...] = Field(
        (), description="Extra paths the commands may read (a toolchain, a cache); ~ expands.")
    hidden: tuple[str, ...] = Field(
        (), description="Extra paths hidden from commands, on top of the built-in secret list.")


class RoleMap(_Strict):
    """The resolved role map of one run."""

    providers: dict[str, Provider]
    models: dict[str, ModelSpec]
    roles: dict[Role, RoleSpec]
    run: RunSettings = RunSettings()
    verify: VerifySettings = VerifySettings()
    policy: PolicySettings = PolicySettings()
    sandbox: SandboxSettings = SandboxSettings()
    teams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    team: str | None = None

    def model_for(self, role: Role) -> ModelSpec:
        return self.models[self.roles[role].model]

    def chain(self, role: Role) -> list[str]:
        """The role's model aliases in the order they are tried."""
        spec = self.roles[role]
        return [spec.model, *[m for m in spec.fallback if m != spec.model]]


# --- loading -------------------------------------------------------------------------------------

KeyPath = tuple[str, ...]


class Layer(NamedTuple):
    """One source of role map keys, in precedence order."""

    name: str  # what errors call it: a file path, "--set KEY=VALUE", ...
    data: dict[str, Any]
    repo: bool = False  # the repository's own file: its protected keys need the user's trust
    digest: str = ""  # sha256 of the bytes parsed, which is what trust is given to


def default_roles_text() -> str:
    return packaged_file("roles.toml").read_text(encoding="utf-8")


def packaged_file(name: str):
    """A file shipped in the package's agents folder (falls back to the source tree)."""
    packaged = resources.files("orchestrator").joinpath("_agents", name)
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / "agents" / name  # editable install


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
    try:
        value: Any = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    tree: dict[str, Any] = {parts[-1]: value}
    for p in reversed(parts[:-1]):
        tree = {p: tree}
    return tree


def role_layers(
    *,
    repo: Path | None = None,
    files: Sequence[Path] = (),
    base_text: str | None = None,
    user_dir: Path | None = None,
) -> list[Layer]:
    """The files of a role map, lowest precedence first (``--team`` and ``--set`` come later)."""
    layers = [Layer("packaged roles.toml", tomllib.loads(base_text or default_roles_text()))]
    if user_dir is not None and (user_dir / trust.USER_ROLES).is_file():
        layers.append(read_layer(user_dir / trust.USER_ROLES))
    layers += [read_layer(f, repo=True) for f in (trust.repo_config_files(repo) if repo else ())]
    layers += [read_layer(Path(f)) for f in files]
    return layers


def load_roles(
    *,
    repo: Path | None = None,
    files: Sequence[Path] = (),
    sets: Sequence[str] = (),
    team: str | None = None,
    base_text: str | None = None,
    user_dir: Path | None = None,
    trust_repo: bool = False,
) -> RoleMap:
    """Merge the layers in precedence order and validate the result once.

    ``user_dir`` is the user's config directory (its ``roles.toml`` layer and trust records);
    ``trust_repo`` trusts the repository's own file for this call only.
    """
    layers = role_layers(repo=repo, files=files, base_text=base_text, user_dir=user_dir)
    merged, sources = merge_layers(layers)
    untrusted = {layer.name for layer in layers if layer.repo}
    if team is not None:
        merged, sources = _apply_team(merged, sources, team, untrusted)
    set_layers = [Layer(f"--set {s}", parse_set(s)) for s in sets]
    merged, sources = merge_layers([Layer("merged", merged), *set_layers], sources)
    merged["team"] = team
    if repo is not None and untrusted and not trust_repo:
        first = next(i for i, layer in enumerate(layers) if layer.repo)
        below, _ = merge_layers(layers[:first])
        trust.check(repo, {Path(lay.name): lay.digest for lay in layers if lay.repo}, merged,
                    below, lambda path: _source_of(path, sources) in untrusted, user_dir)
    return validate(merged, sources)


def _apply_team(
    merged: dict[str, Any], sources: dict[KeyPath, str], team: str, untrusted: set[str]
) -> tuple[dict[str, Any], dict[KeyPath, str]]:
    """Overlay ``[teams.TEAM]``; each key keeps the name of the file that wrote it."""
    overlay = merged.get("teams", {}).get(team)
    if overlay is None:
        known = ", ".join(sorted(merged.get("teams", {}))) or "none defined"
        raise ConfigError(f"--team {team}: no [teams.{team}] in the role map (teams: {known})")
    by_file: dict[str, dict[str, Any]] = {}
    for path, value in trust.leaves(overlay):
        origin = _source_of(("teams", team, *path), sources)
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
    """The role map of a run: the one given, or the layers merged (see ``load_roles``).

    The user's config directory comes from ``env`` (``XDG_CONFIG_HOME``); without ``env`` there
    is no user layer and no recorded trust. ``trust_repo_config`` trusts the repository's own
    ``roles.toml`` for this call (see ``orchestrator.trust``).
    """
    if roles is not None:
        return resolve_overrides(roles, sets) if sets else roles
    user_dir = trust.user_config_dir(env) if env is not None else None
    return load_roles(repo=repo, files=[Path(f) for f in role_files], sets=sets, team=team,
                      user_dir=user_dir, trust_repo=trust_repo_config)


def resolve_overrides(roles: RoleMap, sets: Sequence[str]) -> RoleMap:
    """Apply ``--set`` style overrides to an already resolved role map."""
    data = roles.model_dump(mode="json")
    layers = [("role map", data), *[(f"--set {s}", parse_set(s)) for s in sets]]
    merged, sources = merge_layers(layers)
    return validate(merged, sources)


def merge_layers(
    layers: Sequence[Layer | tuple[str, dict[str, Any]]],
    sources: dict[KeyPath, str] | None = None,
) -> tuple[dict[str, Any], dict[KeyPath, str]]:
    """Merge layers in order (later wins, tables merge key by key); ``sources`` records which
    layer set each key. A layer named "merged" is an earlier result and records nothing."""
    merged: dict[str, Any] = {}
    sources = dict(sources or {})
    for layer in layers:
        name, data = layer[0], layer[1]
        _merge_into(merged, data, (), name if name != "merged" else None, sources)
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


def validate(data: dict[str, Any], sources: Mapping[tuple[str, ...], str]) -> RoleMap:
    try:
        # JSON mode keeps strict typing (no "8" -> 8) while accepting TOML arrays for tuples.
        roles = RoleMap.model_validate_json(json.dumps(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(str(p) for p in err["loc"])
        raise ConfigError(_describe(err, loc, sources)) from None
    _check_references(roles, sources)
    return roles


def _source_of(loc: tuple[str, ...], sources: Mapping[tuple[str, ...], str]) -> str:
    for n in range(len(loc), 0, -1):
        if loc[:n] in sources:
            return sources[loc[:n]]
    prefix = [src for key, src in sources.items() if key[: len(loc)] == loc]
    return prefix[-1] if prefix else "role map"


def _describe(err: Mapping[str, Any], loc: tuple[str, ...], sources: Mapping) -> str:
    key = ".".join(loc) or "(top level)"
    src = _source_of(loc, sources)
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = loc[:-1]
        allowed = _allowed_keys(parent)
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"{src}: unknown key {key}{hint}"
    if kind == "missing":
        return f"{src}: {key} is required"
    got = err.get("input")
    shown = f" (got {got!r})" if not isinstance(got, dict) else ""
    return f"{src}: {key}: {err['msg']}{shown}"


def _allowed_keys(parent: tuple[str, ...]) -> list[str]:
    """Walk the schema along ``parent`` (skipping dict keys) and list the fields found there."""
    annotation: Any = RoleMap
    for part in parent:
        model = _field_model(annotation)
        if model is not None and part in model.model_fields:
            annotation = model.model_fields[part].annotation
        elif getattr(annotation, "__origin__", None) is dict:
            annotation = annotation.__args__[1]
        else:
            return []
    model = _field_model(annotation)
    return sorted(model.model_fields) if model is not None else []


def _field_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if getattr(annotation, "__origin__", None) is dict:
        return None
    for arg in getattr(annotation, "__args__", ()):
        found = _field_model(arg)
        if found is not None:
            return found
    return None


def _check_references(roles: RoleMap, sources: Mapping[tuple[str, ...], str]) -> None:
    aliases = ", ".join(sorted(roles.models))
    for name, model in roles.models.items():
        if model.provider not in roles.providers:
            src = _source_of(("models", name, "provider"), sources)
            known = ", ".join(sorted(roles.providers))
            raise ConfigError(
                f"{src}: models.{name}.provider: unknown provider {model.provider!r} (known: {known})"
            )
    for role in ROLES:
        if role not in roles.roles:
            raise ConfigError(f"role map: roles.{role} is required (roles: {', '.join(ROLES)})")
    for role, spec in roles.roles.items():
        for i, alias in enumerate(roles.chain(role)):
            key = ("roles", role, "model") if i == 0 else ("roles", role, "fallback")
            if alias not in roles.models:
                src = _source_of(key, sources)
                raise ConfigError(
                    f"{src}: {'.'.join(key)}: unknown model alias {alias!r} (models: {aliases})"
                )
            provider_name = roles.models[alias].provider
            _check_effort(roles, role, alias, sources)
            if spec.tier not in roles.providers[provider_name].tiers:
                src = _source_of(("roles", role, "tier"), sources)
                offered = ", ".join(roles.providers[provider_name].tiers)
                raise ConfigError(
                    f"{src}: roles.{role}.tier: provider {provider_name!r} (model {alias!r}) has no "
                    f"tier {spec.tier!r} (offered: {offered}; add providers.{provider_name}.tiers.{spec.tier})"
                )


def _check_effort(roles: RoleMap, role: Role, alias: str,
                  sources: Mapping[tuple[str, ...], str]) -> None:
    """A role's effort must be one its models accept (the provider would answer 400)."""
    effort, accepted = roles.roles[role].effort, roles.models[alias].efforts
    if effort is None or accepted is None or effort in accepted:
        return
    src = _source_of(("roles", role, "effort"), sources)
    raise ConfigError(
        f"{src}: roles.{role}.effort: model {alias!r} ({roles.models[alias].id}) does not accept "
        f"effort {effort!r} (it takes {', '.join(accepted)}; see models.{alias}.efforts)"
    )
