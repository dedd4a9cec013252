"""ONNX export of recorded programs (API.md §9, `trace.dump`; issue 15 item 5): whole models
exported and run in onnxruntime against their eager forward, and the exporter's arguments and
errors. The per-op forms are tested in test_onnx_ops.py."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

import imperative as imp  # noqa: E402
from imperative import functional as F, models, nn, ops as O  # noqa: E402
from imperative.jit.onnx_export import export  # noqa: E402
from imperative.jit.program import ARGUMENT, EXTERNAL, INTERNAL, Program, Step  # noqa: E402
from onnx_programs import assert_matches, one_step_program, record, run_exported  # noqa: E402


def _check_model(model, x, tmp_path):
    """Record model(x), export, run in onnxruntime: the outputs equal the eager ones."""
    program, results = record(model, imp.Tensor(x))
    outputs, _ = run_exported(program, tmp_path / "model.onnx", [x])
    assert len(outputs) == len(results)
    for got, expected in zip(outputs, results):
        assert_matches(got, expected.numpy())
    return program


def _ops_of(program):
    return {type(step.op).__name__ for step in program.steps}


def test_an_mlp_runs_in_onnxruntime_as_it_runs_eagerly(tmp_path, rng):
    imp.random.seed(1)
    model = models.mlp(width=16, depth=2)          # Linear, LayerNorm, ReLU
    program = _check_model(model, rng.standard_normal((8, 16)).astype(np.float32), tmp_path)
    assert {"MatrixMul", "LayerNormForward", "Elemwise"} <= _ops_of(program)


class _SmallCNN(nn.Module):
    """Convolutions (bias, stride, groups, dilation), BatchNorm, both poolings, a residual
    connection, flatten, linear and softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 3 * 3, 10)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        y = F.relu(y + self.bn2(self.conv2(y)))
        y = F.avg_pool2d(y, 3, stride=2, padding=1)
        return F.softmax(self.head(F.flatten(y, 1)), axis=-1)


def test_a_cnn_in_eval_mode_runs_in_onnxruntime_as_it_runs_eagerly(tmp_path, rng):
    imp.random.seed(2)
    model = _SmallCNN()
    for _ in range(3):      # running statistics away from their initial 0 and 1
        model(imp.Tensor(rng.standard_normal((4, 3, 12, 12)) * 2 + 0.5))
    model.eval()
    program = _check_model(model, rng.standard_normal((2, 3, 12, 12)).astype(np.float32), tmp_path)
    assert {"Convolution", "BatchNormForward", "Pooling", "Softmax"} <= _ops_of(program)


def test_the_zoos_resnet_runs_in_onnxruntime_as_it_runs_eagerly(tmp_path, rng):
    imp.random.seed(3)
    model = models.ResNet(channels=4, blocks=1, classes=5).eval()
    _check_model(model, rng.standard_normal((2, 3, 8, 8)).astype(np.float32), tmp_path)


def test_a_transformer_encoder_block_runs_in_onnxruntime_as_it_runs_eagerly(tmp_path, rng):
    imp.random.seed(4)
    block = models.EncoderBlock(dim=16, heads=4)    # LayerNorm, attention, GELU MLP, residuals
    program = _check_model(block, rng.standard_normal((2, 5, 16)).astype(np.float32), tmp_path)
    assert {"MatrixMul", "Softmax", "LayerNormForward", "Reshape", "Dimshuffle",
            "Split"} <= _ops_of(program)
    assert any(getattr(step.op, "mode", None) == "GELU" for step in program.steps)


def test_the_zoos_transformer_runs_in_onnxruntime_at_a_newer_opset(tmp_path, rng):
    imp.random.seed(5)
    model = models.Transformer(dim=8, heads=2, blocks=2, classes=3)
    x = rng.standard_normal((3, 4, 8)).astype(np.float32)
    program, results = record(model, imp.Tensor(x))
    # opset 20 has Gelu and Reduce* axes as inputs: the other forms of those ops
    outputs, model_proto = run_exported(program, tmp_path / "t.onnx", [x], opset=20)
    assert_matches(outputs[0], results[0].numpy())
    assert "Gelu" in {n.op_type for n in model_proto.graph.node}


# ---------------------------------------------------------------------------------------
# The exporter's arguments


def _program_of(op, *arrays):
    return one_step_program(op, [imp.Tensor(a) for a in arrays])


def test_arg_names_and_output_names_name_the_graphs_inputs_and_outputs(tmp_path, rng):
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    program, results = _program_of(O.Split(1, (1,)), a + b)
    outputs, model = run_exported(program, tmp_path / "m.onnx", [a + b], arg_names=["images"],
                                  output_names=["head", "tail"])
    assert [i.name for i in model.graph.input] == ["images"]
    assert [o.name for o in model.graph.output] == ["head", "tail"]
    saved = onnx.load(str(tmp_path / "m.onnx"))
    assert [o.name for o in saved.graph.output] == ["head", "tail"]
    for got, expected in zip(outputs, results):
        assert_matches(got, expected.numpy())


def test_default_names_come_from_the_values_then_positions(tmp_path, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    program, _ = _program_of(O.Elemwise("ADD"), x, x)
    program.values[program.arguments[0]].name = "left"
    model = export(program, tmp_path / "m.onnx")
    assert [i.name for i in model.graph.input] == ["left", "arg1"]
    assert [o.name for o in model.graph.output] == ["output0"]


@pytest.mark.parametrize("opset", [17, 18, 21])
def test_the_opset_parameter_sets_the_models_opset(tmp_path, rng, opset):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    program, results = _program_of(O.Reduce("MEAN", 1, True), x)
    outputs, model = run_exported(program, tmp_path / "m.onnx", [x], opset=opset)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", opset)]
    assert_matches(outputs[0], results[0].numpy())


@pytest.mark.parametrize("opset, error", [(16, ValueError), (10_000, ValueError),
                                          ("17", TypeError), (True, TypeError)])
def test_an_opset_outside_the_supported_range_is_refused(tmp_path, opset, error):
    program, _ = _program_of(O.Elemwise("EXP"), np.ones(3, np.float32))
    with pytest.raises(error, match="opset"):
        export(program, tmp_path / "m.onnx", opset=opset)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(arg_names=["a", "b"]), ValueError, "arg_names has 2 name"),
    (dict(arg_names="x"), TypeError, "arg_names must be a sequence"),
    (dict(output_names=[""]), TypeError, "output_names must be a sequence"),
    (dict(output_names=["y", "y"]), ValueError, "output_names has 2"),
    (dict(arg_names=["x"], output_names=["x"]), ValueError, "used twice"),
])
def test_bad_names_are_refused_naming_the_argument(tmp_path, kwargs, error, words):
    program, _ = _program_of(O.Elemwise("EXP"), np.ones(3, np.float32))
    with pytest.raises(error, match=words):
        export(program, tmp_path / "m.onnx", **kwargs)


def test_a_non_program_or_a_bad_path_is_a_type_error(tmp_path):
    program, _ = _program_of(O.Elemwise("EXP"), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="program must be"):
        export([], tmp_path / "m.onnx")
    with pytest.raises(TypeError, match="path must be"):
        export(program, 3)


# ---------------------------------------------------------------------------------------
# What cannot be exported


def test_an_op_with_no_onnx_form_is_a_value_error_naming_it_and_its_step(tmp_path):
    x = imp.Tensor(np.ones((2, 3), np.float32))
    program, _ = record(lambda t: F.dropout(F.exp(t), 0.5, training=True), x)
    rng_step = next(i for i, s in enumerate(program.steps) if "RNG" in type(s.op).__name__)
    program.steps[rng_step].where = "model.py:12"
    with pytest.raises(ValueError, match=rf"DropoutBitsRNG.*step {rng_step} \(issued at "
                                         rf"model.py:12\)"):
        export(program, tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("op, arrays, words", [
    (O.Elemwise("SHL"), [np.ones(3, np.int32)] * 2, "mode SHL has no ONNX form"),
    (O.Elemwise("AND"), [np.ones(3, np.int32)] * 2, "needs opset 18"),
    (O.BatchNormForward(training=True),
     [np.ones((2, 3, 2), np.float32)] + [np.ones(3, np.float32)] * 2, "eval mode"),
])
def test_an_op_or_parameter_without_an_onnx_form_is_named(tmp_path, op, arrays, words):
    program, _ = _program_of(op, *arrays)
    with pytest.raises(ValueError, match=rf"{type(op).__name__}.*step 0.*{words}"):
        export(program, tmp_path / "m.onnx", opset=17)


def test_an_external_value_without_its_data_asks_for_capture_as_const(tmp_path):
    program = Program()
    x = program.new_value((3,), np.float32, ARGUMENT, "x")
    w = program.new_value((3,), np.float32, EXTERNAL, "weight")
    y = program.new_value((3,), np.float32, INTERNAL)
    program.arguments, program.results = [x.id], [y.id]
    program.steps.append(Step(O.Elemwise("MUL"), (x.id, w.id), (y.id,)))
    with pytest.raises(ValueError, match=r"external value 1 \(weight\).*capture_as_const=True"):
        export(program, tmp_path / "m.onnx")
    w.data = np.arange(3, dtype=np.float32)
    outputs, model = run_exported(program, tmp_path / "m.onnx", [np.ones(3, np.float32)])
    assert [t.name for t in model.graph.initializer] == ["weight"]
    assert_matches(outputs[0], np.arange(3, dtype=np.float32))


def test_a_value_no_step_wrote_is_named(tmp_path):
    program = Program()
    x = program.new_value((3,), np.float32, ARGUMENT)
    ghost = program.new_value((3,), np.float32, INTERNAL)
    y = program.new_value((3,), np.float32, INTERNAL)
    program.arguments, program.results = [x.id], [y.id]
    program.steps.append(Step(O.Elemwise("ADD"), (x.id, ghost.id), (y.id,)))
    with pytest.raises(ValueError, match="step 0 reads value 1, an internal value no earlier"):
        export(program, tmp_path / "m.onnx")


def test_a_quantized_value_is_refused_naming_its_dtype(tmp_path):
    x = imp.Tensor(np.ones(4, np.float32))
    q = x.astype(imp.dtype.qint8(0.1))
    program, _ = one_step_program(O.TypeCvt("float32"), [q])
    with pytest.raises(ValueError, match="TypeCvt.*quantized"):
        export(program, tmp_path / "m.onnx")


def test_without_onnx_installed_export_says_how_to_install_it(tmp_path, monkeypatch):
    program, _ = _program_of(O.Elemwise("EXP"), np.ones(3, np.float32))
    monkeypatch.setitem(sys.modules, "onnx", None)      # what an absent package looks like
    with pytest.raises(ImportError, match=r"pip install 'imperative\[onnx\]'"):
        export(program, tmp_path / "m.onnx")
