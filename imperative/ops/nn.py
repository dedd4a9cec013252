"""Placeholder: filled in by the op-library work."""
__all__ = []
