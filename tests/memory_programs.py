"""Random tensor programs for fuzzing the memory manager (drop, swap, DTR).

A program is data: leaves (numpy arrays of varied layout), then steps that run ops on live
values, drop / swap out / swap in / delete them, or read them. `run_program` runs it either
with everything off (the reference) or under a `Setting` (options, DTR budget and policy);
`check_program` compares the two runs: every value read must be bit-identical, and under
DTR the peak must stay within max(budget, floor) + the largest single output.

The generator asks a `Chooser` for integers only, so that the same code serves hypothesis
(tests/test_memory_fuzz.py, which shrinks failures) and a seeded `random.Random`
(tools/fuzz_memory.py, thousands of programs).
"""
import contextlib
import dataclasses
import gc
import math
import random
import warnings

import numpy as np

import imperative as imp

F = imp.F
ITEM = 4                                 # float32
MAX_ELEMENTS = 1 << 18                   # 1 MiB of float32: big enough for the worker thread
MAX_MATMUL_FLOPS = 1 << 24               # keeps one program well under a second
POLICIES = ("dtr_eq", "lru", "size")
LAYOUTS = ("C", "F", "strided", "transposed")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
UNARY = ("negative", "abs", "tanh", "sigmoid", "relu", "exp", "sqrt", "log1p", "silu", "gelu",
         "softplus", "erf", "hardswish", "hardsigmoid")
REDUCE = ("sum", "mean", "max")
INPLACE = ("iadd", "imul", "setitem")


class Chooser:
    """Random decisions built on one primitive, `integer(lo, hi)` (both ends included)."""

    def integer(self, lo, hi):
        raise NotImplementedError

    def choice(self, seq):
        return seq[self.integer(0, len(seq) - 1)]

    def coin(self, percent):
        return self.integer(0, 99) < percent

    def fraction(self, lo, hi):
        return lo + (hi - lo) * self.integer(0, 1000) / 1000


class SeededChooser(Chooser):
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def integer(self, lo, hi):
        return self.rng.randint(lo, hi)


# ---- programs as data

@dataclasses.dataclass(frozen=True)
class Leaf:
    shape: tuple
    layout: str
    seed: int

    def array(self):
        """The leaf's numpy value, laid out as `layout` says (a copy is made by Tensor())."""
        rng = np.random.default_rng(self.seed)
        if self.layout == "transposed" and len(self.shape) >= 2:
            return rng.standard_normal(self.shape[::-1]).astype(np.float32).T
        if self.layout == "F" and len(self.shape) >= 2:
            return np.asfortranarray(rng.standard_normal(self.shape).astype(np.float32))
        if self.layout == "strided" and len(self.shape) >= 1:
            wide = (self.shape[0] * 2,) + self.shape[1:]
            return rng.standard_normal(wide).astype(np.float32)[::2]
        return rng.standard_normal(self.shape).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Step:
    """kind: "op" (writes slot `out`), "inplace" (rebinds slot args[0]), "drop",
    "swap_out", "swap_in", "del" or "read"."""
    kind: str
    args: tuple = ()
    name: str = ""
    params: tuple = ()
    out: int = -1


@dataclasses.dataclass(frozen=True)
class Program:
    leaves: tuple
    steps: tuple
    largest_output: int      # bytes: the largest op output or leaf (a swap-in brings one back)

    @property
    def op_count(self):
        return sum(step.kind == "op" for step in self.steps)


@dataclasses.dataclass(frozen=True)
class Setting:
    """How the managed run differs from the reference (async level is set by the caller)."""
    enable_swap: int
    dtr: bool
    budget_fraction: float = 1.0
    policy: str = "dtr_eq"
    evictee_minimum_size: int = 0


# ---- the generator

def nbytes(shape):
    return math.prod(shape) * ITEM


def draw_shape(ch, ndim_max=3):
    """A shape of 1 to MAX_ELEMENTS elements (log-uniform), or () for a 0-d value."""
    ndim = ch.integer(0, ndim_max)
    if ndim == 0:
        return ()
    budget = 1 << ch.integer(0, 18)
    dims = []
    for _ in range(ndim - 1):
        dims.append(ch.integer(1, max(1, int(round(budget ** (1 / ndim)))) * 2))
        budget = max(1, budget // dims[-1])
    dims.append(max(1, budget))
    return tuple(dims)


def draw_leaf(ch):
    return Leaf(draw_shape(ch), ch.choice(LAYOUTS), ch.integer(0, 2 ** 31))


def _same_shape_partner(ch, shapes, a):
    partners = [s for s, shape in shapes.items() if shape == shapes[a] or shape == ()]
    return ch.choice(partners)


def op_binary(ch, shapes, a):
    mode = ch.choice(BINARY)
    if ch.coin(30):
        return (a,), mode, ("scalar", ch.integer(-4, 4) / 2, ch.coin(50)), shapes[a]
    b = _same_shape_partner(ch, shapes, a)
    out = shapes[a] if shapes[a] != () else shapes[b]
    return (a, b), mode, ("tensor",), out


def op_unary(ch, shapes, a):
    return (a,), ch.choice(UNARY), (), shapes[a]


def op_reduce(ch, shapes, a):
    shape = shapes[a]
    mode, keepdims = ch.choice(REDUCE), ch.coin(30)
    if shape == () or ch.coin(40):                       # to 0-d (or all-ones with keepdims)
        return (a,), mode, (None, keepdims), (1,) * len(shape) if keepdims else ()
    axis = ch.integer(0, len(shape) - 1)
    if shape[axis] == 0:
        return None
    out = shape[:axis] + ((1,) if keepdims else ()) + shape[axis + 1:]
    return (a,), mode, (axis, keepdims), out


def op_matmul(ch, shapes, a):
    """a @ b for a live b whose rows match a's columns, else a @ a.T or a.T @ a."""
    if len(shapes[a]) != 2:
        return None
    m, k = shapes[a]
    partners = [s for s, shape in shapes.items() if len(shape) == 2 and shape[0] == k]
    if partners and ch.coin(50):
        b = ch.choice(partners)
        n = shapes[b][1]
        out, flops = (m, n), m * k * n
        variant = ("with", b)
        args = (a, b)
    else:
        left = ch.coin(50)
        out = (m, m) if left else (k, k)
        flops, variant, args = out[0] * out[1] * (k if left else m), ("self", left), (a,)
    if flops > MAX_MATMUL_FLOPS or math.prod(out) > MAX_ELEMENTS:
        return None
    return args, "matmul", variant, out


def op_reshape(ch, shapes, a):
    size = math.prod(shapes[a])
    divisors = [d for d in range(1, min(size, 64) + 1) if size % d == 0]
    target = ch.choice([(size,), (size // divisors[-1], divisors[-1]),
                        (ch.choice(divisors), -1)])
    out = tuple(size // math.prod(d for d in target if d != -1) if d == -1 else d for d in target)
    return (a,), "reshape", (target,), out


def op_transpose(ch, shapes, a):
    shape = shapes[a]
    if len(shape) < 2:
        return None
    axes = list(range(len(shape)))
    i, j = ch.integer(0, len(shape) - 1), ch.integer(0, len(shape) - 1)
    axes[i], axes[j] = axes[j], axes[i]
    return (a,), "transpose", (tuple(axes),), tuple(shape[x] for x in axes)


def op_concat(ch, shapes, a):
    shape = shapes[a]
    if shape == ():
        return None
    axis = ch.integer(0, len(shape) - 1)
    rest = shape[:axis] + shape[axis + 1:]
    partners = [s for s, other in shapes.items()
                if len(other) == len(shape) and other[:axis] + other[axis + 1:] == rest]
    b = ch.choice(partners)
    out = shape[:axis] + (shape[axis] + shapes[b][axis],) + shape[axis + 1:]
    if math.prod(out) > MAX_ELEMENTS:
        return None
    return (a, b), "concat", (axis,), out


def draw_index(ch, shape):
    """Basic slices over the leading axes of a non-0-d `shape`: (index as (start, stop,
    step) triples, the shape it selects)."""
    index, out = [], []
    for n in shape[:ch.integer(1, len(shape))]:
        start, step = ch.integer(0, max(0, n - 1)), ch.choice((1, 1, 2, 3, -1))
        item = slice(start, None, step) if step > 0 else slice(None, None, -1)
        index.append((item.start, item.stop, item.step))
        out.append(len(range(n)[item]))
    return tuple(index), tuple(out) + shape[len(index):]


def op_getitem(ch, shapes, a):
    shape = shapes[a]
    if shape == ():
        return None
    index, out = draw_index(ch, shape)
    return (a,), "getitem", (index,), out


def op_softmax(ch, shapes, a):
    shape = shapes[a]
    if shape == ():
        return None
    return (a,), "softmax", (ch.integer(0, len(shape) - 1),), shape


OP_MAKERS = (op_binary, op_unary, op_reduce, op_matmul, op_reshape, op_transpose, op_concat,
             op_getitem, op_softmax)


def draw_op(ch, shapes):
    """An applicable op on live values: (args, name, params, out_shape)."""
    while True:
        made = ch.choice(OP_MAKERS)(ch, shapes, ch.choice(sorted(shapes)))
        if made is not None:
            return made


def draw_inplace_step(ch, shapes):
    """An in-place update of a live value, leaf or computed (`t += s`, `t *= u`,
    `t[index] = s`): the Tensor is rebound to the new value, as an optimizer's update or a
    forward pass filling a buffer does."""
    target = ch.choice(sorted(shapes))
    kind = ch.choice(INPLACE)
    if kind == "setitem":
        if shapes[target] == ():
            return None
        return Step("inplace", (target,), kind,
                    (draw_index(ch, shapes[target])[0], ch.integer(-4, 4) / 2))
    if ch.coin(50):
        return Step("inplace", (target,), kind, ("scalar", ch.integer(-4, 4) / 2))
    partner = _same_shape_partner(ch, shapes, target)
    if shapes[partner] not in (shapes[target], ()):       # (a 0-d target, a larger partner)
        return None
    return Step("inplace", (target, partner), kind, ("tensor",))


def draw_memory_step(ch, shapes, leaves):
    """A drop, swap, delete or read of a live value (leaves are kept alive: the reference
    needs something to compute from)."""
    kind = ch.choice(("drop", "drop", "swap_out", "swap_out", "swap_in", "del", "del", "read"))
    target = ch.choice(sorted(shapes))
    if kind == "del":
        if target < leaves or len(shapes) <= 1:
            return None
        del shapes[target]
    return Step(kind, (target,))


def draw_program(ch, min_ops=10, max_ops=60):
    leaves = tuple(draw_leaf(ch) for _ in range(ch.integer(1, 4)))
    shapes = {i: leaf.shape for i, leaf in enumerate(leaves)}
    steps, largest = draw_steps(ch, shapes, len(leaves), ch.integer(min_ops, max_ops),
                                inplace=True)
    return Program(leaves, tuple(steps), largest)


def draw_steps(ch, shapes, leaves, n_ops, inplace):
    """`n_ops` ops on the live values of `shapes` (slot -> shape, updated as values are
    made and deleted; the first `leaves` slots are leaves, never deleted), with drops,
    swaps, deletions and reads among them, and in-place updates where `inplace`. Returns
    the steps and the largest value's bytes, leaves included."""
    steps, largest = [], max(nbytes(shape) for shape in shapes.values())
    slot = leaves
    while slot < leaves + n_ops:
        if ch.coin(35):
            step = draw_memory_step(ch, shapes, leaves)
            if step is not None:
                steps.append(step)
            continue
        if ch.coin(10):
            step = draw_inplace_step(ch, shapes) if inplace else None
            if step is not None:
                steps.append(step)
            continue
        args, name, params, out = draw_op(ch, shapes)
        steps.append(Step("op", args, name, params, slot))
        shapes[slot] = out
        largest = max(largest, nbytes(out))
        slot += 1
    return steps, largest


def draw_setting(ch):
    return Setting(enable_swap=int(ch.coin(50)), dtr=ch.coin(70),
                   budget_fraction=ch.fraction(0.05, 1.0), policy=ch.choice(POLICIES),
                   evictee_minimum_size=ch.choice((0, 64 * 1024)))


# ---- running a program

def apply_op(step, values):
    """The tensor op `step` names, on the tensors in `values` (a dict slot -> Tensor)."""
    args = [values[a] for a in step.args]
    a = args[0]
    if step.name in BINARY:
        fn = getattr(F, step.name)
        if step.params[0] == "scalar":
            scalar, reflected = step.params[1], step.params[2]
            return fn(scalar, a) if reflected else fn(a, scalar)
        return fn(a, args[1])
    if step.name in UNARY:
        return getattr(F, step.name)(a)
    if step.name in REDUCE:
        axis, keepdims = step.params
        return getattr(a, step.name)(axis=axis, keepdims=keepdims)
    if step.name == "matmul":
        if step.params[0] == "with":
            return F.matmul(a, args[1])
        return F.matmul(a, a.T) if step.params[1] else F.matmul(a.T, a)
    if step.name == "reshape":
        return a.reshape(step.params[0])
    if step.name == "transpose":
        return a.transpose(step.params[0])
    if step.name == "concat":
        return F.concat([a, args[1]], axis=step.params[0])
    if step.name == "getitem":
        return a[tuple(slice(*s) for s in step.params[0])]
    if step.name == "softmax":
        return F.softmax(a, axis=step.params[0])
    raise ValueError(f"unknown op {step.name}")


def update_in_place(step, values):
    """The in-place update `step` names, on the Tensor in its slot (rebound, not replaced)."""
    tensor = values[step.args[0]]
    if step.name == "setitem":
        index, scalar = step.params
        tensor[tuple(slice(*s) for s in index)] = scalar
        return
    other = step.params[1] if step.params[0] == "scalar" else values[step.args[1]]
    if step.name == "iadd":
        tensor += other
    else:
        tensor *= other
    assert tensor is values[step.args[0]]              # (the same Tensor, rebound)


@dataclasses.dataclass
class RunResult:
    reads: list                   # (label, numpy copy) in the order the program read them
    peak: int = 0                 # peak_allocated over the program (bytes)
    budget: int = 0
    stats: dict = dataclasses.field(default_factory=dict)   # memory_stats() deltas and peak_floor
    drops: int = 0
    swaps: int = 0
    refused_swaps: int = 0        # swap-outs refused because other tensors view the storage


COUNTED = ("evictions", "recomputes", "swap_outs", "swap_ins", "budget_overshoots")


def run_memory_step(step, tensor, setting, result):
    """A drop or swap as the program asks; the reference (setting None) skips them."""
    if setting is None:
        return
    if step.kind == "drop":
        tensor._drop()
        result.drops += 1
    elif setting.enable_swap:
        try:
            getattr(tensor, "_" + step.kind)()
        except RuntimeError as e:
            # a documented refusal, not a defect: the views would lose their storage
            if "other tensor(s) view" not in str(e):
                raise
            result.refused_swaps += 1
        else:
            result.swaps += 1


def execute(program, setting, result):
    """Run the steps; every value read lands in `result.reads`. Returns nothing: the
    tensors die when this returns (what is left at the end is read first)."""
    values = {i: imp.Tensor(leaf.array()) for i, leaf in enumerate(program.leaves)}
    with measured(result):
        run_steps(program.steps, values, setting, result)
        for slot in sorted(values):
            result.reads.append((f"kept {slot}", np.array(values[slot].numpy())))


def run_steps(steps, values, setting, result, read_prefix=""):
    """Run `steps` on `values` (slot -> Tensor, updated); a value read lands in
    `result.reads` as "read <read_prefix><slot>"."""
    for step in steps:
        if step.kind == "op":
            values[step.out] = apply_op(step, values)
        elif step.kind == "inplace":
            update_in_place(step, values)
        elif step.kind == "del":
            del values[step.args[0]]
        elif step.kind == "read":
            result.reads.append((f"read {read_prefix}{step.args[0]}",
                                 np.array(values[step.args[0]].numpy())))
        else:
            run_memory_step(step, values[step.args[0]], setting, result)


@contextlib.contextmanager
def measured(result):
    """The peak statistics reset, the body run, and in `result` its peak, the change of the
    COUNTED counters and the floor (the body's values made before it count as held)."""
    imp.sync()
    imp.reset_peak_memory_stats()
    before = imp.memory_stats()
    yield
    imp.sync()
    after = imp.memory_stats()
    result.peak = after["peak_allocated"]
    result.stats = {k: after[k] - before[k] for k in COUNTED}
    result.stats["peak_floor"] = after["peak_floor"]


@contextlib.contextmanager
def managed(setting, budget):
    """Options for the managed run, restored exactly afterwards (policy included)."""
    old_options, old_policy = imp.options(), imp.dtr.get_policy()
    try:
        imp.set_option("enable_drop", 1)
        imp.set_option("enable_swap", setting.enable_swap)
        if setting.dtr:
            imp.dtr.set_policy(setting.policy)
            imp.dtr.enable(eviction_threshold=budget,
                           evictee_minimum_size=setting.evictee_minimum_size)
        yield
    finally:
        imp.sync()
        imp.dtr.set_policy(old_policy)
        for name, value in old_options.items():
            if imp.get_option(name) != value:
                imp.set_option(name, value)


@contextlib.contextmanager
def expected_warnings_ignored():
    """Dropping a value with no producer (a leaf, or one whose leaf died) only warns;
    sqrt/log1p of negatives give NaNs on purpose."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def run_program(program, setting=None, budget=0, executor=execute):
    """Run `program` with everything off (setting None) or under `setting` and `budget`;
    `executor(program, setting, result)` runs it (execute, or another kind of program's)."""
    result = RunResult(reads=[], budget=budget)
    with expected_warnings_ignored():
        if setting is None:
            executor(program, None, result)
        else:
            with managed(setting, budget):
                executor(program, setting, result)
    return result


def budget_for(setting, reference):
    return max(1, int(setting.budget_fraction * reference.peak)) if setting.dtr else 0


# ---- the invariants

def _same_bits(w, g):
    """Bit for bit, but for which NaN a NaN is: numpy's own loops propagate another NaN
    (its sign) when the output is the first input's buffer (`np.add(a, b, out=a)` gives
    b's NaN, `np.add(a, b)` a's), so a NaN's payload depends on whether a dying input's
    buffer was reused, which the memory manager's choices change."""
    if w.tobytes() == g.tobytes():
        return True
    if w.dtype.kind not in "fc":
        return False
    nan_w, nan_g = np.isnan(w), np.isnan(g)
    return bool(np.array_equal(nan_w, nan_g)
                and np.where(nan_w, 0, w).tobytes() == np.where(nan_g, 0, g).tobytes())


def mismatches(want, got):
    """Descriptions of every read that differs in label, dtype, shape, value or bits (a
    NaN's payload aside: _same_bits)."""
    if [label for label, _ in want] != [label for label, _ in got]:
        return [f"reads differ: {[l for l, _ in want]} vs {[l for l, _ in got]}"]
    found = []
    for (label, w), (_, g) in zip(want, got):
        if w.dtype != g.dtype or w.shape != g.shape:
            found.append(f"{label}: {g.dtype}{g.shape} instead of {w.dtype}{w.shape}")
        elif not _same_bits(w, g):          # (C order whatever the layout)
            bad = int(np.sum(w != g))
            found.append(f"{label}: {bad} of {w.size} elements differ "
                         f"(max abs diff {float(np.nanmax(np.abs(w - g), initial=0))})")
    return found


def peak_rule_excess(program, run):
    """Bytes by which a DTR run's peak passes max(budget, floor) + the largest output."""
    limit = max(run.budget, run.stats["peak_floor"]) + program.largest_output
    return max(0, run.peak - limit)


def peak_over_dtr_off(program, setting, run, runner=run_program):
    """Run `program` again under `setting` with DTR off (the same drops and swaps): (the
    bytes by which the DTR run's peak passes that run's + the largest output, that run's
    peak). Issue 12: DTR on never peaks above the same program with DTR off. `runner`:
    run_program, or another kind of program's (grad_programs.run_grad_program)."""
    off = runner(program, dataclasses.replace(setting, dtr=False))
    return max(0, run.peak - (off.peak + program.largest_output)), off.peak


def peak_over_a_tighter_budget(program, setting, run, runner=run_program):
    """Run `program` again under `setting` with half the DTR run's budget: (the bytes by
    which that run's peak passes this one's + the largest output, that run's peak).
    Issue 12: a tighter budget never gives a higher peak than a looser one."""
    tight = runner(program, setting, max(1, run.budget // 2))
    return max(0, tight.peak - (run.peak + program.largest_output)), tight.peak


def usable():
    """The runtime still computes after the program (a small and a worker-sized op)."""
    for n in (3, 100_000):
        x = imp.Tensor(np.arange(n, dtype=np.float32))
        np.testing.assert_array_equal((x * 2 + 1).numpy(), np.arange(n, dtype=np.float32) * 2 + 1)


def live_handles():
    imp.sync()
    return imp._core._channel_stats()["live_handles"]


def leaked_handles(before):
    """Handles alive now beyond `before`; garbage is collected only when some are (a full
    collection costs more than a small program once hypothesis fills the heap)."""
    if live_handles() != before:
        gc.collect()
    return live_handles() - before
