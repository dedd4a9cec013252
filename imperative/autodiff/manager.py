"""GradManager and GradManagerGroup: recording contexts on top of the tape (engine.py)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Self
import warnings

from .. import _core
from ..tensor import Tensor
from .engine import GradKey, NoGradientWarning, as_list, backward


class _RecordingContext:
    """`with manager:` records on entry and releases on exit, even when the body raises."""

    def __enter__(self) -> Self:
        self.record()
        return self

    def __exit__(self, *exc: object) -> bool:
        self.release()
        return False


class GradManager(_RecordingContext):
    """`gm = GradManager().attach(params)`; `with gm: loss = f(); gm.backward(loss)`; then
    `p.grad` holds the gradient, summed over backward calls until `p.grad = None`.

    `backward` ends the recording (as in MegEngine): one backward per `record()`."""

    def __init__(self) -> None:
        self._attached = []      # tensors, in attach order
        self._callbacks = {}     # id(tensor) -> list of cb(tensor, grad) -> grad
        self._key = None
        self._backward_done = False   # backward already ran in this recording

    def __repr__(self):
        return f"<GradManager@{id(self):x} with {len(self._attached)} attached tensor(s)>"

    def attach(self, params: Tensor | Iterable[Tensor],
               callbacks: Callable[[Tensor, Tensor], Tensor] | list[Any] | None = None
               ) -> GradManager:
        """Track `params` (a Tensor or a list, e.g. `model.parameters()`): every backward
        adds their gradients into `p.grad`. `callbacks(p, grad) -> grad` run first, in order.
        Returns the manager, so `gm = GradManager().attach(params)` reads well."""
        params = as_list(params, "params")
        callbacks = list(callbacks) if isinstance(callbacks, (list, tuple)) else \
            ([] if callbacks is None else [callbacks])
        for p in params:
            if p.dtype.kind != "f":
                raise TypeError(f"GradManager.attach: only float tensors have gradients, got "
                                f"dtype {p.dtype}")
        for p in params:
            if id(p) not in self._callbacks:
                self._attached.append(p)
                self._callbacks[id(p)] = []
            self._callbacks[id(p)].extend(callbacks)
            if self._key is not None:
                self._attach_to_key(p)
        return self

    def attached_tensors(self) -> list[Tensor]:
        """The attached tensors, in attach order."""
        return list(self._attached)

    @property
    def recording(self):
        return self._key is not None

    def record(self) -> None:
        """Start recording the ops that read attached tensors (what `with gm:` does)."""
        if self._key is not None:
            raise RuntimeError("GradManager.record: already recording")
        self._backward_done = False
        self._key = GradKey(name=f"GradManager@{id(self):x}")
        for p in self._attached:
            self._attach_to_key(p)
        self._key._start()   # records even with nothing attached yet (attach may follow)

    def release(self) -> None:
        """End the recording and free the graph; does nothing when not recording."""
        key, self._key = self._key, None
        if key is not None:
            key._stop()

    def _attach_to_key(self, p):
        self._key.attach(p, lambda grad, p=p: self._accumulate(p, grad))

    def _accumulate(self, p, grad):
        for cb in self._callbacks[id(p)]:
            grad = cb(p, grad)
        old = p.grad
        # A gradient is a result kept across the step, like optimizer state: its recipe
        # would reach back through the whole backward pass, so it is never evicted.
        p.grad = _core.persistent(grad if old is None else old + grad)

    def backward(self, y: Tensor | list[Tensor] | None = None,
                 dy: Tensor | list[Tensor] | None = None) -> None:
        """Add the gradients of `y` (a loss, or a list of Tensors seeded with `dy`, ones by
        default) into `p.grad` of every attached `p`, then end the recording: one backward
        per `with gm:`. `y=None` only ends the recording."""
        self._check_can_backward()
        try:
            if y is not None:
                self._check_reaches_attached(y)
                backward(self._key, y, dy)
        finally:
            self._backward_done = True
            self.release()

    def _check_can_backward(self):
        if self._key is not None:
            return
        if self._backward_done:
            raise RuntimeError(
                f"GradManager.backward: not recording any more: backward was already called "
                f"in this recording of {self!r}, and that call ended the recording and freed "
                "the graph (one backward per `with gm:`, as in MegEngine). Add the losses and "
                "call backward once, or use one `with gm:` block per backward")
        raise RuntimeError("GradManager.backward: not recording; call it inside `with gm:` "
                           "or between gm.record() and gm.release()")

    def _check_reaches_attached(self, y):
        """A loss that no attached tensor flows into would give no gradient at all, silently:
        the usual cause is a forgotten `gm.attach(model.parameters())`."""
        if not self._attached:
            raise RuntimeError(f"GradManager.backward: {self!r} has nothing attached, so no "
                               "gradient can land anywhere; call gm.attach(model.parameters()) "
                               "before `with gm:`")
        if not self.reaches_attached(y):
            # a warning, not an error: with higher-order recording off, an outer backward of
            # an inner gradient legitimately reaches nothing
            warnings.warn(f"GradManager.backward: the loss does not depend on any tensor "
                          f"attached to {self!r}, so no gradient changes; attach the tensors "
                          "the loss is computed from (gm.attach(model.parameters())), and "
                          "compute it inside `with gm:`", NoGradientWarning, stacklevel=3)

    def reaches_attached(self, ys: Tensor | list[Tensor]) -> bool:
        """Whether some of `ys` was computed, while recording, from an attached tensor."""
        key = self._key
        return key is not None and any(t._record in key._producer for t in as_list(ys, "ys"))

    def __or__(self, other):
        return GradManagerGroup([self]) | other


class GradManagerGroup(_RecordingContext):
    """`gm1 | gm2`: records, releases and runs backward for all its managers together."""

    def __init__(self, managers=()):
        self._managers = []
        for gm in managers:
            self._add(gm)

    def _add(self, gm):
        members = gm._managers if isinstance(gm, GradManagerGroup) else [gm]
        for m in members:
            if not isinstance(m, GradManager):
                raise TypeError(f"can only group GradManagers, got {type(m).__name__}")
            if m not in self._managers:
                self._managers.append(m)

    def __or__(self, other):
        group = GradManagerGroup(self._managers)
        group._add(other)
        return group

    __ror__ = __or__

    def record(self):
        """Start every member's recording."""
        for gm in self._managers:
            gm.record()

    def release(self):
        """End every member's recording (the last started first)."""
        for gm in reversed(self._managers):
            gm.release()

    def backward(self, y=None, dy=None):
        """Run backward for every member that `y` reaches (at least one must), and end every
        member's recording."""
        for gm in self._managers:
            gm._check_can_backward()
        if y is not None and not any(gm.reaches_attached(y) for gm in self._managers):
            self._managers[0]._check_reaches_attached(y)     # says why
        # Outer (lower priority) keys first: a later key never records an earlier one's backward.
        for gm in sorted(self._managers, key=lambda m: m._key.priority if m._key else 0):
            gm.backward(y if gm.reaches_attached(y) else None, dy)
