"""What a training script needs beyond the core: the extra modules, F.mse_loss,
optim.clip_grad_norm, learning-rate schedules and ArrayLoader, each against PyTorch or numpy
on the same inputs (values and gradients)."""
import numpy as np
import pytest
import torch

import imperative as imp
from imperative import F, nn, optim
from imperative import lr_scheduler as L
from imperative.autodiff import GradManager
from imperative.data import ArrayLoader

RNG = np.random.default_rng(13)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ours_and_torch_grads(module, torch_module, x, x_dtype=torch.float32):
    """Forward both modules on x, backward the sum of output * a fixed random weight, and
    return (our output, torch's output, our grads, torch's grads) by parameter name."""
    with torch.no_grad():
        for name, p in torch_module.named_parameters():
            p.copy_(torch.tensor(dict(module.named_parameters())[name].numpy()))
    gm = GradManager().attach(module.parameters())
    with gm:
        out = module(imp.Tensor(x))
        weight = randn(*out.shape)
        gm.backward((out * imp.Tensor(weight)).sum())
    t_out = torch_module(torch.from_numpy(x).to(x_dtype))
    (t_out * torch.from_numpy(weight)).sum().backward()
    ours = {n: p.grad.numpy() for n, p in module.named_parameters()}
    theirs = {n: p.grad.numpy() for n, p in torch_module.named_parameters()}
    return out.numpy(), t_out.detach().numpy(), ours, theirs


def assert_close_dicts(ours, theirs, tol=1e-5):
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("ours, theirs, shape", [
    (lambda: nn.GELU(), lambda: torch.nn.GELU(), (3, 5)),
    (lambda: nn.GELU("tanh"), lambda: torch.nn.GELU("tanh"), (3, 5)),
    (lambda: nn.Flatten(), lambda: torch.nn.Flatten(), (2, 3, 4, 5)),
    (lambda: nn.Flatten(0, 2), lambda: torch.nn.Flatten(0, 2), (2, 3, 4, 5)),
    (lambda: nn.MaxPool2d(2), lambda: torch.nn.MaxPool2d(2), (2, 3, 6, 6)),
    (lambda: nn.MaxPool2d(3, 2, 1), lambda: torch.nn.MaxPool2d(3, 2, 1), (2, 3, 7, 7)),
    (lambda: nn.AvgPool2d(2), lambda: torch.nn.AvgPool2d(2), (2, 3, 6, 6)),
    (lambda: nn.AvgPool2d(3, 2, 1), lambda: torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False),
     (2, 3, 7, 7)),
])
def test_parameterless_modules_match_pytorch(ours, theirs, shape):
    # the input's gradient is the check here: attach the input through a Linear-free path
    x = randn(*shape)
    xt = imp.Tensor(x)
    gm = GradManager().attach(xt)
    with gm:
        out = ours()(xt)
        weight = randn(*out.shape)
        gm.backward((out * imp.Tensor(weight)).sum())
    x_torch = torch.from_numpy(x).requires_grad_()
    t_out = theirs()(x_torch)
    (t_out * torch.from_numpy(weight)).sum().backward()
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xt.grad.numpy(), x_torch.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_embedding_matches_pytorch():
    ours, theirs = nn.Embedding(7, 4), torch.nn.Embedding(7, 4)
    indices = np.array([[0, 3, 3], [6, 1, 0]])
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
    gm = GradManager().attach(ours.parameters())
    weight = randn(2, 3, 4)
    with gm:
        out = ours(imp.Tensor(indices))
        gm.backward((out * imp.Tensor(weight)).sum())
    t_out = theirs(torch.from_numpy(indices))
    (t_out * torch.from_numpy(weight)).sum().backward()
    np.testing.assert_array_equal(out.numpy(), t_out.detach().numpy())
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-6)
    w = ours.weight.numpy()                       # N(0, 1) init, as PyTorch's
    assert w.shape == (7, 4) and 0.2 < w.std() < 2.5


def test_module_list_registers_its_modules():
    blocks = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
    blocks.append(nn.LayerNorm(4))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = blocks

        def forward(self, x):
            for block in self.blocks:
                x = F.relu(block(x))
            return x

    net, torch_net = Net(), torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4),
                                                 torch.nn.LayerNorm(4)])
    names = [n for n, _ in net.named_parameters()]
    assert names == ["blocks." + n for n, _ in torch_net.named_parameters()]
    assert len(blocks) == 3 and isinstance(blocks[-1], nn.LayerNorm)
    assert [type(m) for m in blocks] == [nn.Linear, nn.Linear, nn.LayerNorm]
    assert net(imp.Tensor(randn(2, 4))).shape == (2, 4)
    with pytest.raises(TypeError,
                       match="ModuleList takes Modules, got the function relu at position 3"):
        blocks.append(F.relu)
    with pytest.raises(IndexError, match="ModuleList index 3 is out of range for 3 modules"):
        blocks[3]
    with pytest.raises(TypeError, match="ModuleList indices must be integers or slices, not str"):
        blocks["0"]


def test_slicing_a_container_gives_one_of_its_kind_sharing_the_modules():
    """As PyTorch's: `blocks[1:]` of a ModuleList is a ModuleList, of a Sequential a
    Sequential (which runs the sliced modules in order), holding the same modules."""
    layers = [nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2)]
    torch_layers = [torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)]
    for ours, theirs in zip(layers[::2], torch_layers[::2]):
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
            theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
    seq, torch_seq = nn.Sequential(*layers), torch.nn.Sequential(*torch_layers)
    x = randn(4, 3)
    for i in (slice(1, None), slice(None, 2), slice(None, None, -1), slice(5, 9)):
        sliced, torch_sliced = seq[i], torch_seq[i]
        assert type(sliced) is nn.Sequential and len(sliced) == len(torch_sliced)
        assert list(sliced) == layers[i]
    head = seq[:2]
    np.testing.assert_allclose(head(imp.Tensor(x)).numpy(),
                               torch_seq[:2](torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)    # (float32 sums in another order)
    blocks = nn.ModuleList(layers)[::2]
    assert type(blocks) is nn.ModuleList and list(blocks) == layers[::2]
    assert [n for n, _ in blocks.named_parameters()] == ["0.weight", "0.bias", "1.weight",
                                                         "1.bias"]


def test_sequential_of_new_modules_trains_like_pytorch():
    ours = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.GELU(), nn.MaxPool2d(2),
                         nn.AvgPool2d(2), nn.Flatten(), nn.Linear(4 * 2 * 2, 3))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.GELU(),
                                 torch.nn.MaxPool2d(2), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
                                 torch.nn.Linear(16, 3))
    out, t_out, grads, t_grads = ours_and_torch_grads(ours, theirs, randn(3, 2, 8, 8))
    np.testing.assert_allclose(out, t_out, rtol=1e-4, atol=1e-5)
    assert_close_dicts(grads, t_grads, tol=1e-4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_pytorch(reduction):
    pred, target = randn(4, 3), randn(4, 3)
    p = imp.Tensor(pred)
    gm = GradManager().attach(p)
    with gm:
        loss = F.mse_loss(p, imp.Tensor(target), reduction=reduction)
        gm.backward(loss.sum() if reduction == "none" else loss)
    tp = torch.from_numpy(pred).requires_grad_()
    t_loss = torch.nn.functional.mse_loss(tp, torch.from_numpy(target), reduction=reduction)
    (t_loss.sum() if reduction == "none" else t_loss).backward()
    np.testing.assert_allclose(loss.numpy(), t_loss.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6)


def test_mse_loss_rejects_mismatched_shapes_and_reductions():
    with pytest.raises(ValueError, match=r"pred has shape \(4, 1\) but target has shape \(4,\)"):
        F.mse_loss(imp.Tensor(randn(4, 1)), imp.Tensor(randn(4)))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.mse_loss(imp.Tensor([1.0]), imp.Tensor([1.0]), reduction="avg")


@pytest.mark.parametrize("max_norm, norm_type", [(1.0, 2.0), (100.0, 2.0), (0.5, 1.0),
                                                 (0.3, float("inf"))])
def test_clip_grad_norm_matches_pytorch(max_norm, norm_type):
    grads = [randn(3, 4), randn(4), randn(2, 2)]
    params = [imp.Parameter(np.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = imp.Tensor(g)
    params.append(imp.Parameter([1.0]))          # no gradient: left out, as in PyTorch
    t_params = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, g in zip(t_params, grads):
        p.grad = torch.from_numpy(g.copy())
    total = optim.clip_grad_norm(params, max_norm, norm_type)
    t_total = torch.nn.utils.clip_grad_norm_(t_params, max_norm, norm_type)
    np.testing.assert_allclose(float(total), float(t_total), rtol=1e-5)
    for p, tp in zip(params, t_params):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert params[-1].grad is None
    with pytest.raises(ValueError, match="max_norm must be a number >= 0"):
        optim.clip_grad_norm(params, -1.0)


def torch_lrs(make_scheduler, steps, lr=0.5):
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    sched = make_scheduler(opt)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


def our_lrs(make_scheduler, steps, lr=0.5):
    opt = optim.SGD([imp.Parameter([0.0])], lr)
    sched = make_scheduler(opt)
    lrs = [opt.lr]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return lrs


# past T_max PyTorch's cosine climbs again (a restart): compared up to T_max only
@pytest.mark.parametrize("ours, theirs, steps", [
    (lambda o: L.StepLR(o, 3, 0.5), lambda o: torch.optim.lr_scheduler.StepLR(o, 3, 0.5), 10),
    (lambda o: L.CosineAnnealingLR(o, 7),
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 7), 7),
    (lambda o: L.CosineAnnealingLR(o, 5, eta_min=0.01),
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 5, eta_min=0.01), 5),
])
def test_schedules_match_pytorch(ours, theirs, steps):
    np.testing.assert_allclose(our_lrs(ours, steps), torch_lrs(theirs, steps), rtol=1e-6)


def test_warmup_rises_linearly_then_follows_the_schedule():
    lrs = our_lrs(lambda o: L.CosineAnnealingLR(o, 4, warmup_steps=3), 9, lr=1.0)
    expected = [1 / 4, 2 / 4, 3 / 4] + [(1 + np.cos(np.pi * min(s, 4) / 4)) / 2 for s in range(7)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-6)
    assert our_lrs(lambda o: L.ConstantLR(o, warmup_steps=1), 2, lr=1.0) == [0.5, 1.0, 1.0]


def test_scheduler_state_dict_resumes():
    opt = optim.SGD([imp.Parameter([0.0])], 1.0)
    sched = L.StepLR(opt, 2, 0.1)
    for _ in range(5):
        sched.step()
    opt2 = optim.SGD([imp.Parameter([0.0])], 1.0)
    sched2 = L.StepLR(opt2, 2, 0.1)
    sched2.load_state_dict(sched.state_dict())
    assert opt2.lr == pytest.approx(opt.lr) and sched2.last_step == 5


def test_scheduler_arguments_are_checked():
    opt = optim.SGD([imp.Parameter([0.0])], 1.0)
    with pytest.raises(ValueError, match="StepLR: step_size must be an int >= 1, got 0"):
        L.StepLR(opt, 0)
    with pytest.raises(ValueError, match="warmup_steps must be an int >= 0, got -1"):
        L.ConstantLR(opt, warmup_steps=-1)
    with pytest.raises(TypeError, match="expected an imperative Optimizer, got SGD"):
        L.StepLR(torch.optim.SGD([torch.zeros(1, requires_grad=True)], 0.1), 1)


def test_array_loader_batches_every_row_once_per_epoch():
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    y = np.arange(10)
    loader = ArrayLoader(x, y, batch_size=4, shuffle=True, seed=0)
    assert len(loader) == 3
    epochs = []
    for _ in range(2):
        batches = list(loader)
        assert [b[0].shape[0] for b in batches] == [4, 4, 2]
        rows = np.concatenate([b[1].numpy() for b in batches])
        assert sorted(rows) == list(range(10))
        for bx, by in batches:                    # rows stay paired
            np.testing.assert_array_equal(bx.numpy(), x[by.numpy()])
        epochs.append(rows)
    assert not np.array_equal(epochs[0], epochs[1])          # a new order each epoch
    again = ArrayLoader(x, y, batch_size=4, shuffle=True, seed=0)
    np.testing.assert_array_equal(np.concatenate([b[1].numpy() for b in again]), epochs[0])


def test_array_loader_in_order_and_drop_last():
    x = np.arange(10)
    loader = ArrayLoader(x, batch_size=3, drop_last=True)
    assert len(loader) == 3
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(ArrayLoader(x, batch_size=20, drop_last=True)) == 0


def test_array_loader_checks_its_arguments():
    with pytest.raises(ValueError, match=r"same first dimension, got shapes \[\(3,\), \(4,\)\]"):
        ArrayLoader(np.zeros(3), np.zeros(4), batch_size=2)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        ArrayLoader(np.zeros(3), batch_size=0)
    with pytest.raises(ValueError, match="at least one array"):
        ArrayLoader(batch_size=2)
