"""Placeholder: the functional API (imperative.functional, also imperative.F)."""
