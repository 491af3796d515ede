"""Where a run's builder works: its own repository borrowing the user's objects read-only
(``worktree``: its life; ``tree``: its files through the run's own index; ``commits``: the run
branch), the user's repository as a run reads it (``repo``), and the work done ahead of the
critical path with its staleness checks (``ahead``). The OS boundary around its commands is
``orchestrator.sandbox``.
"""
