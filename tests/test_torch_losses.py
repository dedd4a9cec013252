"""PyTorch's losses in imperative.functional (imperative/losses.py), against PyTorch on the
same inputs: values and the gradients of input and target for every reduction and the
options each loss has (weight, pos_weight, ignore_index, label_smoothing, ...), the edges
where the two could differ (probabilities of exactly 0 and 1, huge logits, ignored items
with -inf log-probabilities) and the error each bad argument gets."""
import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative.autodiff import GradManager

torch = pytest.importorskip("torch")
F = imp.functional
TF = torch.nn.functional
QUICK = settings(max_examples=25, deadline=None, database=None, derandomize=True)
REDUCTIONS = ["mean", "sum", "none"]


def both(ours, theirs, arrays, attach, seed=0):
    """(our value, torch's value, our grads, torch's grads): each framework runs its loss
    on the same `arrays` (numpy arrays, or None), and the gradients of the arrays at
    positions `attach` are those of sum(loss * dy), dy a fixed random array."""
    tensors = [None if a is None else imp.Tensor(a) for a in arrays]
    gm = GradManager().attach([tensors[i] for i in attach])
    with gm:
        out = ours(*tensors)
        dy = np.random.default_rng(seed).uniform(0.5, 1.5, out.shape).astype(np.float32)
        gm.backward(F.sum(out * imp.Tensor(dy)))
    t_tensors = [None if a is None else torch.tensor(a) for a in arrays]
    for i in attach:
        t_tensors[i].requires_grad_()
    t_out = theirs(*t_tensors)
    (t_out * torch.tensor(dy)).sum().backward()
    return (out.numpy(), t_out.detach().numpy(), [tensors[i].grad.numpy() for i in attach],
            [t_tensors[i].grad.numpy() for i in attach])


def assert_matches(ours, theirs, arrays, attach=(0,), rtol=2e-5, atol=1e-6):
    value, t_value, grads, t_grads = both(ours, theirs, arrays, attach)
    assert value.shape == t_value.shape
    np.testing.assert_allclose(value, t_value, rtol=rtol, atol=atol)
    for g, tg in zip(grads, t_grads):
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, tg, rtol=rtol, atol=atol)


def normal(*shape, scale=1.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def uniform(low, high, *shape, seed=0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def log_probs(*shape, axis=1, seed=0):
    return torch.log_softmax(torch.tensor(normal(*shape, seed=seed)), axis).numpy()


# ---------------------------------------------------------------------------------------
# Regression losses


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name, kw", [("mse_loss", {}), ("l1_loss", {}),
                                      ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
                                      ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}),
                                      ("huber_loss", {"delta": 0.3})])
def test_regression_losses_match_torch(name, kw, reduction):
    x, y = normal(4, 5, scale=2.0), normal(4, 5, scale=2.0, seed=1)   # both branches
    assert_matches(lambda a, b: getattr(F, name)(a, b, reduction=reduction, **kw),
                   lambda a, b: getattr(TF, name)(a, b, reduction=reduction, **kw),
                   [x, y], attach=(0, 1))


@QUICK
@given(shape=st.lists(st.integers(0, 4), max_size=3).map(tuple),
       name=st.sampled_from(["l1_loss", "smooth_l1_loss", "huber_loss"]))
def test_regression_losses_take_any_shape(shape, name):
    x, y = normal(*shape, scale=2.0), normal(*shape, scale=2.0, seed=1)
    for reduction in ("sum", "none"):
        got = getattr(F, name)(imp.Tensor(x), imp.Tensor(y), reduction=reduction)
        want = getattr(TF, name)(torch.tensor(x), torch.tensor(y), reduction=reduction)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# Binary cross entropy


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_matches_torch(reduction, weighted):
    p, t = uniform(0.02, 0.98, 4, 5), uniform(0, 1, 4, 5, seed=1)
    w = uniform(0.5, 2.0, 5, seed=2) if weighted else None
    assert_matches(lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction),
                   lambda a, b, c: TF.binary_cross_entropy(a, b, c, reduction=reduction),
                   [p, t, w], attach=(0, 1))


def test_binary_cross_entropy_clamps_its_logs_at_minus_100_as_torch():
    p = np.array([0.0, 1.0, 0.0, 1.0, 1e-30, 0.5], np.float32)
    t = np.array([1.0, 0.0, 0.0, 1.0, 1.0, 0.5], np.float32)
    value, t_value, grads, _ = both(lambda a, b: F.binary_cross_entropy(a, b, reduction="none"),
                                    lambda a, b: TF.binary_cross_entropy(a, b, reduction="none"),
                                    [p, t], attach=(0,))
    np.testing.assert_allclose(value, t_value, rtol=1e-6)
    np.testing.assert_allclose(value[:2], 100.0)
    assert np.isfinite(grads[0]).all()        # (PyTorch's gradient formula differs at 0, 1)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted, pos_weighted", [(False, False), (True, False),
                                                    (False, True), (True, True)])
def test_binary_cross_entropy_with_logits_matches_torch(reduction, weighted, pos_weighted):
    x, t = normal(4, 3, 5, scale=3.0), uniform(0, 1, 4, 3, 5, seed=1)
    w = uniform(0.5, 2.0, 3, 5, seed=2) if weighted else None
    pw = uniform(0.5, 3.0, 5, seed=3) if pos_weighted else None
    assert_matches(
        lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, reduction, d),
        lambda a, b, c, d: TF.binary_cross_entropy_with_logits(a, b, c, reduction=reduction,
                                                               pos_weight=d),
        [x, t, w, pw], attach=(0, 1))


def test_binary_cross_entropy_with_logits_is_stable_for_huge_logits():
    x = np.array([-200.0, -50.0, 0.0, 50.0, 200.0], np.float32)
    t = np.array([1.0, 0.0, 1.0, 1.0, 0.0], np.float32)
    assert_matches(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"),
                   lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction="none"),
                   [x, t])


# ---------------------------------------------------------------------------------------
# NLL and cross entropy with class labels


NLL_SHAPES = [((6, 4), (6,)), ((3, 4, 5), (3, 5)), ((4,), ())]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape, label_shape", NLL_SHAPES)
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_nll_loss_matches_torch(shape, label_shape, weighted, reduction, ignore_index):
    classes = shape[1] if len(shape) > 1 else shape[0]
    x = log_probs(*shape, axis=1 if len(shape) > 1 else 0)
    labels = np.random.default_rng(1).integers(0, classes, label_shape)
    if labels.ndim:
        labels.flat[1] = ignore_index                # an ignored item
    w = uniform(0.5, 2.0, classes, seed=2) if weighted else None
    assert_matches(lambda a, b, c: F.nll_loss(a, b, c, ignore_index, reduction),
                   lambda a, b, c: TF.nll_loss(a, b.long(), c, ignore_index=ignore_index,
                                               reduction=reduction),
                   [x, labels, w])


def test_nll_loss_ignores_items_whose_log_probability_is_minus_inf():
    x = np.log(np.array([[0.0, 1.0], [0.5, 0.5]], np.float32), where=True)
    x[0, 0] = -np.inf
    labels = np.array([-100, 1])
    assert_matches(lambda a, b: F.nll_loss(a, b), lambda a, b: TF.nll_loss(a, b.long()),
                   [x, labels])


CE_OPTIONS = [{}, {"weight": True}, {"ignore_index": -100}, {"label_smoothing": 0.2},
              {"weight": True, "ignore_index": 1, "label_smoothing": 0.1}]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", CE_OPTIONS, ids=repr)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5)])
def test_cross_entropy_options_match_torch(shape, options, reduction):
    classes = shape[1]
    x = normal(*shape, scale=2.0)
    labels = np.random.default_rng(1).integers(0, classes, shape[:1] + shape[2:])
    ignore_index = options.get("ignore_index")
    if ignore_index is not None:
        labels.flat[:2] = ignore_index
    w = uniform(0.5, 2.0, classes, seed=2) if options.get("weight") else None
    smoothing = options.get("label_smoothing", 0.0)
    assert_matches(
        lambda a, b, c: F.cross_entropy(a, b, 1, reduction, c, ignore_index, smoothing),
        lambda a, b, c: TF.cross_entropy(a, b.long(), c, reduction=reduction,
                                         ignore_index=-100 if ignore_index is None
                                         else ignore_index, label_smoothing=smoothing),
        [x, labels, w])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted, smoothing", [(False, 0.0), (True, 0.0), (True, 0.3)])
def test_cross_entropy_with_class_probabilities_matches_torch(reduction, weighted, smoothing):
    x = normal(3, 4, 5, scale=2.0)
    target = torch.softmax(torch.tensor(normal(3, 4, 5, seed=1)), 1).numpy()
    w = uniform(0.5, 2.0, 4, seed=2) if weighted else None
    assert_matches(
        lambda a, b, c: F.cross_entropy(a, b, 1, reduction, c, label_smoothing=smoothing),
        lambda a, b, c: TF.cross_entropy(a, b, c, reduction=reduction,
                                         label_smoothing=smoothing),
        [x, target, w], attach=(0, 1))


def test_cross_entropy_without_options_is_still_one_op_and_names_ignore_index_for_minus_100():
    x, labels = normal(3, 4), np.array([0, -100, 2])
    with imp.option("async_level", 0):
        with pytest.raises(IndexError, match="label -100 is out of range.*ignore_index=-100"):
            F.cross_entropy(imp.Tensor(x), imp.Tensor(labels))
    got = F.cross_entropy(imp.Tensor(x), imp.Tensor(labels), ignore_index=-100)
    want = TF.cross_entropy(torch.tensor(x), torch.tensor(labels))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


# ---------------------------------------------------------------------------------------
# KL divergence


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(reduction, log_target):
    x = log_probs(4, 6)
    target = log_probs(4, 6, seed=1)
    if not log_target:
        target = np.exp(target)
        target[0, 0] = 0.0                           # 0 log 0 = 0
    assert_matches(lambda a, b: F.kl_div(a, b, reduction, log_target),
                   lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
                   [x, target], attach=(0, 1) if log_target else (0,))


# ---------------------------------------------------------------------------------------
# Errors


def T(a):
    return imp.Tensor(np.asarray(a, np.float32))


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.l1_loss(T([[1.0]]), T([1.0])), ValueError,
     r"l1_loss: input has shape \(1, 1\) but target has shape \(1,\)"),
    (lambda: F.huber_loss(T([1.0]), T([1.0]), reduction="avg"), ValueError,
     r"huber_loss: reduction must be one of \('mean', 'sum', 'none'\), got 'avg'"),
    (lambda: F.smooth_l1_loss(T([1.0]), T([1.0]), beta=-1.0), ValueError,
     "smooth_l1_loss: beta must be >= 0, got -1.0"),
    (lambda: F.huber_loss(T([1.0]), T([1.0]), delta=0), ValueError,
     "huber_loss: delta must be > 0, got 0"),
    (lambda: F.huber_loss(T([1.0]), T([1.0]), delta="1"), TypeError,
     "huber_loss: delta must be a real number"),
    (lambda: F.binary_cross_entropy(T([0.5, 0.5]), T([1.0, 0.0]), T([1.0, 2.0, 3.0])),
     ValueError, r"weight of shape \(3,\) does not broadcast to the input's shape \(2,\)"),
    (lambda: F.binary_cross_entropy_with_logits(T([0.5]), T([1.0]), pos_weight=T([1, 2])),
     ValueError, "pos_weight of shape"),
    (lambda: F.nll_loss(T([[0.0, 0.0]]), T([0.0])), TypeError,
     "nll_loss: target must be integer class labels, got dtype float32"),
    (lambda: F.nll_loss(T([[0.0, 0.0]]), imp.Tensor([0, 1])), ValueError,
     r"nll_loss: target must have shape \(1,\)"),
    (lambda: F.nll_loss(T([[0.0, 0.0]]), imp.Tensor([0]), T([1.0])), ValueError,
     r"nll_loss: weight must have shape \(2,\), one per class"),
    (lambda: F.nll_loss(T(0.0), imp.Tensor(0)), ValueError, "nll_loss: input must have a class"),
    (lambda: F.nll_loss(T([[0.0, 0.0]]), imp.Tensor([0]), ignore_index=1.5), TypeError,
     "nll_loss: ignore_index must be an int"),
    (lambda: F.cross_entropy(T([[0.0, 0.0]]), imp.Tensor([0]), label_smoothing=1.5), ValueError,
     r"cross_entropy: label_smoothing must be in \[0, 1\], got 1.5"),
    (lambda: F.cross_entropy(T([[0.0, 0.0]]), T([[0.5, 0.5]]), ignore_index=0), ValueError,
     "ignore_index applies to class labels"),
    (lambda: F.cross_entropy(T([[0.0, 0.0]]), T([0.5, 0.5]), label_smoothing=0.1), ValueError,
     r"class probabilities must have the logits' shape \(1, 2\)"),
    (lambda: F.cross_entropy(T([[0.0, 0.0]]), T([0.0])), TypeError,      # (the fused op's)
     "labels must have an integer dtype, got float32"),
    (lambda: F.kl_div(T([1.0]), T([1.0]), reduction="batch"), ValueError,
     "kl_div: reduction must be one of"),
])
def test_bad_arguments_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_label_out_of_range_is_an_index_error_when_the_loss_runs():
    x = T(np.zeros((2, 3)))
    for labels in ([0, 3], [0, -1]):
        with pytest.raises((IndexError, imp.AsyncError), match="out of range"):
            F.nll_loss(x, imp.Tensor(labels)).numpy()
        with pytest.raises((IndexError, imp.AsyncError), match="out of range"):
            F.cross_entropy(x, imp.Tensor(labels), weight=T([1, 1, 1])).numpy()
        # (the weights' lookup fails too: at async level 2 its error is still pending)
        with contextlib.suppress(imp.AsyncError):
            imp.sync()


# ---------------------------------------------------------------------------------------
# The loss modules of imperative.nn


def _module_cases():
    """(our module, torch's module, inputs, positions whose gradients are compared)."""
    nn, tnn = imp.nn, torch.nn
    x, y = normal(4, 5, scale=2.0), normal(4, 5, scale=2.0, seed=1)
    p, t = uniform(0.05, 0.95, 4, 5), uniform(0, 1, 4, 5, seed=1)
    w5 = uniform(0.5, 2.0, 5, seed=2)
    logits3 = normal(3, 5, 2, scale=2.0)
    labels3 = np.random.default_rng(1).integers(0, 5, (3, 2))
    labels3[0, 0] = 4
    return [
        (nn.MSELoss(), tnn.MSELoss(), [x, y], (0, 1)),
        (nn.L1Loss(reduction="sum"), tnn.L1Loss(reduction="sum"), [x, y], (0, 1)),
        (nn.SmoothL1Loss(beta=0.5), tnn.SmoothL1Loss(beta=0.5), [x, y], (0, 1)),
        (nn.HuberLoss(reduction="none", delta=0.7), tnn.HuberLoss(reduction="none", delta=0.7),
         [x, y], (0, 1)),
        (nn.BCELoss(imp.Tensor(w5)), tnn.BCELoss(torch.tensor(w5)), [p, t], (0,)),
        (nn.BCEWithLogitsLoss(pos_weight=imp.Tensor(w5)),
         tnn.BCEWithLogitsLoss(pos_weight=torch.tensor(w5)), [x, t], (0, 1)),
        # classes along axis 1, as PyTorch's module (F.cross_entropy's default is -1)
        (nn.CrossEntropyLoss(imp.Tensor(w5), ignore_index=4, label_smoothing=0.1),
         tnn.CrossEntropyLoss(torch.tensor(w5), ignore_index=4, label_smoothing=0.1),
         [logits3, labels3], (0,)),
        (nn.CrossEntropyLoss(), tnn.CrossEntropyLoss(), [x[:3], labels3[:, 0].copy()], (0,)),
        (nn.CrossEntropyLoss(), tnn.CrossEntropyLoss(), [x[0], labels3[0, 0].copy()], (0,)),
        (nn.NLLLoss(reduction="sum"), tnn.NLLLoss(reduction="sum"),
         [log_probs(3, 5, 2), labels3], (0,)),
        (nn.KLDivLoss(reduction="batchmean", log_target=True),
         tnn.KLDivLoss(reduction="batchmean", log_target=True),
         [log_probs(4, 5), log_probs(4, 5, seed=1)], (0, 1)),
    ]


@pytest.mark.parametrize("case", range(len(_module_cases())))
def test_loss_modules_match_torchs(case):
    ours, theirs, arrays, attach = _module_cases()[case]
    long_labels = [a if a.dtype.kind == "f" else a.astype(np.int64) for a in arrays]
    assert_matches(ours, lambda *ts: theirs(*(t.long() if not t.is_floating_point() else t
                                              for t in ts)),
                   long_labels, attach=attach)
    assert type(ours).__name__ in imp.nn.__all__


def test_loss_modules_check_their_settings_when_made_and_show_them():
    nn = imp.nn
    assert repr(nn.SmoothL1Loss(beta=0.5)) == "SmoothL1Loss(reduction='mean', beta=0.5)"
    assert repr(nn.CrossEntropyLoss(ignore_index=-100)) == \
        "CrossEntropyLoss(reduction='mean', ignore_index=-100, label_smoothing=0.0)"
    with pytest.raises(ValueError, match=r"MSELoss: reduction must be one of .* got 'avg'"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="KLDivLoss: reduction must be one of"):
        nn.KLDivLoss(reduction="batch")
    assert nn.KLDivLoss(reduction="batchmean").reduction == "batchmean"
    with pytest.raises(ValueError, match="HuberLoss: delta must be > 0, got -1"):
        nn.HuberLoss(delta=-1)
    with pytest.raises(ValueError, match=r"CrossEntropyLoss: label_smoothing must be in \[0, 1\]"):
        nn.CrossEntropyLoss(label_smoothing=2.0)
    with pytest.raises(TypeError):
        nn.MSELoss(None, None, "sum")         # PyTorch's deprecated positional arguments


def test_a_loss_module_is_a_module_whose_weight_is_a_buffer_as_pytorch_s():
    weight = np.array([1.0, 2.0, 0.5], np.float32)

    class Ours(imp.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = imp.nn.Linear(4, 3)
            self.criterion = imp.nn.CrossEntropyLoss(weight=imp.Tensor(weight))

    class Theirs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)
            self.criterion = torch.nn.CrossEntropyLoss(weight=torch.tensor(weight))

    ours, theirs = Ours(), Theirs()
    assert isinstance(ours.criterion, imp.nn.Module)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    y = np.array([0, 2, 1, 1, 0])
    got = ours.criterion(ours.fc(imp.Tensor(x)), imp.Tensor(y.astype(np.int32)))
    want = theirs.criterion(theirs.fc(torch.tensor(x)), torch.tensor(y))
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5)
