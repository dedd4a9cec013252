"""Trace and compiled replay (API.md section 9): `imp.jit.trace` records a function's ops on
its first call and replays them on later calls, checked against the record
(`symbolic=False`) or as one compiled plan without the Python body (`symbolic=True`).

    recorder.py   the core's tracer while a call records (or is checked): a Program
    program.py    the recorded program, plain data (values, steps, effects)
    compiler.py   a Program into a plan: liveness, fused elementwise chains, kernels
    replay.py     binding a call's values, running steps, effects and results
    trace.py      the decorator: signatures, the cache, stats, dump
"""
from .errors import TraceMismatchError, TraceReadError, TraceValueReadWarning
from .recorder import exclude_from_trace
from .trace import trace

__all__ = ["trace", "exclude_from_trace", "TraceMismatchError", "TraceReadError",
           "TraceValueReadWarning"]
