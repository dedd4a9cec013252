"""lr_scheduler.OneCycleLR against PyTorch's over total_steps (rates and the cycled
momentum or beta1), optim.clip_grad_norm_ and nn.utils (docs/api.md, "More PyTorch habits
(session 49)")."""
import numpy as np
import pytest

import imperative as imp
from imperative import lr_scheduler, nn, optim

torch = pytest.importorskip("torch")
TS = torch.optim.lr_scheduler


def _params():
    return [imp.Parameter(np.zeros(2, np.float32))], [torch.nn.Parameter(torch.zeros(2))]


CASES = [
    dict(max_lr=0.1, total_steps=20),
    dict(max_lr=0.5, total_steps=37, pct_start=0.25, anneal_strategy="linear"),
    dict(max_lr=[0.2], epochs=3, steps_per_epoch=7, div_factor=10.0, final_div_factor=100.0),
    dict(max_lr=0.1, total_steps=30, three_phase=True),
    dict(max_lr=0.1, total_steps=41, three_phase=True, anneal_strategy="linear",
         pct_start=0.4),
    dict(max_lr=0.3, total_steps=10, pct_start=0.5, base_momentum=0.8, max_momentum=0.9),
]


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_one_cycle_matches_pytorch_over_total_steps(case, kind):
    kwargs = CASES[case]
    ours_p, theirs_p = _params()
    if kind == "sgd":
        opt, t_opt = optim.SGD(ours_p, 0.01, momentum=0.9), torch.optim.SGD(
            theirs_p, 0.01, momentum=0.9)
    else:
        opt, t_opt = optim.Adam(ours_p, 0.01), torch.optim.Adam(theirs_p, 0.01)
    sched, t_sched = lr_scheduler.OneCycleLR(opt, **kwargs), TS.OneCycleLR(t_opt, **kwargs)
    total = t_sched.total_steps
    for step in range(total):
        assert sched.get_last_lr()[0] == pytest.approx(t_sched.get_last_lr()[0], rel=1e-9), step
        group = t_opt.param_groups[0]
        if kind == "sgd":
            assert opt.momentum == pytest.approx(group["momentum"], rel=1e-12)
        else:
            assert opt.betas[0] == pytest.approx(group["betas"][0], rel=1e-12)
            assert opt.betas[1] == group["betas"][1]
        t_opt.step()
        if step < total - 1:
            sched.step()
            t_sched.step()
    resumed = lr_scheduler.OneCycleLR(optim.SGD(_params()[0], 0.01, momentum=0.9), **kwargs)
    resumed.load_state_dict(sched.state_dict())
    assert resumed.get_last_lr() == sched.get_last_lr()
    assert resumed.optimizer.momentum == pytest.approx(resumed.momentum_at(total - 1))


def test_without_cycle_momentum_and_past_the_end():
    opt = optim.Adagrad(_params()[0], 0.01)
    sched = lr_scheduler.OneCycleLR(opt, 0.1, total_steps=3, cycle_momentum=False)
    t_opt = torch.optim.Adagrad(_params()[1], 0.01)
    t_sched = TS.OneCycleLR(t_opt, 0.1, total_steps=3, cycle_momentum=False)
    for _ in range(3):
        t_opt.step()
        sched.step()
        t_sched.step()
        assert sched.get_last_lr()[0] == pytest.approx(t_sched.get_last_lr()[0], rel=1e-9)
    with pytest.raises(ValueError, match=r"OneCycleLR: stepped 4 times, past total_steps=3"):
        sched.step()
    assert sched.last_step == 3


def test_one_cycle_arguments_are_checked():
    sgd = optim.SGD(_params()[0], 0.01, momentum=0.9)
    with pytest.raises(ValueError, match=r"give total_steps, or epochs and steps_per_epoch"):
        lr_scheduler.OneCycleLR(sgd, 0.1)
    with pytest.raises(ValueError, match=r"OneCycleLR: total_steps must be an int >= 1, got 0"):
        lr_scheduler.OneCycleLR(sgd, 0.1, total_steps=0)
    with pytest.raises(ValueError, match=r"OneCycleLR: pct_start must lie in \[0, 1\], got 1.5"):
        lr_scheduler.OneCycleLR(sgd, 0.1, total_steps=10, pct_start=1.5)
    with pytest.raises(ValueError, match=r"anneal_strategy must be 'cos' or 'linear', got "
                                         r"'exp'"):
        lr_scheduler.OneCycleLR(sgd, 0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match=r"OneCycleLR: max_lr must be a number >= 0"):
        lr_scheduler.OneCycleLR(sgd, -0.1, total_steps=10)
    with pytest.raises(ValueError, match=r"OneCycleLR: div_factor must be > 0, got 0"):
        lr_scheduler.OneCycleLR(sgd, 0.1, total_steps=10, div_factor=0)
    with pytest.raises(ValueError, match=r"needs an optimizer with momentum or betas, got "
                                         r"Adagrad; pass cycle_momentum=False"):
        lr_scheduler.OneCycleLR(optim.Adagrad(_params()[0]), 0.1, total_steps=10)


def test_clip_grad_norm_aliases_and_clip_grad_value():
    assert optim.clip_grad_norm_ is optim.clip_grad_norm
    assert nn.utils.clip_grad_norm_ is optim.clip_grad_norm
    grads = np.array([3.0, -4.0, 0.5], np.float32)
    p = imp.Parameter(np.zeros(3, np.float32))
    t = torch.nn.Parameter(torch.zeros(3))
    p.grad, t.grad = imp.Tensor(grads), torch.from_numpy(grads.copy())
    norm = nn.utils.clip_grad_norm_([p], 1.0)
    t_norm = torch.nn.utils.clip_grad_norm_([t], 1.0)
    assert float(norm.numpy()) == pytest.approx(float(t_norm), rel=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5)
    p.grad, t.grad = imp.Tensor(grads), torch.from_numpy(grads.copy())
    nn.utils.clip_grad_value_(p, 1.0)
    torch.nn.utils.clip_grad_value_(t, 1.0)
    np.testing.assert_array_equal(p.grad.numpy(), t.grad.numpy())
    with pytest.raises(ValueError, match=r"clip_grad_value_: clip_value must be a number >= 0"):
        nn.utils.clip_grad_value_([p], -1)


@pytest.mark.parametrize("kind", ["SGD", "RMSprop"])
def test_an_optimizer_built_without_momentum_cycles_it_as_pytorch_s(kind):
    """PyTorch's OneCycleLR sets the momentum of an SGD built with momentum 0, and its step
    then makes the buffer: the same parameters after every step."""
    rng = np.random.default_rng(3)
    target = rng.standard_normal(5).astype(np.float32)
    ours, theirs = imp.Parameter(np.zeros(5, np.float32)), torch.nn.Parameter(torch.zeros(5))
    opt, t_opt = getattr(optim, kind)([ours], 0.01), getattr(torch.optim, kind)([theirs], 0.01)
    sched = lr_scheduler.OneCycleLR(opt, 0.05, total_steps=12)
    t_sched = TS.OneCycleLR(t_opt, 0.05, total_steps=12)
    gm = imp.autodiff.GradManager().attach([ours])
    for _ in range(12):
        with gm:
            gm.backward(imp.F.sum((ours - imp.Tensor(target)) ** 2))
        opt.step()
        opt.clear_grad()
        t_opt.zero_grad()
        ((theirs - torch.tensor(target)) ** 2).sum().backward()
        t_opt.step()
        if sched.last_step < 11:
            sched.step()
            t_sched.step()
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-7)
    assert opt.momentum == pytest.approx(t_opt.param_groups[0]["momentum"])
