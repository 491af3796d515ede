"""One agent session: the tool-calling loop every role shares (``loop``) and its context
window's care (``context``: token accounting, masking, forking, the session tree).
"""
