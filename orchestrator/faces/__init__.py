"""The faces of the engine: what people, bots and other programs talk to.

The ``orchestrate`` command (``cli``, its commands in ``cli_run`` and ``cli_admin`` on
``cliapp``) and what it prints (``render``, ``progress``, ``rolesview``, ``claimviews``), the
MCP server, LangGraph's platform graph, the fleet's ``submit``/``worker``, the demo and
``init``'s starter map. Each is a thin shell over the library API (``api``): no
face holds logic a bot would need, and nothing below imports a face.
"""
