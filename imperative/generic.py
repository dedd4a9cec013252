"""Placeholder: GenericPyOp, ops written in Python."""


class GenericPyOp:
    """Subclass and define `_default_rule(self, *inputs)`."""
