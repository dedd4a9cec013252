"""ONNX forms of the elementwise ops: Elemwise (every mode ONNX can express), LeakyRelu,
Clip and Where.

Dtypes follow the op's own rule (the compute dtype its kernel promotes the inputs to, the
output dtype it rounds to). ONNX computes in a wider dtype where that gives the same result
and onnxruntime has more kernels for it: float16 in float32 (numpy's float16 loops compute
in float32 and round too), and the integers narrower than 32 bits and bool in int32 (wrapping
arithmetic agrees in the low bits, so the cast back gives numpy's wrapped result).
"""
from __future__ import annotations

import math

import numpy as np

from .. import ops as O
from .onnx_graph import UnsupportedOp

_FLOAT32 = np.dtype(np.float32)
_INT32 = np.dtype(np.int32)
_BOOL = np.dtype(np.bool_)
_NARROW_INTS = {np.dtype(t) for t in (np.int8, np.int16, np.uint8, np.uint16, np.bool_)}


def _widened(dtype):
    if dtype == np.float16:
        return _FLOAT32
    return _INT32 if dtype in _NARROW_INTS else dtype


# bitwise modes on bools are ONNX's logical ops (in int32, ~1 would be -2: true)
_BOOL_STAYS_BOOL = {"AND", "OR", "XOR", "NOT"}


# ---------------------------------------------------------------------------------------
# Composite forms. Each takes the builder, the input names (in the compute dtype `dt`) and
# `dt`; returns the result's name.


def _one(b, dt):
    return b.const(1, dt)


def _floor_div(b, xs, dt):
    x, y = xs
    q = b.node("Div", [x, y])
    if dt.kind == "f":
        return b.node("Floor", [q])
    # integer Div truncates toward zero; numpy floors: one less where the remainder is
    # non-zero and its sign differs from the divisor's
    rem = b.node("Sub", [x, b.node("Mul", [q, y])])
    zero = b.const(0, dt)
    inexact = b.node("Not", [b.node("Equal", [rem, zero])])
    signs_differ = b.node("Xor", [b.node("Less", [rem, zero]), b.node("Less", [y, zero])])
    fix = b.cast(b.node("And", [inexact, signs_differ]), _BOOL, dt)
    return b.node("Sub", [q, fix])


def _mod(b, xs, dt):
    x, y = xs
    if dt.kind != "f":
        return b.node("Mod", [x, y], fmod=0)     # integer Mod takes the divisor's sign
    # float: C's fmod has the dividend's sign; numpy's remainder the divisor's
    r = b.node("Mod", [x, y], fmod=1)
    zero = b.const(0, dt)
    nonzero = b.node("Not", [b.node("Equal", [r, zero])])
    signs_differ = b.node("Xor", [b.node("Less", [r, zero]), b.node("Less", [y, zero])])
    return b.node("Where", [b.node("And", [nonzero, signs_differ]), b.node("Add", [r, y]), r])


def _expm1(b, xs, dt):
    # Kahan's form: (e^x - 1) * x / log(e^x) keeps full relative accuracy near 0, where
    # e^x - 1 alone would cancel to 0
    (x,) = xs
    u = b.node("Exp", [x])
    um1 = b.node("Sub", [u, _one(b, dt)])
    ratio = b.node("Div", [b.node("Mul", [um1, x]), b.node("Log", [u])])
    tiny = b.node("Equal", [u, _one(b, dt)])
    saturated = b.node("Equal", [um1, b.const(-1, dt)])
    return b.node("Where", [tiny, x, b.node("Where", [saturated, um1, ratio])])


def _log1p(b, xs, dt):
    # Kahan's form: log(1 + x) * x / ((1 + x) - 1), exact for the rounding of 1 + x
    (x,) = xs
    u = b.node("Add", [x, _one(b, dt)])
    um1 = b.node("Sub", [u, _one(b, dt)])
    ratio = b.node("Div", [b.node("Mul", [b.node("Log", [u]), x]), um1])
    return b.node("Where", [b.node("Equal", [um1, b.const(0, dt)]), x, ratio])


def _trunc(b, xs, dt):
    (x,) = xs
    negative = b.node("Less", [x, b.const(0, dt)])
    return b.node("Where", [negative, b.node("Ceil", [x]), b.node("Floor", [x])])


def _gelu(approximate):
    def form(b, xs, dt):
        (x,) = xs
        if b.opset >= 20:
            return b.node("Gelu", [x], approximate=approximate)
        if approximate == "none":       # x * (1 + erf(x / sqrt 2)) / 2
            inner = b.node("Erf", [b.node("Mul", [x, b.const(1 / math.sqrt(2), dt)])])
        else:                           # x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2
            cube = b.node("Mul", [b.node("Mul", [x, x]), x])
            poly = b.node("Add", [x, b.node("Mul", [cube, b.const(0.044715, dt)])])
            inner = b.node("Tanh", [b.node("Mul", [poly, b.const(math.sqrt(2 / math.pi), dt)])])
        half_x = b.node("Mul", [x, b.const(0.5, dt)])
        return b.node("Mul", [half_x, b.node("Add", [inner, _one(b, dt)])])
    return form


def _relu(b, xs, dt):
    if dt.kind == "f":
        return b.node("Relu", xs)
    return b.node("Max", [xs[0], b.const(0, dt)])


def _whole_numbers_unchanged(float_form):
    """Floor, Ceil, Round, Trunc: integers are whole already (numpy returns them unchanged)."""
    def form(b, xs, dt):
        return float_form(b, xs, dt) if dt.kind == "f" else xs[0]
    return form


def _bitwise(bool_op, int_op):
    """Logical ONNX ops on bool, the Bitwise* ones (opset 18) on integers."""
    def form(b, xs, dt):
        if dt == _BOOL:
            return b.node(bool_op, xs)
        if b.opset < 18:
            raise UnsupportedOp(f"{int_op} on integers needs opset 18 or later")
        return b.node(int_op, xs)
    return form


def _logical(op_type):
    """Truth values of any dtype: ONNX's logical ops take bools (a Cast is `!= 0`)."""
    def form(b, xs, dt):
        return b.node(op_type, [b.cast(x, dt, _BOOL) for x in xs])
    return form


def _plain(op_type, **attributes):
    def form(b, xs, dt):
        return b.node(op_type, xs, **attributes)
    return form


def _negated(op_type):
    def form(b, xs, dt):
        return b.node("Not", [b.node(op_type, xs)])
    return form


def _times_sigmoid(b, xs, dt):
    return b.node("Mul", [xs[0], b.node("Sigmoid", xs)])


def _reciprocal_sqrt(b, xs, dt):
    return b.node("Div", [_one(b, dt), b.node("Sqrt", xs)])


_BOOL_RESULT = {"EQ", "NE", "LT", "LEQ", "GT", "GEQ", "LOGICAL_AND", "LOGICAL_OR",
                "LOGICAL_XOR", "LOGICAL_NOT"}

# mode -> form(builder, input names, compute dtype) -> name. Modes not here (the shifts,
# which ONNX has for unsigned integers only) have no ONNX form.
_FORMS = {
    "ADD": _plain("Add"), "SUB": _plain("Sub"), "MUL": _plain("Mul"),
    "TRUE_DIV": _plain("Div"), "FLOOR_DIV": _floor_div, "MOD": _mod, "POW": _plain("Pow"),
    "MAX": _plain("Max"), "MIN": _plain("Min"), "NEGATE": _plain("Neg"),
    "ABS": _plain("Abs"), "SIGN": _plain("Sign"),
    "AND": _bitwise("And", "BitwiseAnd"), "OR": _bitwise("Or", "BitwiseOr"),
    "XOR": _bitwise("Xor", "BitwiseXor"), "NOT": _bitwise("Not", "BitwiseNot"),
    "LOGICAL_AND": _logical("And"), "LOGICAL_OR": _logical("Or"),
    "LOGICAL_XOR": _logical("Xor"), "LOGICAL_NOT": _logical("Not"),
    "EQ": _plain("Equal"), "NE": _negated("Equal"), "LT": _plain("Less"),
    "LEQ": _plain("LessOrEqual"), "GT": _plain("Greater"), "GEQ": _plain("GreaterOrEqual"),
    "FLOOR": _whole_numbers_unchanged(_plain("Floor")),
    "CEIL": _whole_numbers_unchanged(_plain("Ceil")),
    "ROUND": _whole_numbers_unchanged(_plain("Round")),     # half to even, as numpy
    "TRUNC": _whole_numbers_unchanged(_trunc),
    "EXP": _plain("Exp"), "EXPM1": _expm1, "LOG": _plain("Log"), "LOG1P": _log1p,
    "SQRT": _plain("Sqrt"), "RSQRT": _reciprocal_sqrt, "SIN": _plain("Sin"),
    "COS": _plain("Cos"), "TAN": _plain("Tan"), "TANH": _plain("Tanh"), "ERF": _plain("Erf"),
    "RELU": _relu, "SIGMOID": _plain("Sigmoid"), "GELU": _gelu("none"),
    "GELU_TANH": _gelu("tanh"), "SOFTPLUS": _plain("Softplus"), "SILU": _times_sigmoid,
    "HSWISH": _plain("HardSwish"), "HSIGMOID": _plain("HardSigmoid", alpha=1 / 6, beta=0.5),
}


def modes():
    """The Elemwise modes that have an ONNX form."""
    return tuple(_FORMS)


def elemwise(b, op, ins, outs):
    form = _FORMS.get(op.mode)
    if form is None:
        raise UnsupportedOp(f"mode {op.mode} has no ONNX form")
    # the op's own dtype rule: the dtype its kernel promotes the inputs to
    compute = op._dtypes_for(tuple(x.dtype for x in ins))[0]
    if not (compute == _BOOL and op.mode in _BOOL_STAYS_BOOL):
        compute = _widened(compute)
    result = form(b, [b.cast(x.name, x.dtype, compute) for x in ins], compute)
    natural = _BOOL if op.mode in _BOOL_RESULT else compute
    return [b.cast(result, natural, outs[0].dtype)]


def leaky_relu(b, op, ins, outs):
    (x,), dt = ins, outs[0].dtype
    compute = _widened(dt)
    y = b.node("LeakyRelu", [b.cast(x.name, x.dtype, compute)], alpha=op.negative_slope)
    return [b.cast(y, compute, dt)]


def clip(b, op, ins, outs):
    (x,) = ins
    compute = _widened(x.dtype)

    def bound(value):
        # the kernel's rule: the bound in x's dtype, integers clamped to its range
        if value is None:
            return ""
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            value = min(max(int(value), info.min), info.max)
        return b.const(np.asarray(value).astype(x.dtype).astype(compute))

    y = b.node("Clip", [b.cast(x.name, x.dtype, compute), bound(op.lower), bound(op.upper)])
    return [b.cast(y, compute, x.dtype)]


def where(b, op, ins, outs):
    cond, x, y = ins
    dt = outs[0].dtype
    compute = _widened(dt)      # onnxruntime's Where has no bool or float16 kernel
    chosen = b.node("Where", [b.cast(cond.name, cond.dtype, _BOOL),
                              b.cast(x.name, x.dtype, compute), b.cast(y.name, y.dtype, compute)])
    return [b.cast(chosen, compute, dt)]


TRANSLATIONS = {O.Elemwise: elemwise, O.LeakyRelu: leaky_relu, O.Clip: clip, O.Where: where}
