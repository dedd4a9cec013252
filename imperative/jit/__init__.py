"""Trace and compiled replay (API.md §9). Work in progress: the recorded program's form is
in `program.py`."""
