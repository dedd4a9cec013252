"""nn.TransformerEncoder (docs/api.md, "More PyTorch habits (session 49)") against
PyTorch's with its state dict loaded: the keys, forward values and the gradients of the
input and of every parameter, masks passed through to every layer, and the copies."""
import numpy as np
import pytest

import imperative as imp
from imperative import nn
from test_torch_layers import encoder_call, randn, run_both

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("config", [dict(), dict(norm_first=True, batch_first=True),
                                    dict(activation="gelu")], ids=str)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("with_norm", [False, True])
def test_transformer_encoder_matches_torch(config, masked, with_norm):
    config = dict(dict(dropout=0.0, dim_feedforward=16), **config)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, **config), 3,
                                 norm=nn.LayerNorm(8) if with_norm else None)
    theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, **config), 3,
                                         norm=torch.nn.LayerNorm(8) if with_norm else None,
                                         enable_nested_tensor=False)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert "layers.2.self_attn.in_proj_weight" in ours.state_dict()
    run_both(ours, theirs, randn(3, 5, 8), call=encoder_call(config, masked, "mask"),
             rtol=3e-4, atol=3e-5)


def test_the_layers_are_deep_copies():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    enc = nn.TransformerEncoder(layer, 2)
    a, b = enc.layers[0], enc.layers[1]
    assert a is not layer and b is not a and len(enc.layers) == 2
    assert a.linear1.weight is not b.linear1.weight
    np.testing.assert_array_equal(a.linear1.weight.numpy(), layer.linear1.weight.numpy())
    a.linear1.weight[...] = imp.F.zeros(a.linear1.weight.shape)
    assert b.linear1.weight.numpy().any() and layer.linear1.weight.numpy().any()
    assert len(enc.parameters()) == 2 * len(layer.parameters())


def test_causal_flag_is_passed_through():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    t_layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    ours, theirs = nn.TransformerEncoder(layer, 2), torch.nn.TransformerEncoder(
        t_layer, 2, enable_nested_tensor=False)
    causal = np.triu(np.ones((4, 4), bool), 1)
    run_both(ours, theirs, randn(4, 2, 8),
             call=lambda m, x: m(x, mask=causal if isinstance(m, nn.Module) else
                                 torch.from_numpy(causal), is_causal=True),
             rtol=3e-4, atol=3e-5)


def test_bad_arguments_name_themselves():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    with pytest.raises(TypeError, match=r"TransformerEncoder: encoder_layer must be a Module "
                                        r"\(a TransformerEncoderLayer\), got str"):
        nn.TransformerEncoder("layer", 2)
    with pytest.raises(ValueError, match=r"TransformerEncoder: num_layers must be a positive "
                                         r"int, got 0"):
        nn.TransformerEncoder(layer, 0)
    with pytest.raises(TypeError, match=r"TransformerEncoder: norm must be a Module"):
        nn.TransformerEncoder(layer, 2, norm=8)
