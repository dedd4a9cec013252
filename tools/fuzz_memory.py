"""Fuzz the memory manager with thousands of random programs (the generator of
tests/memory_programs.py, seeded): each program runs with everything off and then with
random drops, swaps and deaths at a random async level, under DTR at a random budget
(0.05-1.0 of its unmanaged peak) in most programs. Counts mismatches (a value read that is not
bit-identical), peak-rule violations (DTR peak above max(budget, floor) + the largest op
output), exceptions, handle leaks and crashes (programs run in child processes, so that a
segfault costs one program); prints them and a JSON line.

    python tools/fuzz_memory.py --programs 3000 --seed 0
    python tools/fuzz_memory.py --programs 1 --seed 1234 --verbose   # one failing program again
    python tools/fuzz_memory.py --seed 1234 --shrink    # its smallest failing program, as steps
    python tools/fuzz_memory.py --seed 1234 --shrink --tighter   # ... that a tighter budget fails
    python tools/fuzz_memory.py --seed 1234 --shrink --flaky 8   # ... failing one run in a few
    python tools/fuzz_memory.py --programs 3000 --tighter   # also: half the budget peaks no higher
    python tools/fuzz_memory.py --programs 3000 --grad      # training programs (autodiff)

With --tighter, each DTR program that keeps the other rules runs again under half its
budget, and a peak above the first run's + the largest op output counts as a violation of
issue 12's "a tighter budget never gives a higher peak than a looser one".

With --grad, the programs train (tests/grad_programs.py): the same random ops make a forward
pass over parameters, GradManager's backward pass and an SGD step follow, a few times; the
losses, gradients and parameters are read, and the same rules are checked.

Program i uses seed S + i, so any failure it prints can be rerun alone.
"""
import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..")]

import grad_programs as gp       # noqa: E402
import imperative as imp          # noqa: E402  (after the path set-up above)
import memory_programs as mp      # noqa: E402

KINDS = {False: (mp.draw_program, mp.run_program),          # --grad: (generator, runner)
         True: (gp.draw_grad_program, gp.run_grad_program)}


def fuzz_one(seed, totals, verbose, tighter=False, grad=False):
    """Run program `seed` and add what happened to `totals` (a Counter); `tighter`: the
    DTR run again under half its budget, `grad`: a training program (see the module's
    docstring)."""
    draw, run = KINDS[grad]
    chooser = mp.SeededChooser(seed)
    program, setting = draw(chooser), mp.draw_setting(chooser)
    level = chooser.choice((0, 2))
    totals["programs"] += 1
    totals["ops"] += program.op_count
    totals["dtr_programs"] += setting.dtr
    before = mp.live_handles()
    try:
        with imp.option("async_level", level):
            reference = run(program)
            managed = run(program, setting, mp.budget_for(setting, reference))
    except Exception:
        totals["exceptions"] += 1
        report(seed, level, setting, traceback.format_exc(limit=4))
        return
    for key in ("drops", "swaps", "refused_swaps"):
        totals[key] += getattr(managed, key)
    for key in ("evictions", "recomputes", "swap_outs", "swap_ins", "budget_overshoots"):
        totals[key] += managed.stats[key]
    found = mp.mismatches(reference.reads, managed.reads)
    if found:
        totals["mismatches"] += 1
        report(seed, level, setting, "; ".join(found[:3]))
    excess = mp.peak_rule_excess(program, managed) if setting.dtr else 0
    if setting.dtr and not excess:       # (the same drops and swaps, DTR off)
        with imp.option("async_level", level):
            over, off_peak = mp.peak_over_dtr_off(program, setting, managed, run)
        if over:
            totals["peak_rule_violations"] += 1
            report(seed, level, setting, f"peak {managed.peak} passes the peak with DTR off "
                                         f"{off_peak} + largest output "
                                         f"{program.largest_output} by {over}")
    if excess:
        totals["peak_rule_violations"] += 1
        report(seed, level, setting, f"peak {managed.peak} passes max(budget {managed.budget}, "
                                     f"floor {managed.stats['peak_floor']}) + largest output "
                                     f"{program.largest_output} by {excess}")
    elif tighter and setting.dtr:
        with imp.option("async_level", level):
            over, tight_peak = mp.peak_over_a_tighter_budget(program, setting, managed, run)
        totals["tighter_runs"] += 1
        if over:
            totals["tighter_peaked_higher"] += 1
            report(seed, level, setting, f"under half the budget ({managed.budget // 2}) the "
                                         f"peak {tight_peak} passes {managed.peak} + largest "
                                         f"output {program.largest_output} by {over}")
    leaked = mp.leaked_handles(before)
    if leaked:
        totals["leaks"] += 1
        report(seed, level, setting, f"{leaked} handle(s) leaked")
    if verbose:
        print(f"seed {seed}: async {level}, {setting}, {program.op_count} ops, peak {managed.peak} "
              f"(reference {reference.peak}), {managed.stats}")


def report(seed, level, setting, what):
    print(f"FAIL seed {seed} (async {level}, {setting}): {what}", flush=True)


def fails(program, setting, level, repeats=3, grad=False, tighter=False, in_any=False):
    """What goes wrong in every one of `repeats` runs ("mismatch", "peak", "peak over DTR
    off", with `tighter` "tighter peaks higher", or None): a failure at async level 2 can
    depend on timing, and shrinking must not chase luck. With `in_any`, what goes wrong in
    at least one of them (a failure that timing shows only now and then, --flaky), the
    first run that fails ending the runs. `grad`: a training program."""
    run = KINDS[grad][1]
    kinds = None
    for _ in range(repeats):
        with imp.option("async_level", level):
            reference = run(program)
            managed = run(program, setting, mp.budget_for(setting, reference))
            excess = setting.dtr and mp.peak_rule_excess(program, managed)
            # (the run with DTR off at the same level, as fuzz_one's, where it is compared)
            over_dtr_off = (setting.dtr and not excess
                            and mp.peak_over_dtr_off(program, setting, managed, run)[0])
            tighter_higher = (tighter and setting.dtr and not excess
                              and mp.peak_over_a_tighter_budget(program, setting, managed,
                                                                run)[0])
        found = set()
        if mp.mismatches(reference.reads, managed.reads):
            found.add("mismatch")
        if excess:
            found.add("peak")
        elif over_dtr_off:
            found.add("peak over DTR off")
        if tighter_higher:
            found.add("tighter peaks higher")
        if in_any:
            if found:
                return found
            continue
        kinds = found if kinds is None else kinds & found
        if not kinds:
            return None
    return kinds


def without_step(program, index):
    """`program` less step `index`, and less every later step that reads what it made (a
    training program also less the loss terms it made; None where none would be left)."""
    gone = {program.steps[index].out} if program.steps[index].kind == "op" else set()
    steps = []
    for k, step in enumerate(program.steps):
        if k == index:
            continue
        if any(a in gone for a in step.args):
            if step.kind == "op":
                gone.add(step.out)
            continue
        steps.append(step)
    if not hasattr(program, "loss"):
        return dataclasses.replace(program, steps=tuple(steps))
    loss = tuple(slot for slot in program.loss if slot not in gone)
    return dataclasses.replace(program, steps=tuple(steps), loss=loss) if loss else None


def simpler_programs(program):
    """Candidates one step simpler than `program`: fewer training steps, then each step
    removed (the last first)."""
    if getattr(program, "train_steps", 1) > 1:
        yield dataclasses.replace(program, train_steps=program.train_steps - 1)
    for index in reversed(range(len(program.steps))):
        candidate = without_step(program, index)
        if candidate is not None:
            yield candidate


def shrink(seed, grad=False, tighter=False, flaky=0):
    """Print the smallest program (steps removed one at a time, simpler settings tried)
    that still fails as program `seed` does; with `flaky` > 0, fails in at least one of
    that many runs (a failure at async level 2 that timing shows one run in a few)."""
    runs = dict(repeats=flaky, in_any=True) if flaky else {}
    draw = KINDS[grad][0]
    chooser = mp.SeededChooser(seed)
    program, setting = draw(chooser), mp.draw_setting(chooser)
    level = chooser.choice((0, 2))
    with mp.expected_warnings_ignored():
        kinds = fails(program, setting, level, grad=grad, tighter=tighter, **runs)
        if not kinds:
            print(f"seed {seed}: does not fail")
            return 1

        def still_fails(candidate, candidate_setting, candidate_level):
            """It fails in at least the ways the drawn program did."""
            return (fails(candidate, candidate_setting, candidate_level, grad=grad,
                          tighter=tighter, **runs) or set()) >= kinds

        for simpler in (dataclasses.replace(setting, dtr=False),
                        dataclasses.replace(setting, enable_swap=0)):
            if still_fails(program, simpler, level):
                setting = simpler
        if level and still_fails(program, setting, 0):
            level = 0
        shrunk = True
        while shrunk:
            shrunk = False
            for candidate in simpler_programs(program):
                if still_fails(candidate, setting, level):
                    program, shrunk = candidate, True
                    break
    print(f"seed {seed} shrunk ({', '.join(sorted(kinds))}): async {level}, {setting}")
    for field in dataclasses.fields(program):
        if field.name != "steps":
            print(f"{field.name} = {getattr(program, field.name)!r}")
    print("steps = [")
    for step in program.steps:
        print(f"    {step!r},")
    print("]")
    return 0


KEYS = ("programs", "dtr_programs", "ops", "drops", "swaps", "refused_swaps", "evictions",
        "recomputes", "swap_outs", "swap_ins", "budget_overshoots", "mismatches",
        "peak_rule_violations", "tighter_runs", "tighter_peaked_higher", "exceptions", "leaks",
        "crashes")
COUNTS = "COUNTS "


def run_child(first, count, verbose, tighter, grad):
    """Fuzz seeds first..first+count-1 in this process, one COUNTS line per program."""
    with mp.expected_warnings_ignored():
        for seed in range(first, first + count):
            totals = collections.Counter()
            fuzz_one(seed, totals, verbose, tighter, grad)
            print(COUNTS + json.dumps({"seed": seed, **totals}), flush=True)
        mp.usable()


def run_isolated(first, count, verbose, tighter, grad, totals):
    """Run the seeds in child processes, so that a crash (a segfault in the runtime) costs
    one program: it is counted and reported, and a new child goes on after it."""
    seed, end = first, first + count
    while seed < end:
        child = subprocess.Popen([sys.executable, __file__, "--child", "--seed", str(seed),
                                  "--programs", str(end - seed)]
                                 + (["--verbose"] if verbose else [])
                                 + (["--tighter"] if tighter else [])
                                 + (["--grad"] if grad else []),
                                 stdout=subprocess.PIPE, text=True)
        for line in child.stdout:
            if line.startswith(COUNTS):
                counts = json.loads(line[len(COUNTS):])
                seed = counts.pop("seed") + 1
                totals.update(counts)
            else:
                print(line, end="", flush=True)
        if child.wait() != 0:                 # died inside program `seed`
            totals.update(programs=1, crashes=1)
            print(f"FAIL seed {seed}: the process died (exit status {child.returncode})",
                  flush=True)
            seed += 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--shrink", action="store_true",
                        help="shrink program --seed to a minimal failing one and print it")
    parser.add_argument("--flaky", type=int, default=0, metavar="RUNS",
                        help="with --shrink: a program fails when one of RUNS runs fails "
                             "(default: when all of 3 do)")
    parser.add_argument("--tighter", action="store_true",
                        help="also run each DTR program under half its budget: never higher")
    parser.add_argument("--grad", action="store_true",
                        help="training programs: forward, backward and an SGD step")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.flaky < 0 or (args.flaky and not args.shrink):
        parser.error(f"--flaky takes a number of runs >= 1 and goes with --shrink, "
                     f"got --flaky {args.flaky}{'' if args.shrink else ' without --shrink'}")
    if args.shrink:
        return shrink(args.seed, args.grad, args.tighter, args.flaky)
    if args.child:
        run_child(args.seed, args.programs, args.verbose, args.tighter, args.grad)
        return 0
    totals = collections.Counter()
    start = time.perf_counter()
    run_isolated(args.seed, args.programs, args.verbose, args.tighter, args.grad, totals)
    summary = {k: totals[k] for k in KEYS}
    summary["seconds"] = round(time.perf_counter() - start, 1)
    for k, v in summary.items():
        print(f"{k:22s} {v}")
    print(json.dumps(summary))
    failures = sum(summary[k] for k in ("mismatches", "peak_rule_violations",
                                        "tighter_peaked_higher", "exceptions", "leaks",
                                        "crashes"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
