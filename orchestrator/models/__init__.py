"""Model access: one ``ModelClient`` protocol (``base``) over both wire APIs (``chat``,
``responses``), tool calls for models without native ones (``toolmode``), error classes
(``errors``), fallback chains and retries (``fallback``), routing records (``routing``), quotas
and budgets (``quota``, ``quota_pg``, ``budget``), and the journal of completed calls that a
resumed run replays instead of paying again (``journal``).
"""
