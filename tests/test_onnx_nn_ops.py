"""The neural-network ops' ONNX forms (imperative/jit/onnx_nn_ops.py): one step exported and
run in onnxruntime equals the op run eagerly, over hypothesis-drawn shapes and parameters
(padding, stride, dilation, groups, axes, reductions, eps)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from imperative import ops as O  # noqa: E402
from onnx_programs import QUICK, SEEDS, check_op, random_values  # noqa: E402


@st.composite
def convolutions(draw):
    """(op, x shape, weight shape, with bias) with a valid output size."""
    groups = draw(st.integers(1, 3))
    cin, cout = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    spans = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    hw = [draw(st.integers(max(1, s - 2 * p), max(1, s - 2 * p) + 5))
          for s, p in zip(spans, padding)]
    x = (draw(st.integers(1, 2)), cin, *hw)
    w = (cout, cin // groups, *kernel)
    return O.Convolution(stride, padding, dilation, groups), x, w, draw(st.booleans())


@QUICK
@given(case=convolutions(), seed=SEEDS, dtype=st.sampled_from(["float32", "float16", "int32"]))
def test_convolution_matches_eager(tmp_path, case, seed, dtype):
    op, x_shape, w_shape, bias = case
    arrays = [random_values(seed, x_shape, dtype), random_values(seed + 1, w_shape, dtype)]
    if bias:
        arrays.append(random_values(seed + 2, (w_shape[0],), dtype))
    check_op(op, arrays, tmp_path)


@st.composite
def poolings(draw):
    mode = draw(st.sampled_from(["MAX", "AVERAGE", "AVERAGE_COUNT_EXCLUDE_PADDING"]))
    window = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = draw(st.none() | st.tuples(st.integers(1, 3), st.integers(1, 3)))
    padding = tuple(draw(st.integers(0, k // 2)) for k in window)
    hw = tuple(draw(st.integers(max(1, k - 2 * p), 7)) for k, p in zip(window, padding))
    return O.Pooling(mode, window, stride, padding), (draw(st.integers(1, 2)), 2) + hw


@QUICK
@given(case=poolings(), seed=SEEDS, dtype=st.sampled_from(["float32", "float16", "int32",
                                                            "int8", "bool"]))
def test_pooling_matches_eager(tmp_path, case, seed, dtype):
    op, shape = case
    check_op(op, [random_values(seed, shape, dtype)], tmp_path)


@pytest.mark.parametrize("op_class", [O.Softmax, O.LogSoftmax])
@QUICK
@given(shape=st.lists(st.integers(1, 5), max_size=4).map(tuple), seed=SEEDS, data=st.data(),
       dtype=st.sampled_from(["float32", "float16", "int32"]))
def test_softmax_and_log_softmax_match_eager(tmp_path, op_class, shape, seed, data, dtype):
    axis = data.draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1), "axis")
    check_op(op_class(axis), [random_values(seed, shape, dtype, -6, 6)], tmp_path)


@QUICK
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), seed=SEEDS,
       data=st.data(), reduction=st.sampled_from(["mean", "sum", "none"]),
       label_dtype=st.sampled_from(["int32", "int8", "uint8"]))
def test_cross_entropy_matches_eager(tmp_path, shape, seed, data, reduction, label_dtype):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), "axis")
    labels_shape = shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]
    labels = random_values(seed + 1, labels_shape, label_dtype, 0, shape[axis] - 1)
    check_op(O.CrossEntropy(axis, reduction), [random_values(seed, shape, "float32", -4, 4), labels],
           tmp_path)


@QUICK
@given(ndim=st.integers(2, 4), seed=SEEDS, eps=st.sampled_from([1e-5, 1e-3, 0.1]),
       dtype=st.sampled_from(["float32", "float16"]), data=st.data())
def test_batch_norm_in_eval_matches_eager(tmp_path, ndim, seed, eps, dtype, data):
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim), "shape"))
    c = shape[1]
    arrays = [random_values(seed, shape, dtype), random_values(seed + 1, (c,), dtype),
              random_values(seed + 2, (c,), dtype), random_values(seed + 3, (c,), dtype),
              random_values(seed + 4, (c,), dtype, 0.2, 3)]
    check_op(O.BatchNormForward(training=False, eps=eps), arrays, tmp_path)


@QUICK
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple), seed=SEEDS,
       eps=st.sampled_from([1e-5, 1e-2]), affine=st.booleans(), data=st.data(),
       dtype=st.sampled_from(["float32", "float16"]))
def test_layer_norm_matches_eager(tmp_path, shape, seed, eps, affine, data, dtype):
    normalized = shape[len(shape) - data.draw(st.integers(1, len(shape)), "dims"):]
    arrays = [random_values(seed, shape, dtype)]
    if affine:
        arrays += [random_values(seed + 1, normalized, dtype), random_values(seed + 2, normalized, dtype)]
    check_op(O.LayerNormForward(normalized, eps), arrays, tmp_path)


@QUICK
@given(indices_shape=st.lists(st.integers(1, 4), max_size=3).map(tuple), rows=st.integers(1, 6),
       seed=SEEDS, dtype=st.sampled_from(["int32", "int8", "uint8"]))
def test_embedding_matches_eager(tmp_path, indices_shape, rows, seed, dtype):
    indices = random_values(seed, indices_shape, dtype, 0, rows - 1)
    check_op(O.Embedding(), [indices, random_values(seed + 1, (rows, 3), "float32")], tmp_path)
