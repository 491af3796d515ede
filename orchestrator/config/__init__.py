"""The role map and the agent files: what a run is configured with, read once.

``schema`` holds the frozen models a role map validates into; ``layers`` finds and merges its
layers (packaged, user, repository, ``--roles``, team, environment, ``--set``) and loads it;
``trust`` decides what a repository may set without the user's trust; ``definitions`` parses
agent files and ``kinds`` says what each kind of role is; ``pipeline`` checks which roles run
in which step; ``prompts`` and ``packaged`` read the texts and files the package ships.
"""
