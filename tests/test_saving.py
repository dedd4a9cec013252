"""state_dict / load_state_dict for modules and optimizers, and imp.save / imp.load."""
import io
import zipfile

import numpy as np
import pytest
import torch

import imperative as imp
from imperative import dtype as D, nn, optim
from test_training import blobs, train


def small_net():
    return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(),
                         nn.Flatten(), nn.Linear(2 * 4 * 4, 3))


def torch_net():
    return torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.BatchNorm2d(2),
                               torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32, 3))


def test_state_dict_has_pytorchs_keys_in_pytorchs_order():
    expected = [k for k in torch_net().state_dict() if not k.endswith("num_batches_tracked")]
    assert list(small_net().state_dict()) == expected


def test_load_state_dict_reproduces_outputs_and_buffers():
    x = imp.Tensor(np.random.default_rng(0).standard_normal((4, 1, 4, 4)))
    a, b = small_net(), small_net()
    a(x)                                        # training mode: running statistics move
    b.load_state_dict(a.state_dict())
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    np.testing.assert_array_equal(b[1].running_mean.numpy(), a[1].running_mean.numpy())


def test_load_state_dict_takes_a_pytorch_state_dict():
    t = torch_net().eval()
    ours = small_net().eval()
    ours.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()
                          if not k.endswith("num_batches_tracked")})
    x = np.random.default_rng(1).standard_normal((2, 1, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(ours(imp.Tensor(x)).numpy(), t(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_state_dict_is_a_snapshot():
    lin = nn.Linear(2, 2)
    saved = lin.state_dict()
    before = saved["weight"].numpy().copy()
    lin.weight += 1.0
    np.testing.assert_array_equal(saved["weight"].numpy(), before)


def test_a_failing_load_changes_nothing():
    lin = nn.Linear(3, 2)
    before = {k: v.numpy().copy() for k, v in lin.state_dict().items()}
    good = {k: np.ones(v.shape, np.float32) for k, v in before.items()}
    with pytest.raises(KeyError, match=r"missing keys \['bias'\], unexpected keys \['extra'\]"):
        lin.load_state_dict({"weight": good["weight"], "extra": good["bias"]})
    with pytest.raises(ValueError, match=r"'bias' has shape \(3,\), the module expects \(2,\)"):
        lin.load_state_dict({"weight": good["weight"], "bias": np.ones(3, np.float32)})
    with pytest.raises(TypeError, match="expected a dict"):
        lin.load_state_dict([1, 2])
    for k, v in lin.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    missing, unexpected = lin.load_state_dict({"weight": good["weight"]}, strict=False)
    assert missing == ["bias"] and unexpected == []
    np.testing.assert_array_equal(lin.weight.numpy(), good["weight"])
    assert isinstance(lin.weight, imp.Parameter)


@pytest.mark.parametrize("make_opt", [lambda p: optim.SGD(p, 0.1, momentum=0.9, nesterov=True),
                                      lambda p: optim.Adam(p, 0.01),
                                      lambda p: optim.AdamW(p, 0.01)])
def test_optimizer_state_dict_resumes_training_exactly(make_opt, tmp_path):
    x, labels = (imp.Tensor(a) for a in blobs(16, 3, 4, seed=2))
    model = nn.Linear(3, 4)
    opt = make_opt(model.parameters())
    train(model, x, labels, opt, 2)
    imp.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ckpt")
    expected = train(model, x, labels, opt, 3)

    resumed = nn.Linear(3, 4)
    resumed_opt = make_opt(resumed.parameters())
    checkpoint = imp.load(tmp_path / "ckpt")
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["opt"])
    assert train(resumed, x, labels, resumed_opt, 3) == expected


def test_optimizer_load_state_dict_checks_before_changing():
    opt = optim.SGD([imp.Parameter([1.0, 2.0])], 0.1, momentum=0.5)
    other = optim.SGD([imp.Parameter([1.0]), imp.Parameter([2.0])], 0.3)
    with pytest.raises(ValueError, match="saved optimizer has 2 parameters, this one 1"):
        opt.load_state_dict(other.state_dict())
    bad = {"state": {0: {"momentum": np.zeros(3, np.float32)}},
           "param_groups": [dict(opt.state_dict()["param_groups"][0], lr=0.7)]}
    with pytest.raises(ValueError, match=r"state\[0\]\['momentum'\] has shape \(3,\)"):
        opt.load_state_dict(bad)
    with pytest.raises(ValueError, match="expected a dict with 'state'"):
        opt.load_state_dict({"lr": 1})
    assert opt.lr == 0.1 and opt.momentum == 0.5


def test_save_load_round_trips_nested_values(tmp_path):
    obj = {"w": imp.Parameter([[1.0, 2.0]], name="w"), "step": 3, "lr": 0.1,
           "history": [1.5, float("inf"), float("nan")], "pair": (None, True, "text"),
           7: np.arange(4, dtype=np.int64), "i8": imp.Tensor([1, -2], dtype="int8")}
    imp.save(obj, tmp_path / "f.imp")
    got = imp.load(tmp_path / "f.imp")
    assert list(got) == list(obj)
    assert isinstance(got["w"], imp.Parameter) and got["w"].name == "w"
    np.testing.assert_array_equal(got["w"].numpy(), [[1.0, 2.0]])
    assert got["step"] == 3 and type(got["step"]) is int and got["lr"] == 0.1
    assert got["history"][:2] == [1.5, float("inf")] and np.isnan(got["history"][2])
    assert got["pair"] == (None, True, "text")
    assert got[7].dtype == np.int64 and got[7].tolist() == [0, 1, 2, 3]
    assert got["i8"].dtype == np.int8 and got["i8"].tolist() == [1, -2]
    assert (tmp_path / "f.imp").exists()           # the name is kept (no ".npz" added)


@pytest.mark.parametrize("qdtype", [D.qint8(0.1), D.quint8(0.2, 3), D.qint4(0.5), D.quint4(0.5, 8)])
def test_save_load_keeps_quantized_dtypes(qdtype):
    t = imp.Tensor([0.5, -1.0, 1.5], dtype=qdtype)
    buf = io.BytesIO()
    imp.save(t, buf)
    buf.seek(0)
    got = imp.load(buf)
    assert D.dtype_name(got.dtype) == D.dtype_name(t.dtype)
    np.testing.assert_array_equal(D.dequantize(got.numpy()), D.dequantize(t.numpy()))


def test_save_rejects_what_it_cannot_store_without_pickle():
    with pytest.raises(TypeError, match=r"cannot save set at obj\['a'\]\[1\]"):
        imp.save({"a": [1, {2}]}, io.BytesIO())
    with pytest.raises(TypeError, match="object array"):
        imp.save(np.array([None]), io.BytesIO())
    with pytest.raises(TypeError, match="dict keys must be str or int"):
        imp.save({(1, 2): 3}, io.BytesIO())


def test_load_never_unpickles(tmp_path):
    # an .npz holding a pickled object array: np.load with allow_pickle=True would run
    # its __reduce__; imp.load refuses it
    path = tmp_path / "evil.npz"
    np.savez(path, structure=np.frombuffer(b'{"format": "imperative.save/1", "root": '
                                           b'{"type": "ndarray", "array": "a0"}}', np.uint8),
             a0=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="not a file written by imp.save"):
        imp.load(path)


def test_load_reports_foreign_files(tmp_path):
    (tmp_path / "text").write_text("hello")
    with pytest.raises(ValueError, match="not a file written by imp.save"):
        imp.load(tmp_path / "text")
    np.savez(tmp_path / "plain.npz", x=np.zeros(2))
    with pytest.raises(ValueError, match="no structure record"):
        imp.load(tmp_path / "plain.npz")
    assert zipfile.is_zipfile(tmp_path / "plain.npz")
    # a plain np.save file (one array): it said the array was no context manager
    np.save(tmp_path / "plain.npy", np.arange(3))
    with pytest.raises(ValueError, match=r"not a file written by imp.save .*one numpy array"):
        imp.load(tmp_path / "plain.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "plain.npy"), np.arange(3))
