"""Model errors by what to do about them, and ``classify`` that sorts an SDK error into one.

``QuotaExhausted`` -> the model is out until ``reset_at``: go down the chain. ``RateLimited``
-> wait ``retry_after`` (within the call's budget), then go down the chain. ``Transient`` (5xx,
timeouts, dropped or cut streams) -> retry with jittered backoff, then go down the chain.
``ContextOverflow`` -> the session's problem, raised unchanged. ``ModelRefused`` (401, 403,
unknown model, bad request) -> stop: retrying or another model will not fix the role map.
An unknown model (404) stops too rather than falling back: it is a typo or a retired id in the
role map, and quietly serving a whole run on the fallback would hide it. So does a model asked
through the wrong wire API, or with an effort or tier it does not take: the message names the
setting to change. Errors a server reports inside a stream (the Responses API's
``response.failed`` and ``error`` events, a Chat Completions ``error`` chunk) carry a code and a
message but no status; ``stream_error`` sorts them the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

import openai

from orchestrator.errors import ContextOverflow, ModelError, ModelUnavailable

if TYPE_CHECKING:
    from orchestrator.models.base import Route


class ModelRefused(ModelError):
    """The provider refused the request (key, permission, unknown model, bad request).

    Another attempt or another model will not fix it: the role map or the key is wrong, so it
    is a configuration error (exit 2) wherever it happens, explorers included."""

    exit_code = 2
    code = "model_refused"


class ModelMisconfigured(ModelRefused):
    """The model refuses what the role map asks of it (wire API, effort, tier): a configuration
    error, so the message names the key to change and the exit code is 2."""

    code = "model_misconfigured"
    exit_code = 2


class QuotaExhausted(ModelUnavailable):
    """The model's quota or usage limit is spent until ``reset_at`` (UTC)."""

    code = "insufficient_quota"

    def __init__(self, message: str, *, reset_at: datetime | None = None) -> None:
        super().__init__(message)
        self.reset_at = reset_at


class RateLimited(ModelUnavailable):
    """A 429 rate limit; ``retry_after`` is the server's hint in seconds, if it gave one."""

    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Transient(ModelUnavailable):
    """A 5xx, a timeout, a dropped connection or a stream that ended without a finish."""

    code = "transient"


_CONTEXT_CODES = {"context_length_exceeded", "exceed_context_size_error"}
# Codes of a request the model will refuse however often it is sent (Responses API errors).
_REQUEST_CODES = {"invalid_prompt", "invalid_request_error", "bio_policy", "data_residency_mismatch",
                  "misalignment_policy_violation", "invalid_image", "invalid_image_format",
                  "invalid_base64_image", "invalid_image_url", "image_too_large", "image_too_small",
                  "image_parse_error", "image_content_policy_violation", "invalid_image_mode",
                  "image_file_too_large", "unsupported_image_media_type", "empty_image_file",
                  "failed_to_download_image", "image_file_not_found"}
_TRY_AGAIN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s)\b", re.I)
_ONLY_RESPONSES = ("only supported in v1/responses", "not supported in v1/chat/completions")
_ONLY_CHAT = ("only supported in v1/chat/completions", "not supported in v1/responses")
_QUOTA_CODES = {"insufficient_quota", "usage_limit_reached", "quota_exceeded"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def is_context_overflow(exc: openai.APIError) -> bool:
    """OpenAI, llama.cpp and vLLM each say it differently; all mean the same."""
    body = exc.body if isinstance(exc.body, Mapping) else {}
    code = getattr(exc, "code", None) or body.get("code")
    kind = body.get("type")
    message = str(getattr(exc, "message", "") or exc).lower()
    return (
        code in _CONTEXT_CODES
        or kind in _CONTEXT_CODES
        or "maximum context length" in message
        or "exceeds the available context size" in message
    )


def is_quota_exhausted(exc: openai.APIError) -> bool:
    body = exc.body if isinstance(exc.body, Mapping) else {}
    codes = {getattr(exc, "code", None), getattr(exc, "type", None), body.get("code")}
    message = str(getattr(exc, "message", "") or "").lower()
    return bool(codes & _QUOTA_CODES) or "exceeded your current quota" in message


def parse_duration(text: str) -> float | None:
    """``"20ms"``, ``"1.5s"``, ``"6m0s"``, ``"2h3m4s"`` or plain seconds -> seconds."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def retry_after_s(headers: Mapping[str, str], now: datetime) -> float | None:
    """The server's wait hint: ``retry-after-ms``, else ``retry-after`` (seconds or a date)."""
    h = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in h:
        ms = parse_duration(h["retry-after-ms"])
        if ms is not None:
            return ms / 1000
    raw = h.get("retry-after")
    if raw is None:
        return None
    seconds = parse_duration(raw)
    if seconds is not None:
        return seconds
    try:
        return max(0.0, (parsedate_to_datetime(raw) - now).total_seconds())
    except (TypeError, ValueError):
        return None


def next_utc_midnight(now: datetime) -> datetime:
    return datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)


def quota_reset(headers: Mapping[str, str], now: datetime) -> datetime:
    """When an exhausted quota comes back: the longest hint in the headers, else next midnight."""
    h = {k.lower(): v for k, v in headers.items()}
    hints = [parse_duration(h[k]) for k in ("x-ratelimit-reset-tokens", "x-ratelimit-reset-requests")
             if k in h]
    hints.append(retry_after_s(h, now))
    known = [s for s in hints if s is not None]
    return now + timedelta(seconds=max(known)) if known else next_utc_midnight(now)


def where(route: Route) -> str:
    """``role planner: model sol (gpt-5.1) at provider openai`` for error messages."""
    return (f"role {route.role}: model {route.alias} ({route.model.id}) "
            f"at provider {route.provider_name}")


def _api_setting(route: Route, api: str) -> str:
    return (f'set api = "{api}" on models.{route.alias} (or on providers.{route.provider_name} '
            "for all its models)")


def misrouted(route: Route, exc: openai.APIStatusError) -> ModelMisconfigured | None:
    """A request the model refuses because of a setting in the role map: the wire API, the
    effort or the tier. One line naming the model and the key to change; None otherwise."""
    at, message = where(route), str(getattr(exc, "message", "") or "")
    lower = message.lower()
    body = exc.body if isinstance(exc.body, Mapping) else {}
    param = str(body.get("param") or "")
    wrong = None
    if any(p in lower for p in _ONLY_RESPONSES) and route.api != "responses":
        wrong = ("this model answers only the Responses API, and it was asked through Chat "
                 f"Completions: {_api_setting(route, 'responses')}")
    elif any(p in lower for p in _ONLY_CHAT) and route.api != "chat":
        wrong = ("this model answers only Chat Completions, and it was asked through the "
                 f"Responses API: {_api_setting(route, 'chat')}")
    elif isinstance(exc, openai.NotFoundError) and body.get("code") != "model_not_found" \
            and "model" not in lower:
        path = "/v1/responses" if route.api == "responses" else "/v1/chat/completions"
        other = "chat" if route.api == "responses" else "responses"
        wrong = (f"the server has no {path} (404: {message}); {_api_setting(route, other)}, "
                 "or fix the provider's base_url")
    elif isinstance(exc, openai.BadRequestError) and "effort" in param:
        wrong = (f"the model refuses effort {route.effort!r} ({message}); change "
                 f"roles.{route.role}.effort, and list what it takes in models.{route.alias}.efforts")
    elif isinstance(exc, openai.BadRequestError) and "service_tier" in f"{param} {lower}":
        wrong = (f"the model refuses service_tier {route.service_tier!r} ({message}); change "
                 f"roles.{route.role}.tier or providers.{route.provider_name}.tiers.{route.tier}")
    return ModelMisconfigured(f"{at}: {wrong}") if wrong else None


def stream_error(route: Route, code: str | None, message: str,
                 now: datetime | None = None) -> ModelError:
    """An error reported inside a stream (no HTTP status): sorted by its code and message."""
    at, lower = where(route), message.lower()
    if code in _CONTEXT_CODES or "maximum context length" in lower \
            or "exceeds the available context size" in lower or "context window" in lower:
        return ContextOverflow(f"{at}: {message}")
    if code in _QUOTA_CODES or "exceeded your current quota" in lower:
        reset = next_utc_midnight(now or datetime.now(UTC))
        return QuotaExhausted(f"{at}: quota exhausted until {reset:%Y-%m-%d %H:%M} UTC: "
                              f"{message}", reset_at=reset)
    if code == "rate_limit_exceeded":
        hint = _TRY_AGAIN.search(message)
        wait = float(hint.group(1)) * _UNIT_S[hint.group(2).lower()] if hint else None
        return RateLimited(f"{at}: rate limited: {message}", retry_after=wait)
    if code in _REQUEST_CODES:
        return ModelRefused(f"{at}: the model refused the request ({code}): {message}")
    return Transient(f"{at}: the stream reported an error ({code or 'no code'}): {message}")


def classify(exc: openai.APIError, route: Route, now: datetime | None = None) -> ModelError:
    """Turn an SDK error into one of ours, naming the role, model and provider."""
    now = now or datetime.now(UTC)
    at = where(route)
    message = getattr(exc, "message", None) or str(exc)
    if type(exc) is openai.APIError:  # the SDK raises this for an error chunk inside a stream
        body = exc.body if isinstance(exc.body, Mapping) else {}
        return stream_error(route, body.get("code") or body.get("type"), message, now)
    headers = dict(exc.response.headers) if isinstance(exc, openai.APIStatusError) else {}
    if isinstance(exc, openai.BadRequestError) and is_context_overflow(exc):
        return ContextOverflow(f"{at}: {message}")
    if isinstance(exc, openai.APIStatusError):
        refused = misrouted(route, exc)
        if refused is not None:
            return refused
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return ModelRefused(
            f"{at}: the provider refused the API key ({exc.status_code}); "
            f"check ${route.provider.api_key_env}"
        )
    if isinstance(exc, openai.NotFoundError):
        return ModelRefused(
            f"{at}: unknown model or endpoint (404): {message}; fix models.{route.alias}.id "
            "or the provider's base_url"
        )
    if isinstance(exc, openai.RateLimitError) and is_quota_exhausted(exc):
        reset = quota_reset(headers, now)
        return QuotaExhausted(f"{at}: quota exhausted until {reset:%Y-%m-%d %H:%M} UTC: {message}",
                              reset_at=reset)
    if isinstance(exc, openai.RateLimitError):
        return RateLimited(f"{at}: rate limited: {message}", retry_after=retry_after_s(headers, now))
    if isinstance(exc, openai.InternalServerError | openai.APIConnectionError):
        return Transient(f"{at}: {type(exc).__name__}: {message}")
    if isinstance(exc, openai.APIStatusError) and exc.status_code in (408, 409):
        return Transient(f"{at}: {type(exc).__name__}: {message}")
    return ModelRefused(f"{at}: {type(exc).__name__}: {message}")
