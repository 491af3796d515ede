"""What agents may do: search and read (ripgrep, files, git history) for every role, edits and
the shell for builders. Every path goes through ``jail``; every command through ``shell`` into
``orchestrator.sandbox``.
"""
