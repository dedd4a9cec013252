"""Module.apply, modules(), named_modules(), children() and buffers() (docs/api.md, "More
PyTorch habits (session 49)"): PyTorch's order on the same nested model."""
import pytest

import imperative as imp
from imperative import nn

torch = pytest.importorskip("torch")


def _pair(shared_ours, shared_theirs):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.act = nn.Sequential(nn.ReLU(), nn.Sequential(nn.Tanh()))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(2, 3)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.norm = nn.BatchNorm1d(3)
            self.shared = shared_ours
            self.again = shared_ours           # the same module twice: listed once

    ours_net = Net()

    class Block(torch.nn.Module):  # noqa: F811 (PyTorch's twin, of the same class names)
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)
            self.act = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Tanh()))

    class Net(torch.nn.Module):  # noqa: F811
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Linear(2, 3)
            self.blocks = torch.nn.ModuleList([Block(), Block()])
            self.norm = torch.nn.BatchNorm1d(3)
            self.shared = shared_theirs
            self.again = shared_theirs

    return ours_net, Net()


def _names(pairs):
    return [(name, type(m).__name__) for name, m in pairs]


def test_named_modules_and_modules_follow_pytorch_order():
    ours, theirs = _pair(nn.Linear(3, 1), torch.nn.Linear(3, 1))
    assert _names(ours.named_modules()) == _names(theirs.named_modules())
    assert [type(m).__name__ for m in ours.modules()] == \
        [type(m).__name__ for m in theirs.modules()]
    assert next(iter(ours.modules())) is ours
    assert _names(ours.named_modules("net")) == _names(theirs.named_modules(prefix="net"))
    assert [type(m).__name__ for m in ours.children()] == \
        [type(m).__name__ for m in theirs.children()]
    assert len(list(ours.modules())) == len({id(m) for m in ours.modules()})


def test_apply_visits_children_first_then_self_and_returns_self():
    ours, theirs = _pair(nn.Linear(3, 1), torch.nn.Linear(3, 1))
    seen, tseen = [], []
    assert ours.apply(lambda m: seen.append(type(m).__name__)) is ours
    theirs.apply(lambda m: tseen.append(type(m).__name__))
    assert seen == tseen
    assert seen[-1] == "Net"


def test_apply_initialises_weights_in_place():
    ours, _ = _pair(nn.Linear(3, 1), torch.nn.Linear(3, 1))
    before = {id(p) for p in ours.parameters()}

    def init(m):
        if isinstance(m, nn.Linear):
            m.weight[...] = imp.F.ones(m.weight.shape)
    ours.apply(init)
    assert {id(p) for p in ours.parameters()} == before
    assert (ours.blocks[1].fc.weight.numpy() == 1).all()
    with pytest.raises(TypeError, match=r"apply: fn must be a function of a module, got int"):
        ours.apply(3)


def test_buffers_and_the_hints_that_no_longer_apply():
    ours, theirs = _pair(nn.Linear(3, 1), torch.nn.Linear(3, 1))
    assert len(ours.buffers()) == len([b for n, b in theirs.named_buffers()
                                       if not n.endswith("num_batches_tracked")])
    for name in ("children", "modules", "buffers", "named_modules", "apply"):
        assert callable(getattr(ours, name))
