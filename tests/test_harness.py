"""tools/_harness.py, the timing harness of the benchmarks: the order of interleaved rounds,
best-of and paired medians, child processes (record, failure, timeout), the table; and
that every tools/bench_*.py uses it."""
import ast
import os
import statistics
import sys
import time
import weakref
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
if not TOOLS.is_dir():
    pytest.skip("tools/ is not here (an installed wheel)", allow_module_level=True)
sys.path.insert(0, str(TOOLS))
import _harness  # noqa: E402


def test_every_round_runs_each_contender_once_in_turn():
    calls = []
    contenders = {name: (lambda name=name: calls.append(name) or len(calls)) for name in "abc"}
    results = _harness.interleaved(contenders, rounds=3)
    assert calls == list("abc") * 3
    # each contender's results are its own calls' results, in round order
    assert results == {"a": [1, 4, 7], "b": [2, 5, 8], "c": [3, 6, 9]}


def test_rotating_rounds_start_one_contender_later_each_time():
    calls = []
    contenders = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    _harness.interleaved(contenders, rounds=3, rotate=True)
    assert calls == list("bca" + "cab" + "abc")


def test_best_and_paired_median():
    mine = [{"step_s": s} for s in (0.30, 0.20, 0.25, 0.40)]
    theirs = [{"step_s": s} for s in (0.20, 0.25, 0.25, 0.20)]
    assert _harness.best(mine, key="step_s") is mine[1]
    assert _harness.best([3.0, 1.5, 2.0]) == min([3.0, 1.5, 2.0])
    ratios = [a["step_s"] / b["step_s"] for a, b in zip(mine, theirs)]
    assert _harness.paired_median(mine, theirs, key="step_s") == pytest.approx(
        statistics.median(ratios))
    # a lucky round of one contender moves its best ratio but not the paired median much
    assert _harness.paired_median([1.0, 1.0, 0.1], [1.0, 1.0, 1.0]) == 1.0


def test_seconds_calls_repeat_times_and_finishes_once():
    calls = {"fn": 0, "finish": 0}

    def fn():
        calls["fn"] += 1

    def finish():
        calls["finish"] += 1

    assert _harness.seconds(fn, finish, repeat=7) >= 0
    assert calls == {"fn": 7, "finish": 1}
    times = _harness.call_times(fn, calls=4, warmup=2)
    assert len(times) == 4 and all(t >= 0 for t in times) and calls["fn"] == 13


def test_the_last_result_lives_until_the_clock_stops():
    class Result:
        pass

    made, alive_at_finish = [], []

    def fn():
        result = Result()
        made.append(weakref.ref(result))
        return result

    _harness.seconds(fn, lambda: alive_at_finish.append(made[-1]() is not None), repeat=3)
    assert alive_at_finish == [True]            # held through the sync, not freed inside it
    assert all(ref() is None for ref in made)   # and nothing is kept afterwards


def test_calls_per_timing_follow_the_fastest_contender():
    def slow():
        time.sleep(0.005)

    alone = _harness.repeats_for([slow], target_s=0.02, most=10 ** 6)
    assert 1 <= alone <= 4                      # each call takes at least 5 ms
    # with a contender thousands of times faster, the calls are counted for that one
    assert _harness.repeats_for([slow, lambda: None], target_s=0.02, most=10 ** 6) > alone
    assert _harness.repeats_for([lambda: None], target_s=0.02, most=5) == 5     # the cap


def _child(code):
    env = dict(os.environ, PYTHONPATH=str(TOOLS) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return [sys.executable, "-c", code], env


def test_a_child_hands_its_last_record_back_past_other_output():
    argv, env = _child("import _harness; print('noise'); _harness.report({'x': 1}); "
                       "_harness.report({'step_s': 0.5, 'loss': [1.0, 2.0]}); print('more')")
    record, wall = _harness.run_child(argv, env=env)
    assert record == {"step_s": 0.5, "loss": [1.0, 2.0]} and wall > 0


def test_a_failing_or_silent_child_gives_a_failed_record(capsys):
    argv, env = _child("raise SystemExit('the budget is below the floor')")
    record, _ = _harness.run_child(argv, env=env)
    assert record == {"failed": "the budget is below the floor"}
    assert "the budget is below the floor" in capsys.readouterr().err
    argv, env = _child("print('no record')")
    record, _ = _harness.run_child(argv, env=env)
    assert record == {"failed": "exit status 0, no record"}


def test_a_child_past_its_timeout_is_stopped():
    argv, env = _child("import time; time.sleep(30)")
    record, wall = _harness.run_child(argv, timeout=0.5, env=env)
    assert record == {"timed_out": True} and wall < 20


def test_the_table_aligns_its_columns_and_marks_missing_values(capsys):
    _harness.print_table({"conv2d": {"imperative": 55.123, "torch": 70.2},
                          "a longer case name": {"imperative": 1.5}},
                         {"imperative": ".2f", "torch": ".2f"})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and len({len(line) for line in lines}) == 1
    assert lines[1].split() == ["conv2d", "55.12", "70.20"]
    assert lines[2].split()[-2:] == ["1.50", "-"]


def test_every_benchmark_uses_the_harness():
    for path in sorted(TOOLS.glob("bench_*.py")):
        imported = {alias.name for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.Import) for alias in node.names}
        assert "_harness" in imported, f"{path.name} does not use tools/_harness.py"
