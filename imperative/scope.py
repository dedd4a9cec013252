"""The scope stack: names for tensors and ops (`block.linear.MatrixMul:0`) and scope slices
in the profile. One stack per process, like the interpreter it names things in."""
from contextlib import contextmanager

from . import _core

__all__ = ["push_scope", "pop_scope", "scope", "current_scope_path", "auto_name", "op_path"]


class ScopeNode:
    """One entry of the scope tree. A name entered again under the same parent is a new
    node with a version: `block`, then `block[1]`, `block[2]`, ..."""

    __slots__ = ("name", "parent", "version", "_entered", "_path")

    def __init__(self, name, parent, version):
        self.name = name
        self.parent = parent
        self.version = version
        self._entered = {}     # child name -> times entered under this node
        self._path = None

    @property
    def label(self):
        return self.name if self.version == 0 else f"{self.name}[{self.version}]"

    @property
    def path(self):
        if self._path is None:
            top = self.parent is None or self.parent.parent is None
            parent = "" if top else self.parent.path
            self._path = f"{parent}.{self.label}" if parent else self.label
        return self._path

    def enter(self, name):
        version = self._entered.get(name, 0)
        self._entered[name] = version + 1
        return ScopeNode(name, self, version)

    def __repr__(self):
        return f"<scope {self.path or '(root)'}>"


_root = ScopeNode("", None, 0)
_stack = [_root]


def push_scope(name):
    """Enter scope `name` under the current one; ops and tensors made now are named in it."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"push_scope(name): name must be a non-empty str, got {name!r}")
    node = _stack[-1].enter(name)
    _stack.append(node)
    _core.set_scope(node)
    _core.record_scope(True, node)


def pop_scope(name):
    """Leave scope `name`, which must be the innermost one (else ValueError; nothing changes)."""
    if len(_stack) == 1:
        raise ValueError(f"pop_scope({name!r}): the scope stack is empty")
    top = _stack[-1]
    if top.name != name:
        raise ValueError(f"pop_scope({name!r}): the innermost scope is {top.name!r}; "
                         f"pop that first")
    _stack.pop()
    _core.record_scope(False, top)
    _core.set_scope(_stack[-1] if len(_stack) > 1 else None)


@contextmanager
def scope(name):
    """`with imp.scope("block"): ...`: balanced even when the body raises."""
    push_scope(name)
    try:
        yield
    finally:
        pop_scope(name)


def current_scope_path():
    return _stack[-1].path


def op_name(op):
    """An op's name in names and profiles: `Elemwise.ADD`, `MatrixMul`, ..."""
    name = getattr(op, "name", None)
    return name if isinstance(name, str) else type(op).__name__


def op_path(node, op, index=0):
    """`block.linear.MatrixMul:0`: the name of output `index` of `op` issued under scope
    `node` (None: the root; op None: `Tensor`, data without an op)."""
    leaf = f"{op_name(op) if op is not None else 'Tensor'}:{index}"
    return f"{node.path}.{leaf}" if node is not None else leaf


def auto_name(record):
    """`scope.path.OpName:index` for a tensor record (`Tensor` for data without an op)."""
    return op_path(record.scope, record.op, record.out_index)
