"""What explorers found, and whether to believe it: every citation checked mechanically.

``verify`` judges claims against ``sources`` (files at the run's commit or in a tree) with
``support``'s word checks; ``questions`` cleans the planner's questions before explorers are
paid for; ``known`` says what the failing tests already show; ``digest`` merges verified claims
for the builder; ``claimstats`` counts how truthful each explorer model was.
"""
