"""The demo: train a small ResNet (or another zoo model) under a memory budget (DTR).

The models and their synthetic task come from `imperative.models`.

    python -m imperative.demo [--model cnn] [--budget 0.5] [--steps 20] [--policy dtr_eq]
                              [--profile profile] [--plot memory.png]

(also installed as the `imperative-demo` command). Two runs of the same seeded model train
side by side: an unconstrained one, whose first two steps measure the peak tensor memory P
the model needs, and one under DTR keeping tensor memory at `--budget` x P (a fraction, or
a size such as "60MB"), evicting and recomputing activations as needed. Their steps
alternate (unconstrained step i, then budgeted step i), so a machine that gets busier or
quieter slows both alike, and the step-time ratio is the median of the per-step ratios.

Each run has a process of its own. Why not one process switching DTR on and off around the
budgeted steps: that is correct (results stay bit-identical: between steps the budgeted
model holds only parameters, optimizer and batch-norm state, which are never evicted) but
it biases the timing. The worker's block pool is shared by the whole process and sized by
the budget, so every switch to the budget hands its memory back, and each unconstrained
step then re-faults it from the system: 18% slower steps measured on the ResNet (with the
pool's predecessor, an exact-size cache). Two processes keep each run's pool, options and
eviction state exactly as they are when it runs alone; only the machine is shared.

Prints progress (a bar when stdout is a terminal and tqdm is installed), writes a Chrome
trace of the budgeted run's last steps, a picture of memory and step times with `--plot`
(needs matplotlib: `pip install 'imperative[plot]'`), and a summary: loss, step time, peak
memory with and without the budget, evictions and recomputes. Exit status: 0 when the
losses equal the unconstrained run's bit for bit, 1 when they differ or when the budget is
below what the model can run in (said as soon as an op cannot fit: the first op that runs
over the budget because nothing is left to evict), 2 for a usage error.
"""
import argparse
import importlib.util
import math
import multiprocessing
import os
import signal
import statistics
import sys
import threading
import time
import traceback

import imperative as imp
from imperative import _core
from imperative.models import CONFIGS, describe, trainer

MiB = 2 ** 20
MEASURING_STEPS = 2     # the unconstrained steps that measure P: the second has the optimizer state
PROFILED_STEPS = 3      # the budgeted run's last steps go into the trace
STORM_FACTOR = 10       # a budgeted step this many times slower than unconstrained: say why
STORM_MIN_SECONDS = 5
COUNTS = ("evictions", "recomputes", "recompute_seconds", "budget_overshoots", "swap_outs",
          "eviction_seconds", "recomputes_repeated")


class BudgetTooSmall(Exception):
    pass


class RunFailed(Exception):
    pass


# ---------------------------------------------------------------------------------------
# One run, in a process of its own


def peak_rss():
    """The most resident memory this process has held so far, in bytes; None where the
    platform does not say."""
    try:
        import resource
    except ImportError:                 # (Windows)
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024     # (Linux counts KiB)


def timed_step(step):
    """Run one training step to its end; its loss, time and memory (peak tensor memory
    within the step, what stays allocated after it, and the process's peak resident memory
    so far), and the counts it added."""
    imp.sync()
    imp.reset_peak_memory_stats()
    before = imp.memory_stats()
    start = time.perf_counter()
    loss = float(step())
    imp.sync()              # the optimizer's updates are part of the step
    seconds = time.perf_counter() - start
    after = imp.memory_stats()
    return dict(loss=loss, seconds=seconds, peak=after["peak_allocated"],
                floor=after.get("peak_floor"), allocated=after["allocated"], rss=peak_rss(),
                **{k: after[k] - before[k] for k in COUNTS})


def serve(conn, settings):
    """The body of a run's process: build the seeded model, then answer each request with
    one step's record. `settings["budget"]` (bytes) turns DTR on for the whole run (with
    `swap`, evictions may swap out); the first op over it ends the run unless
    `stop_at_overshoot` is False (tools/bench_dtr.py measures such points too)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's: it ends us
    lock = threading.Lock()                        # the overshoot hook sends from the worker

    def send(*message):
        with lock:
            conn.send(message)

    def first_overshoot(allocated, needed, threshold):
        _core.set_overshoot_hook(None)             # once: the parent stops the run
        send("overshoot", allocated, needed, threshold)

    try:
        make = settings.get("trainer") or trainer      # (bench_dtr --unseen gives its own)
        step = make(settings["model"], lr=settings["lr"], batch=settings["batch"])
        if settings["budget"]:
            imp.set_option("enable_swap", int(settings.get("swap", False)))
            imp.dtr.enable(eviction_threshold=settings["budget"],
                           evictee_minimum_size=settings["min_evictee"])
            imp.dtr.set_policy(settings["policy"])
            if settings.get("stop_at_overshoot", True):
                _core.set_overshoot_hook(first_overshoot)
        prof = None
        while (request := conn.recv()) is not None:
            if request == "profile" and prof is None:
                prof = imp.Profiler(path=settings["profile"]).__enter__()
            send("step", timed_step(step))
            if prof is not None:
                prof.step()
        if prof is not None:
            prof.__exit__(None, None, None)
        send("done", prof.files[0] if prof is not None else None)
    except EOFError:
        pass                                       # the parent is gone: nobody to answer
    except BaseException:
        send("error", traceback.format_exc())


class Run:
    """A training run in its own process (see the module's docstring for why), stepped by
    the caller; `records` holds what each step reported."""

    def __init__(self, name, **settings):
        context = multiprocessing.get_context("spawn")   # a fresh interpreter, no forked threads
        self.name, self.records = name, []
        self.conn, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child, settings), daemon=True)
        self.process.start()
        child.close()

    def step(self, profile=False, patience=None, on_slow=None):
        """Run one step; after `patience` seconds without an answer call `on_slow(seconds)`
        once (and keep waiting)."""
        self.conn.send("profile" if profile else "step")
        if patience is not None and not self.conn.poll(patience):
            on_slow(patience)
        self.records.append(self.receive())
        return self.records[-1]

    def finish(self):
        """End the run; the trace file it wrote, if any."""
        self.conn.send(None)
        trace = self.receive()
        self.process.join()
        return trace

    def receive(self):
        try:
            kind, *payload = self.conn.recv()
        except EOFError:
            self.process.join()
            raise RunFailed(f"the {self.name} run's process ended (exit code "
                            f"{self.process.exitcode})") from None
        if kind == "error":
            raise RunFailed(f"the {self.name} run failed:\n{payload[0]}")
        if kind == "overshoot":
            raise BudgetTooSmall(*payload)
        return payload[0]

    def stop(self):
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()


# ---------------------------------------------------------------------------------------
# Progress, on a terminal or not


def _bar_fits():
    """Whether stdout is a terminal with room for a bar (a bare pseudo-terminal reports a
    size of 0 x 0, where tqdm draws nothing)."""
    try:
        size = os.get_terminal_size(sys.stdout.fileno())
    except (OSError, ValueError):
        return False
    return sys.stdout.isatty() and size.columns >= 40 and size.lines > 0


class Progress:
    """A bar on a terminal when tqdm is installed; otherwise a plain line every 5 steps
    (logs and pipes get no control characters)."""

    def __init__(self, total):
        self.total, self.bar = total, None
        if _bar_fits() and importlib.util.find_spec("tqdm") is not None:
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="step", file=sys.stdout, dynamic_ncols=True,
                            desc="under the budget")

    def step(self, i, text, short):
        """Step `i` is done: `text` for a line, `short` beside the bar."""
        if self.bar is not None:
            self.bar.set_postfix_str(short, refresh=False)
            self.bar.update()
        elif i % 5 == 0 or i == self.total - 1:
            print(f"  step {i + 1:3d}/{self.total}  {text}", flush=True)

    def note(self, text):
        """A message on stderr that leaves the bar intact."""
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


# ---------------------------------------------------------------------------------------
# The demo


def median_ratio(budgeted, unconstrained):
    """The median of the per-step time ratios, the first step (warm-up) left out; None
    with a single step."""
    ratios = [b["seconds"] / u["seconds"] for b, u in zip(budgeted[1:], unconstrained[1:])]
    return statistics.median(ratios) if ratios else None


def median_ms(records):
    return statistics.median(r["seconds"] for r in records[1:]) * 1e3


def train(args, runs):
    """Both runs, alternating (each is appended to `runs` as it starts); returns (budget,
    trace)."""
    settings = dict(model=args.model, lr=args.lr, batch=args.batch, profile=args.profile,
                    min_evictee=args.min_evictee, policy=args.policy)
    unconstrained = Run("unconstrained", budget=None, **settings)
    runs.append(unconstrained)
    for _ in range(MEASURING_STEPS):
        unconstrained.step()
    peak = max(r["peak"] for r in unconstrained.records)
    budget = args.budget(peak)
    print(f"unconstrained: peak {peak / MiB:.1f} MiB, "
          f"{unconstrained.records[-1]['seconds'] * 1e3:.0f} ms/step; training under a budget "
          f"of {budget / MiB:.1f} MiB ({budget / peak:.2f} x peak, policy {args.policy})",
          flush=True)
    budgeted = Run("budgeted", budget=budget, **settings)
    runs.append(budgeted)
    progress = Progress(args.steps)
    try:
        for i in range(args.steps):
            if i == len(unconstrained.records):
                unconstrained.step()
            usual = unconstrained.records[i]["seconds"]
            budgeted.step(profile=bool(args.profile) and i >= args.steps - PROFILED_STEPS,
                          patience=max(STORM_FACTOR * usual, STORM_MIN_SECONDS),
                          on_slow=lambda seconds, i=i, usual=usual:
                          progress.note(storm_warning(i, seconds, usual)))
            progress.step(i, *step_texts(budgeted.records, usual))
    finally:
        progress.close()
    trace = budgeted.finish()
    unconstrained.finish()
    return budget, trace


def storm_warning(i, seconds, usual):
    return (f"warning: step {i + 1} under the budget has run for {seconds:.0f} s, "
            f"{seconds / usual:.0f}x an unconstrained step: the budget is close to what the "
            f"model can run in, and evicted values are recomputed over and over; a larger "
            f"--budget avoids that")


def step_texts(records, usual):
    """The last budgeted step, as a line and beside a bar."""
    b = records[-1]
    evictions = sum(r["evictions"] for r in records)
    recomputes = sum(r["recomputes"] for r in records)
    return (f"loss {b['loss']:.4f}  peak tensor memory {b['peak'] / MiB:6.1f} MiB  "
            f"evictions {evictions:5d}  recomputes {recomputes:5d}  "
            f"{b['seconds'] * 1e3:.0f} ms (unconstrained {usual * 1e3:.0f} ms)",
            f"loss {b['loss']:.4f}, peak {b['peak'] / MiB:.1f} MiB, {b['seconds'] / usual:.2f}x")


def summarize(args, budgeted, unconstrained, trace):
    """Print the summary; True when the losses are bit-identical."""
    losses = [r["loss"] for r in budgeted]
    same = losses == [r["loss"] for r in unconstrained[:len(losses)]]
    total = {k: sum(r[k] for r in budgeted) for k in COUNTS}
    ratio = median_ratio(budgeted, unconstrained)
    print("summary")
    print(f"  loss            {losses[0]:.4f} -> {losses[-1]:.4f} "
          f"({'bit-identical to' if same else 'DIFFERS from'} the unconstrained run)")
    if ratio is None:
        print("  step time       not measured: the first step warms up (run 2 steps or more)")
    else:
        print(f"  step time       {median_ms(budgeted):.0f} ms (unconstrained "
              f"{median_ms(unconstrained):.0f} ms), {ratio:.2f}x: the median over "
              f"{len(budgeted) - 1} alternated step pair{'s' if len(budgeted) > 2 else ''}")
    print(f"  peak memory     {max(r['peak'] for r in budgeted) / MiB:.1f} MiB under the budget, "
          f"{max(r['peak'] for r in unconstrained) / MiB:.1f} MiB without")
    if budgeted[-1]["rss"] and unconstrained[-1]["rss"]:
        print(f"  process memory  {budgeted[-1]['rss'] / MiB:.1f} MiB at its peak under the "
              f"budget, {unconstrained[-1]['rss'] / MiB:.1f} MiB without (resident: "
              "interpreter, libraries and all)")
    print(f"  evictions       {total['evictions']}, recomputes {total['recomputes']} "
          f"({total['recompute_seconds']:.2f} s), over-budget ops {total['budget_overshoots']}")
    if trace:
        print(f"  profile         {trace}  (python -m imperative.profiler summary {trace})")
    return same


def plot(path, budgeted, unconstrained, budget):
    """Tensor memory per step (the peak within it and what stays after it) against the
    budget, and step times, of both runs."""
    from matplotlib.figure import Figure     # not pyplot: no display, no global state
    fig = Figure(figsize=(10, 6), constrained_layout=True)
    memory, times = fig.subplots(2, 1, sharex=True)
    for name, records, color in (("unconstrained", unconstrained, "tab:blue"),
                                 ("under the budget", budgeted, "tab:orange")):
        steps = range(1, len(records) + 1)
        memory.plot(steps, [r["peak"] / MiB for r in records], "o-", color=color,
                    label=f"{name}: peak in the step")
        memory.plot(steps, [r["allocated"] / MiB for r in records], ":", color=color,
                    label=f"{name}: after the step")
        times.plot(steps, [r["seconds"] * 1e3 for r in records], "o-", color=color, label=name)
    memory.axhline(budget / MiB, color="tab:red", linestyle="--",
                   label=f"budget {budget / MiB:.1f} MiB")
    memory.set(ylabel="tensor memory (MiB)", ylim=(0, None), title="Tensor memory per step")
    times.set(xlabel="step", ylabel="step time (ms)", ylim=(0, None),
              title="Step time (steps alternate between the runs; step 1 warms up)")
    for ax in (memory, times):                # beside the plots: the lines fill them
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.savefig(path)


# ---------------------------------------------------------------------------------------
# Command line


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def size_arg(text):
    try:
        return imp.dtr.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def budget_arg(text):
    """A fraction of the peak ("0.5") or a size ("60MB"): a function of the peak, in bytes."""
    try:
        fraction = float(text)
    except ValueError:
        fraction = None
    if fraction is None:
        try:
            nbytes = imp.dtr.parse_size(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a fraction of the unconstrained peak "
                                             f"such as 0.5, or a size such as 60MB, got {text!r}"
                                             ) from None
        if nbytes < 1:
            raise argparse.ArgumentTypeError("must be more than 0 bytes")
        return lambda peak: nbytes
    if not 0 < fraction < math.inf:
        raise argparse.ArgumentTypeError(f"a fraction of the peak must be above 0, got {text!r}")
    return lambda peak: max(1, int(fraction * peak))   # 0 would mean no budget at all


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="0.5", type=budget_arg,
                        help="a fraction of the unconstrained peak (default 0.5) or a size like "
                             "20MB")
    parser.add_argument("--steps", type=positive_int, default=20)
    parser.add_argument("--policy", default="dtr_eq", choices=imp.dtr.policies())
    parser.add_argument("--profile", default="profile", help="folder for the trace ('' to skip)")
    parser.add_argument("--plot", metavar="PNG", default=None,
                        help="write a picture of tensor memory and step times (needs matplotlib)")
    parser.add_argument("--model", default="cnn", choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=positive_int, default=None, help="default: the model's own")
    parser.add_argument("--lr", type=float, default=None, help="default: the model's own")
    parser.add_argument("--min-evictee", type=size_arg, default="64KB")
    args = parser.parse_args(argv)
    # said now, not after minutes of training
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib: pip install 'imperative[plot]'")
    if args.plot and not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
        parser.error(f"--plot: no folder {os.path.dirname(os.path.abspath(args.plot))!r}")
    return args


def main(argv=None):
    args = parse_args(argv)
    print(f"{describe(args.model, batch=args.batch)}: measuring the unconstrained peak...",
          flush=True)
    runs = []
    try:
        budget_bytes, trace = train(args, runs)
    except BudgetTooSmall as e:
        allocated, needed, threshold = e.args
        print(f"error: the budget of {threshold / MiB:.2f} MiB is below what {args.model} can "
              f"run in: in step {len(runs[-1].records) + 1} an op needed {needed / MiB:.2f} MiB "
              f"more while {allocated / MiB:.2f} MiB could not be evicted (parameters, optimizer "
              f"state, the batch, the inputs of the ops running). The budget must be above "
              f"{(allocated + needed) / MiB:.2f} MiB, and well above it to avoid evicting and "
              f"recomputing over and over.", file=sys.stderr)
        return 1
    except RunFailed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        for run in runs:
            run.stop()
    budgeted, unconstrained = runs[1].records, runs[0].records
    same = summarize(args, budgeted, unconstrained, trace)
    if args.plot:
        plot(args.plot, budgeted, unconstrained, budget_bytes)
        print(f"  plot            {args.plot}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
