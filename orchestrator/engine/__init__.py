"""The run itself: the LangGraph graph, its nodes, and what a run holds open while it runs.

``graph`` wires the steps (localise -> plan -> explore -> build <-> verify -> judge -> report);
``nodes`` are the steps; ``agentstep`` runs any role as a session of its agent, with the build
strategies beside it (``race``, ``oneshot``); ``preflight`` and ``acceptance`` run the
acceptance commands; ``runtime`` is what every node is handed; ``lifecycle`` opens and closes a
run around the graph.
"""
