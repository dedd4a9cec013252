"""The tape of reverse-mode autodiff: the grad hook, GradKey and backward.


How it works
  * While at least one GradKey records, the core calls `_on_op(op, inputs, outputs)` after every
    op (`_core.set_grad_hook`); with none recording the hook is None and costs nothing.
  * A key tracks *records* (`TensorInfo`), not Tensor objects: an attached tensor's record, and
    every float output of a differentiable op (one with a rule in autodiff/registry.py) that read a
    tracked record. For each such op it keeps one `_Node` holding only what the rule asks to
    save (through `_core.wrap_info`, which keeps those values alive); every other intermediate
    is freed as soon as its last Tensor goes.
  * `backward(key, ys, dys)` walks the nodes reachable from `ys` in reverse creation order (a
    valid reverse topological order: an op's inputs exist before it), calls each rule under
    the `backward` scope, sums the gradients of records used several times, hands every
    attached record its gradient, and then releases the key's graph.
  * Nesting: each key gets a priority when it starts recording (later = higher). While key K
    runs its backward only keys of lower priority (outer ones) record, so the ops of K's rules
    are recorded by the outer keys and an outer backward differentiates them again (higher
    order). `set_allow_higher_order_directive(False)` turns that recording off.
  * `FastpathCopy` (an alias of its input) is never recorded: its output is a fresh untracked
    record, the way to take a value out of every gradient record.
"""
from __future__ import annotations

import itertools

import numpy as np

from .. import _core
from ..ops import FastpathCopy
from ..scope import scope
from ..tensor import Tensor
from . import registry


_active = []                  # keys recording, in the order they started
_recorders = []               # keys the hook feeds now (all active ones, outside a backward)
_allow_higher_order = True
_saved_hook = None            # whatever hook was installed before ours (restored after)
_priorities = itertools.count(1)


def set_allow_higher_order_directive(flag):
    """Whether a backward run while outer keys record is itself recorded (default True)."""
    global _allow_higher_order
    _allow_higher_order = bool(flag)


def _on_op(op, inputs, outputs):
    if type(op) is FastpathCopy:
        return
    rule = None
    for key in _recorders:
        if key._reads_tracked(inputs):
            if rule is None:
                rule = registry.get_rule(op)
                if rule is None:
                    return
                site = _core.op_site(op)      # for errors of its backward (set_blame)
            key._record(op, rule, inputs, outputs, site)


def _set_recorders(keys):
    """Feed the hook `keys`; install it only while that list is non-empty."""
    global _recorders, _saved_hook
    installed = bool(_recorders)
    _recorders = list(keys)
    if _recorders and not installed:
        _saved_hook = _core.get_grad_hook()
        _core.set_grad_hook(_on_op)
    elif not _recorders and installed:
        _core.set_grad_hook(_saved_hook)
        _saved_hook = None


class _Node:
    """One recorded op: what its rule needs, and the records it links."""

    __slots__ = ("seq", "op", "rule", "inputs", "outputs", "ctx", "site", "tracked")

    def __init__(self, seq, op, rule, inputs, outputs, site, tracked):
        self.seq = seq
        self.op = op
        self.rule = rule
        self.site = site          # _core.OpSite: the op's scope and file:line
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.tracked = None       # which inputs were tracked, where that narrowed what is kept
        keep = rule.save_inputs(op)
        if rule.needed_by is not None and keep:
            needers = rule.needed_by(op)
            if needers:
                mask = tuple([info in tracked for info in inputs])
                narrowed = tuple([i for i in keep
                                  if i not in needers or any(mask[j] for j in needers[i])])
                if narrowed != keep:
                    keep, self.tracked = narrowed, mask
        # Output shapes may be unknown until the op runs (value-dependent): read them lazily.
        # (comprehensions, not generators: this runs for every recorded op)
        self.ctx = (_saved(inputs, keep), _saved(outputs, rule.save_outputs(op)),
                    tuple([i.shape for i in inputs]), tuple([i.dtype for i in inputs]),
                    tuple([o.dtype for o in outputs]))

    def context(self, needs):
        saved_in, saved_out, in_shapes, in_dtypes, out_dtypes = self.ctx
        if self.tracked is not None:      # (not kept for an input tracked only later)
            needs = tuple([n and t for n, t in zip(needs, self.tracked)])
        out_shapes = tuple(o.shape for o in self.outputs)
        return registry.GradContext(saved_in, saved_out, in_shapes, in_dtypes,
                                      out_shapes, out_dtypes, needs)

    def free(self):
        self.ctx = None


def _saved(infos, keep):
    """A Tensor for each record whose index is in `keep` (kept alive for the rule), else None."""
    if not keep:
        return (None,) * len(infos)
    return tuple([_core.wrap_info(info) if i in keep else None for i, info in enumerate(infos)])


def _is_float(info):
    return info.dtype.kind == "f"


class GradKey:
    """Records the ops that read its attached tensors, for one backward.

    `attach(tensor, callback)` starts the recording (if not started yet); `backward(key, ...)`
    calls each callback with its tensor's gradient and ends it."""

    def __init__(self, name=None):
        self.name = name
        self.priority = 0
        self._producer = {}      # tracked record -> its _Node (None for attached records)
        self._callbacks = {}     # attached record -> callback(grad)
        self._seq = itertools.count()

    def __repr__(self):
        return f"<GradKey {self.name!r} priority={self.priority}>"

    @property
    def recording(self):
        return self in _active

    def attach(self, tensor, callback=None):
        """Track `tensor` (float only): its gradient goes to `callback(grad)` at backward.
        Starts the recording if it has not started."""
        if not _is_float(tensor._record):
            raise TypeError(f"only float tensors can be attached for gradients, got dtype "
                            f"{tensor.dtype}")
        info = tensor._record
        self._producer.setdefault(info, None)
        self._callbacks[info] = callback
        self._start()
        return self

    def is_attached_to(self, tensor):
        """Whether `tensor`'s value is attached to this key."""
        return tensor._record in self._callbacks

    def _start(self):
        if self.recording:
            return
        self.priority = next(_priorities)
        _active.append(self)
        _set_recorders(_active)

    def _stop(self):
        """End the recording and drop the graph (saved tensors are freed here)."""
        if self in _active:
            _active.remove(self)
            _set_recorders(_active)
        self._producer.clear()
        self._callbacks.clear()

    # ---- recording (called by the hook)

    def _reads_tracked(self, inputs):
        producer = self._producer
        for info in inputs:
            if info in producer:
                return True
        return False

    def _record(self, op, rule, inputs, outputs, site):
        node = _Node(next(self._seq), op, rule, inputs, outputs, site, self._producer)
        for info in outputs:
            if _is_float(info):
                self._producer[info] = node

    # ---- backward

    def _nodes_reaching(self, records):
        """The nodes some of `records` depend on, latest first."""
        seen = {}
        stack = [self._producer.get(r) for r in records]
        while stack:
            node = stack.pop()
            if node is None or node.seq in seen:
                continue
            seen[node.seq] = node
            stack.extend(self._producer.get(i) for i in node.inputs)
        return [seen[s] for s in sorted(seen, reverse=True)]

    def _run(self, ys, dys):
        grads = {}
        for y, dy in zip(ys, dys):
            _accumulate(grads, y._record, dy)
        nodes = self._nodes_reaching([y._record for y in ys])
        # An attached record's gradient is final once the last node reading it (in this
        # latest-first order) has run: its callback runs then, so that a data-parallel
        # all-reduce of it starts while the rest of the backward pass is still issued
        # (imperative.distributed.make_allreduce_cb).
        final_after = {}
        for i, node in enumerate(nodes):
            for info in node.inputs:
                if info in self._callbacks:
                    final_after[info] = i
        ready = {}
        for info in self._callbacks:
            if info in final_after:
                ready.setdefault(final_after[info], []).append(info)
        for i, node in enumerate(nodes):
            # attached records keep their gradient for the callbacks; others are done
            out_grads = [grads.get(o) if o in self._callbacks else grads.pop(o, None)
                         for o in node.outputs]
            if any(g is not None for g in out_grads):
                self._apply_rule(node, out_grads, grads)
            node.free()
            for info in ready.pop(i, ()):
                self._call_back(info, grads)
        for info in list(self._callbacks):
            if info not in final_after:      # read by no node: a loss attached itself
                self._call_back(info, grads)

    def _call_back(self, info, grads):
        callback = self._callbacks.get(info)
        grad = grads.get(info)
        if grad is not None and callback is not None:
            callback(grad)

    def _apply_rule(self, node, out_grads, grads):
        producer = self._producer
        # only tracked inputs (those that depend on an attached record) get their gradient used
        needs = tuple(info in producer for info in node.inputs)
        in_grads = _blamed(node.site, node.rule.backward, node.op, node.context(needs), out_grads)
        if in_grads is None or len(in_grads) != len(node.inputs):
            raise RuntimeError(f"the backward rule of {node.op!r} returned "
                               f"{in_grads!r}; expected one gradient per input "
                               f"({len(node.inputs)})")
        for info, grad in zip(node.inputs, in_grads):
            if grad is None or info not in self._producer:
                continue
            if grad.shape != info.shape:
                raise RuntimeError(f"the backward rule of {node.op!r} returned a gradient of "
                                   f"shape {grad.shape} for an input of shape {info.shape}")
            _accumulate(grads, info, grad)


def _blamed(site, rule, *args):
    """rule(*args) with the ops it dispatches blamed on the forward op at `site`: their
    errors, now or later on the worker, name that op and its file:line besides the line of
    the backward call."""
    previous = _core.set_blame(site)
    try:
        return rule(*args)
    except Exception as e:
        note = f"in the backward of {site}"
        if not any(note in n for n in getattr(e, "__notes__", ())):   # level 0 said it
            e.add_note(note)
        raise
    finally:
        _core.set_blame(previous)


def _accumulate(grads, info, grad):
    prev = grads.get(info)
    grads[info] = grad if prev is None else prev + grad


def as_list(x, what):
    if x is None:
        return []
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    for t in items:
        if not isinstance(t, Tensor):
            raise TypeError(f"{what} must be Tensors, got {type(t).__name__}")
    return items


def _ones_like(y):
    return Tensor(np.ones(y.shape, dtype=y.dtype), device=y.device)


def backward(key, ys, dys=None):
    """Differentiate `ys` (a Tensor or a list) for the tensors attached to `key`, seeding with
    `dys` (same structure; None means ones), calling each attached tensor's callback with its
    gradient. The key's recording ends and its graph is freed, even when a rule fails."""
    ys = as_list(ys, "ys")
    dys = [None] * len(ys) if dys is None else as_list(dys, "dys")
    if len(dys) != len(ys):
        raise ValueError(f"backward got {len(ys)} ys but {len(dys)} dys")
    dys = [_ones_like(y) if dy is None else dy for y, dy in zip(ys, dys)]
    for y, dy in zip(ys, dys):
        if dy.shape != y.shape:
            raise ValueError(f"dy of shape {dy.shape} does not match y of shape {y.shape}")
    outer = [k for k in _active if k.priority < key.priority] if _allow_higher_order else []
    previous = _recorders
    _set_recorders(outer)
    try:
        with scope("backward"):
            key._run(ys, dys)
    finally:
        _set_recorders(previous)
        key._stop()


class NoGradientWarning(UserWarning):
    """A GradManager's backward reached none of its attached tensors."""
