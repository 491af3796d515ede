"""Community library catalogue search."""
