"""One agent session: the tool-calling loop every role shares (``loop``) and its context
window's care: token counting (``tokens``), the ledger of what the prompt costs (``ledger``), the
policy and masking (``context``), the transcript a summariser reads (``transcript``) and the
session tree of a run's events (``tree``).
"""
