"""Whether a run's roles have their providers' API keys: checked before anything of the run is
made (``lifecycle``) and by the pool. A module of its own, without the OpenAI SDK, so a run
refused for a missing key does not pay for importing it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.config.schema import RoleMap
from orchestrator.errors import MissingCredentials
from orchestrator.state import Role

__all__ = ["check_credentials"]


def check_credentials(role_map: RoleMap, env: Mapping[str, str], roles: Sequence[Role]) -> None:
    """Fail early, before any work (and before a pool exists), when a provider that ``roles``
    need has no key in ``env``."""
    for role in roles:
        provider_name = role_map.model_for(role).provider
        env_var = role_map.providers[provider_name].api_key_env
        if not env.get(env_var):
            raise MissingCredentials(
                f"role {role} uses provider {provider_name!r}, whose API key is not set: "
                f"export {env_var}=... (or try `orchestrate demo`, which needs no key)"
            )
