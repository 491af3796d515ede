"""The run itself: the LangGraph graph, its nodes, and what a run holds open while it runs.

``graph`` wires the steps (localise -> plan -> explore -> build <-> verify -> judge -> report);
``nodes`` are the steps; ``agentstep`` runs any role as a session of its agent, with the build
strategies beside it (``race``, ``oneshot``); ``preflight`` and ``acceptance`` run the
acceptance commands; ``runtime`` is what every node is handed. ``options`` is what a run is
given; ``lifecycle`` is the one way into a run (``open_run``) and holds it open around the
graph, which ``drive`` runs; ``runfiles`` writes what a run keeps and builds its result.
"""
