"""tools/storm_sweep.py's check of issue 12's first rule across budgets,
tools/peak_rules_jitter.py run end to end on a model of the tests' sets, and
tools/fuzz_memory.py's check of that rule on random programs."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
if not os.path.isdir(TOOLS):
    pytest.skip("tools/ is not here (an installed wheel)", allow_module_level=True)
sys.path.insert(0, TOOLS)
import storm_sweep  # noqa: E402

P = 1000


def _point(peak, outputs=100):
    return {"peak": peak, "P": P, "outputs": outputs}


def test_a_tighter_budget_peaking_higher_beyond_one_ops_outputs_is_found():
    points = {"set/a/0.3/4096": _point(900), "set/a/0.5/4096": _point(700),
              "set/a/0.7/4096": _point(850),
              "set/b/0.3/4096": _point(790), "set/b/0.5/4096": _point(700)}
    found = storm_sweep.tighter_peaked_higher(points)
    # a at 0.3 P passed its 0.5 P peak by 200 (100 beyond one op's outputs); b by 90 only
    assert found == [(0.1, "set/a/4096", 0.3, 0.5)]


def test_points_of_other_evictee_minimums_are_not_compared():
    points = {"set/a/0.3/4096": _point(900), "set/a/0.5/65536": _point(100)}
    assert storm_sweep.tighter_peaked_higher(points) == []


def test_a_sweep_written_before_the_outputs_were_measured_counts_none():
    points = {"set/a/0.3/4096": {"peak": 900, "P": P}, "set/a/0.5/4096": {"peak": 100, "P": P}}
    assert storm_sweep.tighter_peaked_higher(points) == []


def test_the_jittered_peak_rules_tool_trains_a_model_and_counts():
    out = subprocess.run(
        [sys.executable, os.path.join(TOOLS, "peak_rules_jitter.py"), "memwrite",
         "--seeds", "0:2", "--fractions", "0.7"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    summary = out.stdout.strip().splitlines()[-1]
    assert summary.startswith("points 2, losses differ 0, above max(budget, floor) 0, above P ")


def test_the_jittered_peak_rules_tool_names_the_models_it_knows():
    out = subprocess.run([sys.executable, os.path.join(TOOLS, "peak_rules_jitter.py"), "nosuch"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert "model 'nosuch': expected one of" in out.stderr and "memwrite" in out.stderr


FUZZ_MEMORY = os.path.join(TOOLS, "fuzz_memory.py")


def fuzzed_without_failure(seed, flag, programs=12):
    """tools/fuzz_memory.py on `programs` programs from `seed`, in a child process, with
    `flag`: each program's counts, none of them a failure."""
    done = subprocess.run([sys.executable, FUZZ_MEMORY, "--child", "--programs", str(programs),
                           "--seed", str(seed), flag], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "FAIL" not in done.stdout, done.stdout + done.stderr
    counts = [json.loads(line[len("COUNTS "):]) for line in done.stdout.splitlines()
              if line.startswith("COUNTS ")]
    assert [c["seed"] for c in counts] == list(range(seed, seed + programs))
    return counts


def test_fuzz_memory_runs_programs_again_under_half_their_budget():
    """tools/fuzz_memory.py --tighter: each DTR program that keeps the other rules runs again
    under half its budget (issue 12: a tighter budget never peaks higher)."""
    counts = fuzzed_without_failure(5000000, "--tighter")
    assert sum(c.get("tighter_runs", 0) for c in counts) == sum(c["dtr_programs"] for c in counts)
    assert sum(c["dtr_programs"] for c in counts) > 0
    assert not any(c.get("tighter_peaked_higher") for c in counts)


def test_fuzz_memory_runs_training_programs():
    """tools/fuzz_memory.py --grad: training programs (forward, GradManager's backward, SGD
    steps) under the same rules; --shrink takes them too, and says so of one that keeps
    them."""
    counts = fuzzed_without_failure(6000000, "--grad")
    assert sum(c["dtr_programs"] for c in counts) > 0
    assert sum(c.get("evictions", 0) for c in counts) > 0
    shrunk = subprocess.run([sys.executable, FUZZ_MEMORY, "--seed", "6000000", "--shrink",
                             "--grad"], capture_output=True, text=True, timeout=120)
    assert shrunk.returncode == 1 and "seed 6000000: does not fail" in shrunk.stdout


def test_shrinking_a_training_program_removes_a_step_with_what_reads_it_and_its_loss():
    """A step removed takes every later step reading what it made, and the loss terms it
    made; a program left with no loss term is no candidate; fewer training steps are."""
    import fuzz_memory
    import grad_programs as gp
    import memory_programs as mp
    leaf = mp.Leaf(shape=(4,), layout="C", seed=1)
    steps = (mp.Step("op", (0,), "exp", (), 1), mp.Step("op", (1,), "tanh", (), 2),
             mp.Step("op", (0,), "sin", (), 3))
    program = gp.GradProgram(params=(leaf,), inputs=(), steps=steps, loss=(2, 3),
                             train_steps=2, momentum=0.0, largest_output=16)
    candidates = list(fuzz_memory.simpler_programs(program))
    assert candidates[0] == dataclasses.replace(program, train_steps=1)
    by_steps = {c.steps: c.loss for c in candidates[1:]}
    assert by_steps == {steps[:2]: (2,), (steps[0], steps[2]): (3,), (steps[2],): (3,)}
    assert fuzz_memory.without_step(dataclasses.replace(program, loss=(2,)), 0) is None
