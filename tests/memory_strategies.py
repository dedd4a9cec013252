"""Hypothesis strategies over memory_programs' and grad_programs' generators: their
integers drawn by hypothesis, so that a failing program shrinks (tests/test_memory_fuzz.py,
tests/test_dtr_choice.py)."""
import functools

from hypothesis import strategies as st

import grad_programs as gp
import memory_programs as mp


@functools.lru_cache(maxsize=None)
def integers(lo, hi):
    """One strategy per range: building a new one for each of a program's hundreds of
    draws costs more than running small programs."""
    return st.integers(lo, hi)


class DrawChooser(mp.Chooser):
    """The generator's integers drawn by hypothesis."""

    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo, hi):
        return self.draw(integers(lo, hi))


@st.composite
def programs(draw, min_ops=10, max_ops=60):
    return mp.draw_program(DrawChooser(draw), min_ops, max_ops)


@st.composite
def grad_programs(draw, min_ops=4, max_ops=30):
    return gp.draw_grad_program(DrawChooser(draw), min_ops, max_ops)
