"""Where a run's builder works: its own repository borrowing the user's objects read-only
(``worktree``), finding the user's repository (``repo``) and the tree taken while the model
writes (``ahead``). The OS boundary around its commands is ``orchestrator.sandbox``.
"""
