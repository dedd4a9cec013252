"""RMSprop, Adagrad and Adadelta (imperative/optim.py) and the schedules MultiStepLR,
ExponentialLR and LambdaLR (imperative/lr_scheduler.py), against PyTorch's on the same
parameters and gradients: several steps under several settings, the state_dict round trip
(resuming gives the same bits as not stopping), a traced training step replaying the eager
one bit for bit, and the error each bad argument gets."""
import numpy as np
import pytest

import imperative as imp
from imperative import lr_scheduler, nn, optim
from imperative.jit import trace
from imperative.models import training_step

torch = pytest.importorskip("torch")

SETTINGS = [
    (optim.RMSprop, torch.optim.RMSprop, {}),
    (optim.RMSprop, torch.optim.RMSprop, {"lr": 0.05, "momentum": 0.9}),
    (optim.RMSprop, torch.optim.RMSprop, {"centered": True, "weight_decay": 0.1}),
    (optim.RMSprop, torch.optim.RMSprop, {"lr": 0.02, "alpha": 0.9, "eps": 1e-4,
                                          "momentum": 0.5, "centered": True}),
    (optim.Adagrad, torch.optim.Adagrad, {}),
    (optim.Adagrad, torch.optim.Adagrad, {"lr": 0.1, "lr_decay": 0.05}),
    (optim.Adagrad, torch.optim.Adagrad, {"weight_decay": 0.1, "initial_accumulator_value": 0.5,
                                          "eps": 1e-6}),
    (optim.Adadelta, torch.optim.Adadelta, {}),
    (optim.Adadelta, torch.optim.Adadelta, {"lr": 0.5, "rho": 0.5, "weight_decay": 0.1}),
    (optim.Adadelta, torch.optim.Adadelta, {"eps": 1e-3}),
]
IDS = [f"{ours.__name__}-{kw}" for ours, _, kw in SETTINGS]


@pytest.fixture
def problem():
    """Two parameters of different shapes, and six steps of gradients for them."""
    rng = np.random.default_rng(0)
    starts = [rng.standard_normal((3, 4)).astype(np.float32),
              rng.standard_normal(5).astype(np.float32)]
    grads = [[rng.standard_normal(s.shape).astype(np.float32) for s in starts]
             for _ in range(6)]
    return starts, grads


def run_ours(opt, params, grads):
    for step in grads:
        for p, g in zip(params, step):
            p.grad = imp.Tensor(g)
        opt.step()
    return [p.numpy() for p in params]


def run_torch(cls, kw, starts, grads):
    params = [torch.nn.Parameter(torch.tensor(s)) for s in starts]
    opt = cls(params, **kw)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params], opt


@pytest.mark.parametrize("ours, theirs, kw", SETTINGS, ids=IDS)
def test_steps_match_torch(problem, ours, theirs, kw):
    starts, grads = problem
    params = [imp.Parameter(s) for s in starts]
    opt = ours(params, **kw)
    got = run_ours(opt, params, grads)
    want, t_opt = run_torch(theirs, kw, starts, grads)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert all(isinstance(p, imp.Parameter) for p in params)
    # the state has PyTorch's names and values
    for i in range(len(params)):
        t_state = t_opt.state[t_opt.param_groups[0]["params"][i]]
        ours_state = opt.state_dict()["state"][i]
        assert set(ours_state) == set(t_state)
        for name, value in t_state.items():
            np.testing.assert_allclose(ours_state[name].numpy(), value.numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=name)


@pytest.mark.parametrize("ours, theirs, kw", SETTINGS, ids=IDS)
def test_state_dict_round_trip_resumes_exactly(problem, ours, theirs, kw):
    starts, grads = problem
    params = [imp.Parameter(s) for s in starts]
    opt = ours(params, **kw)
    run_ours(opt, params, grads[:3])
    saved = opt.state_dict()         # (its tensors are the state's, as PyTorch's: a snapshot)
    saved["state"] = {i: {k: v.numpy().copy() for k, v in entry.items()}
                      for i, entry in saved["state"].items()}
    saved_params = [p.numpy().copy() for p in params]
    group = saved["param_groups"][0]
    assert group["params"] == [0, 1] and all(group[k] == getattr(opt, k) for k in kw)
    straight = run_ours(opt, params, grads[3:])

    resumed_params = [imp.Parameter(s) for s in saved_params]
    resumed = ours(resumed_params, **{**kw, "lr": 123.0})      # lr comes back from the save
    resumed.load_state_dict(saved)
    assert resumed.lr == opt.lr
    for got, want in zip(run_ours(resumed, resumed_params, grads[3:]), straight):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("ours, kw", [(optim.RMSprop, {"momentum": 0.9, "centered": True}),
                                      (optim.Adagrad, {"lr_decay": 0.01}),
                                      (optim.Adadelta, {"weight_decay": 0.01})],
                         ids=["RMSprop", "Adagrad", "Adadelta"])
def test_a_traced_training_step_replays_the_eager_one(symbolic, ours, kw):
    def make():
        imp.random.seed(3)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        opt = ours(model.parameters(), **kw)
        return model, opt, training_step(model, opt)

    (m1, o1, eager), (m2, o2, step) = make(), make()
    traced = trace(step, symbolic=symbolic)
    rng = np.random.default_rng(4)
    for _ in range(4):
        x = imp.Tensor(rng.standard_normal((6, 8)).astype(np.float32))
        y = imp.Tensor(rng.integers(0, 3, 6))
        np.testing.assert_array_equal(traced(x, y).numpy(), eager(x, y).numpy())
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for s1, s2 in zip(o1.state.values(), o2.state.values()):
        for name in s1:
            np.testing.assert_array_equal(s1[name].numpy(), s2[name].numpy(), err_msg=name)
    assert traced.stats["records"] == 1 and traced.stats["replays"] == 3


@pytest.mark.parametrize("make, message", [
    (lambda ps: optim.RMSprop(ps, lr=-0.1), "lr must be a number >= 0.0, got -0.1"),
    (lambda ps: optim.RMSprop(ps, alpha=1.5), r"alpha must be a number in \[0, 1\], got 1.5"),
    (lambda ps: optim.RMSprop(ps, momentum=-0.9), "momentum must be a number >= 0.0"),
    (lambda ps: optim.RMSprop(ps, eps=float("nan")), "eps must be a number >= 0.0, got nan"),
    (lambda ps: optim.Adagrad(ps, lr_decay=-1), "lr_decay must be a number >= 0.0, got -1"),
    (lambda ps: optim.Adagrad(ps, initial_accumulator_value="1"),
     "initial_accumulator_value must be a number >= 0.0, got '1'"),
    (lambda ps: optim.Adadelta(ps, rho=2), r"rho must be a number in \[0, 1\], got 2"),
    (lambda ps: optim.Adadelta(ps, weight_decay=-0.1), "weight_decay must be a number >= 0.0"),
])
def test_bad_settings_name_the_setting(make, message):
    with pytest.raises(ValueError, match=message):
        make([imp.Parameter(np.zeros(3, np.float32))])


def test_load_state_dict_checks_the_state_it_is_given():
    opt = optim.RMSprop([imp.Parameter(np.zeros(3, np.float32))], momentum=0.9)
    bad = opt.state_dict()
    bad["state"][0]["square_avg"] = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"state\[0\]\['square_avg'\] has shape \(4,\)"):
        opt.load_state_dict(bad)
    other = optim.Adagrad([imp.Parameter(np.zeros(3, np.float32))])
    with pytest.raises(KeyError, match="'sum', which this optimizer does not keep"):
        opt.load_state_dict({"state": other.state_dict()["state"],
                             "param_groups": opt.state_dict()["param_groups"]})


# ---------------------------------------------------------------------------------------
# Schedules


SCHEDULES = [
    (lambda o: lr_scheduler.MultiStepLR(o, [2, 5, 5, 7], gamma=0.5),
     lambda o: torch.optim.lr_scheduler.MultiStepLR(o, [2, 5, 5, 7], gamma=0.5)),
    (lambda o: lr_scheduler.ExponentialLR(o, 0.8),
     lambda o: torch.optim.lr_scheduler.ExponentialLR(o, 0.8)),
    (lambda o: lr_scheduler.LambdaLR(o, lambda step: 1 / (1 + step)),
     lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda step: 1 / (1 + step))),
    (lambda o: lr_scheduler.StepLR(o, 3, gamma=0.5),
     lambda o: torch.optim.lr_scheduler.StepLR(o, 3, gamma=0.5)),
    # (the ten steps compared stay within T_max: past it ours stays at eta_min, docs/api.md)
    (lambda o: lr_scheduler.CosineAnnealingLR(o, 10, eta_min=0.01),
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 10, eta_min=0.01)),
]


@pytest.mark.parametrize("case", range(len(SCHEDULES)))
def test_schedules_match_torch(case):
    ours, theirs = SCHEDULES[case]
    opt = optim.RMSprop([imp.Parameter(np.zeros(2, np.float32))], lr=0.1)
    t_opt = torch.optim.RMSprop([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    sched, t_sched = ours(opt), theirs(t_opt)
    for _ in range(10):
        assert sched.get_last_lr()[0] == pytest.approx(t_sched.get_last_lr()[0], rel=1e-9)
        t_opt.step()
        sched.step()
        t_sched.step()
    resumed = ours(optim.RMSprop([imp.Parameter(np.zeros(2, np.float32))], lr=0.1))
    resumed.load_state_dict(sched.state_dict())
    assert resumed.get_last_lr() == sched.get_last_lr()


def test_schedule_arguments_are_checked():
    opt = optim.Adagrad([imp.Parameter(np.zeros(2, np.float32))])
    with pytest.raises(ValueError, match="MultiStepLR: milestones must be an int >= 0, got -1"):
        lr_scheduler.MultiStepLR(opt, [3, -1])
    with pytest.raises(TypeError, match="MultiStepLR: milestones must be a sequence of ints"):
        lr_scheduler.MultiStepLR(opt, 3)
    with pytest.raises(ValueError, match="ExponentialLR: gamma must be a number >= 0"):
        lr_scheduler.ExponentialLR(opt, -0.5)
    with pytest.raises(TypeError, match="LambdaLR: lr_lambda must be a function"):
        lr_scheduler.LambdaLR(opt, 0.5)
    assert lr_scheduler.LambdaLR(opt, [lambda step: 0.5]).get_last_lr() == [0.005]
