"""Dead leaves the memory manager keeps for recipes (API.md §4, docs/api.md "When a dead
leaf goes"): a value with no recipe of its own (data, an RNG draw) stays after its last
tensor goes only while keeping it is the cheaper way to keep its readers evictable, so that
recording never holds more than evicting gives back."""
import contextlib
import gc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import imperative as imp
from imperative import F
from test_memory_regimes import _dtr_budget

N = 16384      # elements: 64 KiB float32
# allocated() collects garbage after every random program (conftest.py)
pytestmark = pytest.mark.usefixtures("earlier_objects_frozen")


def allocated():
    imp.sync()
    gc.collect()
    return imp.memory_stats()["allocated"]


@pytest.fixture
def budget_never_reached():
    with _dtr_budget(1 << 40, 0):
        yield
    gc.collect()


def _batches(count, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(N).astype(np.float32) for _ in range(count)]


def test_two_batches_concatenated_go_when_their_tensors_do(budget_never_reached):
    """Keeping one batch of a concatenation buys nothing unless the other stays too: the
    two cost what evicting the concatenation frees. A prototypical network's support and
    query sets, concatenated for the encoder, were both kept under a budget never
    reached (1.07x the step's peak without the manager)."""
    support, queries = (imp.Tensor(b) for b in _batches(2))
    both = F.concat([support, queries])
    before = allocated()
    del support, queries
    assert allocated() == before - 2 * N * 4
    np.testing.assert_array_equal(both.numpy(), np.concatenate(_batches(2)))


def test_a_batch_two_evictable_readers_read_stays_under_a_budget(budget_never_reached):
    """Its readers, together twice its bytes, stay evictable: keeping it is cheaper than
    holding them, once the budget binds."""
    [batch] = (imp.Tensor(b) for b in _batches(1))
    doubled, tripled = batch * 2.0, batch * 3.0
    before = allocated()
    del batch
    assert allocated() == before
    [want] = _batches(1)
    np.testing.assert_array_equal(doubled.numpy(), want * np.float32(2.0))
    np.testing.assert_array_equal(tripled.numpy(), want * np.float32(3.0))


# Random programs: leaves, readers that concatenate some of them or scale one, the leaves'
# tensors deleted in a random order; then a budget of one byte and one more op, which
# evicts all it can. What stays, with the op's output, is no more than the same program
# holds without the manager: a leaf kept costs no more than evicting its readers frees.
_programs = st.integers(2, 5).flatmap(lambda leaves: st.tuples(
    st.just(leaves),
    st.lists(st.lists(st.integers(0, leaves - 1), min_size=1, max_size=3), min_size=1,
             max_size=5),
    st.permutations(range(leaves))))


def _run(leaves, readers, order):
    """Allocated bytes after the program, and the readers' values."""
    tensors = [imp.Tensor(b) for b in _batches(leaves, seed=leaves)]
    held = [F.concat([tensors[i] for i in r]) if len(r) > 1 else tensors[r[0]] * 2.0
            for r in readers]
    for i in order:
        tensors[i] = None
    return allocated(), held


@settings(max_examples=40, deadline=None)
@given(_programs)
def test_what_recording_keeps_of_dead_leaves_evicting_gives_back(program):
    leaves, readers, order = program
    off, want = _run(leaves, readers, order)
    want = [t.numpy() for t in want]
    gc.collect()
    with _dtr_budget(1 << 40, 0):
        _, held = _run(leaves, readers, order)
        imp.dtr.enable(eviction_threshold=1)
        probe = imp.Tensor(np.ones(4, np.float32)) + 1.0     # (it evicts what it can)
        assert allocated() <= off + 2 * 4 * 4      # (the probe and its input)
        assert probe.numpy().tolist() == [2.0] * 4
        for t, w in zip(held, want):
            np.testing.assert_array_equal(t.numpy(), w)
    gc.collect()


def _old_version_left_after_an_update(rng_seed):
    """Bytes still allocated once a value read by a small product is updated in place:
    the update's old version is a dead leaf that the product's recipe reads."""
    x = imp.Tensor(np.random.default_rng(rng_seed).standard_normal((36, 28)).astype(np.float32))
    product = x @ x.T                       # 5 KiB: under a 64 KiB evictee minimum
    before = allocated()
    x *= -1.5
    left = allocated() - before
    want = np.random.default_rng(rng_seed).standard_normal((36, 28)).astype(np.float32)
    np.testing.assert_array_equal(product.numpy(), want @ want.T)
    return left


@pytest.mark.parametrize("minimum", [65536, 1 << 20])
def test_an_old_version_only_a_drop_by_hand_could_use_goes_as_with_dtr_off(minimum):
    """With enable_drop, a product under the evictee minimum is no candidate: only `_drop()`
    could take it, and the old version stays only where that drop would free twice its
    bytes, budget or not. Counted as the budget's to evict, the old version stayed, and the
    product's drop by hand brought it back through a restore that peaked above the same
    program with DTR off (tools/fuzz_memory.py --seed 204668)."""
    with imp.option("enable_drop", 1):
        off = _old_version_left_after_an_update(7)
        with _dtr_budget(1, minimum):
            on = _old_version_left_after_an_update(7)
    gc.collect()
    assert on == off == 0


def _update_after_a_mean_peak(async_level, budget):
    """The peak of a mean of a 0.5 MiB Fortran-ordered tensor, its in-place update and one
    more op, under `budget` (None: DTR off; the mean, 4 bytes, is evicted as the budget
    binds), and the mean's and the tensor's values."""
    data = np.asfortranarray(np.random.default_rng(3).standard_normal((429, 305)),
                             dtype=np.float32)
    with imp.option("async_level", async_level), imp.option("enable_drop", 1):
        x = imp.Tensor(data)
        imp.sync()
        imp.reset_peak_memory_stats()
        # (_dtr_budget puts the two DTR options back: left at 0 bytes, the evictee minimum
        # made every later recorded op's output a candidate of the next test's)
        with _dtr_budget(budget, 0) if budget is not None else contextlib.nullcontext():
            mean = x.mean()
            x[225:] = 2.0
            x += -0.5
            values = mean.numpy(), x.numpy()
            peak = imp.memory_stats()["peak_allocated"]
    gc.collect()
    return peak, values


@pytest.mark.parametrize("async_level", [0, 2])
def test_an_old_version_only_a_small_evicted_value_needs_goes_as_with_dtr_off(async_level):
    """A dead leaf that only evicted values need stays while they do: the DTR paper's rule.
    Where they are small beside it, they come back instead and it goes: kept for a 4-byte
    mean, a tensor's old version after an in-place update peaked 1.4x above the same
    program with DTR off (2x where the update could not write over it), for the rest of
    the program (tools/fuzz_memory.py --seed 301865, --seed 703037)."""
    off_peak, want = _update_after_a_mean_peak(async_level, None)
    on_peak, got = _update_after_a_mean_peak(async_level, 1)
    assert on_peak <= off_peak
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("async_level", [0, 2])
def test_a_leaf_the_manager_cut_goes_as_it_dies_whatever_reads_it(async_level):
    """With drops by hand only, a dying leaf stays for readers that dropping would free at
    least twice its bytes from, unless the manager made that leaf by cutting a recipe
    (here the chain of dead temporaries behind it passed the cap): such a value stands in
    a computation that lets everything go as it runs (a backward pass), and its readers
    are transients no program drops. Kept, a gradient cut in a CNN's backward pass stayed
    beside the next layer's gradient, four times its size (NeuralSort and an RNN
    transducer, tests/fifteenth_models.py: 1.05-1.06x the step's peak with enable_drop)."""
    data = np.arange(N, dtype=np.float32)
    with imp.option("async_level", async_level), imp.option("enable_drop", 1):
        x = imp.Tensor(data)
        for _ in range(80):          # each temporary dies as the next is made
            x = x * 1.5 - 0.5
        imp.sync()
        assert imp._core.channel().lookup(x._handle).recipe_cut
        wide = F.concat([x, x, x, x])
        want = np.concatenate([x.numpy()] * 4)
        before = allocated()
        del x
        assert allocated() == before - N * 4          # the cut leaf's memory went
        with pytest.warns(UserWarning, match="no producer"):
            wide._drop()
        np.testing.assert_array_equal(wide.numpy(), want)
    gc.collect()


def test_a_python_numbers_constant_dying_in_backward_leaves_its_readers_recomputable(
        async_level):
    """A product's Python number is a 0-d constant saved for its backward pass, and dies
    there. Its value is shared and counted nowhere: it stays for the recipes that read it
    (without the walk over their region a dying leaf makes), so that those stay
    recomputable and its death frees no count."""
    from imperative.autodiff import GradManager
    data = np.linspace(-1, 1, N, dtype=np.float32)
    with imp.option("async_level", async_level), imp.option("enable_drop", 1):
        x = imp.Parameter(data)
        gm = GradManager().attach([x])
        with gm:
            scaled = x * 2.5
            mid = scaled * 0.75          # two constants: each saved for its product's backward
            gm.backward((mid * mid).sum())
        before = allocated()
        gm = None                        # (the backward pass's records go)
        assert allocated() == before
        scaled._drop()
        mid._drop()
        np.testing.assert_array_equal(scaled.numpy(), data * np.float32(2.5))
        np.testing.assert_array_equal(mid.numpy(), data * np.float32(2.5) * np.float32(0.75))
        np.testing.assert_array_equal(x.grad.numpy(),
                                      (data * np.float32(2.5) * np.float32(0.75) * 2)
                                      * np.float32(0.75) * np.float32(2.5))
    gc.collect()


def _adam_steps(layers, steps=3, width=32):
    """The parameters after `steps` Adam steps of a ReLU stack of `layers` Linear layers
    (two parameters each), and the peak tensor memory of the last step."""
    from imperative import nn, optim
    from imperative.autodiff import GradManager
    imp.random.seed(0)
    stack = [nn.Linear(width, width) for _ in range(layers)]
    params = [p for layer in stack for p in layer.parameters()]
    opt, gm = optim.Adam(params, lr=1e-2), GradManager().attach(params)
    x = imp.Tensor(np.random.default_rng(1).standard_normal((4, width)).astype(np.float32))
    for _ in range(steps):
        imp.sync()
        imp.reset_peak_memory_stats()
        with gm:
            h = x
            for layer in stack:
                h = F.relu(layer(h))
            gm.backward((h * h).mean())
        opt.step()
        opt.clear_grad()
    peak = (imp.sync(), imp.memory_stats()["peak_allocated"])[1]
    return [p.numpy() for p in params], peak


@pytest.mark.parametrize("layers", [4, 60])
@pytest.mark.parametrize("recording", ["enable_drop", "budget_never_reached"])
def test_an_optimizer_step_over_many_parameters_keeps_its_bits_and_peak(layers, recording):
    """One AdamStep reads all parameters, moments and counts, and each old one it rebinds
    is a dead leaf its outputs' recipe reads. With 60 layers (480 inputs) the recipe reads
    more than the kept-leaf walk takes (_KEPT_INPUTS), and the old values go as they die
    (the releases had read its inputs a quadratic number of times); with 4 the walk
    decides. Either way the same bits as recording off, and no higher a peak."""
    want, plain_peak = _adam_steps(layers)
    with contextlib.ExitStack() as stack:
        if recording == "enable_drop":
            imp.set_option("enable_drop", 1)
            stack.callback(imp.set_option, "enable_drop", 0)
        else:
            stack.enter_context(_dtr_budget(1 << 40, 0))
        got, peak = _adam_steps(layers)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert peak <= 1.05 * plain_peak, (peak, plain_peak)
