"""What a run leaves behind: typed events (``events``) written by its ``telemetry``, spans
(``tracing``), checkpoints (``store``), the run registry (``registry``), and the small SQLite
and background-writer helpers they share (``sqlite``, ``writer``).
"""
