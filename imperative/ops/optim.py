"""Optimizer updates as one op: AdamStep.

An Adam update issued as ordinary ops is about twenty of them per parameter (moments,
bias corrections, the step, the update); on a dispatch-bound training step that was a
quarter of the time. AdamStep computes the same values in one native pass (or the same
numpy calls where the native loops do not run), rounding each product, sum, quotient and
square root to float32 as those ops do (a Python number operand is a 0-d array of the
tensor's dtype, as the operators make it): its results are bit-identical to them."""
import numpy as np

from ..backend import native
from .base import Op, check_arity, reject_quantized
from .elemwise import ScaledAdd

_FLOAT32 = np.dtype(np.float32)


def _const(value):
    """A Python number as the operators make it beside a float32 tensor."""
    return np.array(value, _FLOAT32)


class AdamStep(Op):
    """`AdamStep(lr, beta1, beta2, eps, log_beta1, log_beta2, params=1)`: the Adam update of
    `params` parameters in one op. Inputs (param, grad, m, v, t) per parameter, float32,
    the first four of one shape and t 0-d (the step count before this step); outputs
    (param', m', v', t') per parameter, with

        t' = t + 1
        m' = m * beta1 + grad * (1 - beta1);  v' = v * beta2 + (grad * grad) * (1 - beta2)
        c1 = -expm1(t' * log_beta1);          c2 = -expm1(t' * log_beta2)
        param' = param - lr * ((m' / c1) / (sqrt(v' / c2) + eps))

    as `optim.Adam` issues it op by op (the last line is ScaledAdd(-lr))."""

    _fields = ("lr", "beta1", "beta2", "eps", "log_beta1", "log_beta2", "params")

    def __init__(self, lr, beta1, beta2, eps, log_beta1, log_beta2, params=1):
        self._set(lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps),
                  log_beta1=float(log_beta1), log_beta2=float(log_beta2), params=int(params))
        self._set(_consts=tuple(_const(c) for c in (
            1.0, beta1, 1 - beta1, beta2, 1 - beta2, log_beta1, log_beta2, eps, -lr)),
            _update=ScaledAdd(-lr), _corrections={})

    def infer(self, inputs):
        check_arity(self, inputs, 5 * self.params)
        reject_quantized(self, inputs)
        outputs = ()
        for i in range(0, len(inputs), 5):
            group = inputs[i:i + 5]     # (unpacked in two steps: Cython 3.3 crashes on one)
            param, grad, m, v, t = group
            for name, x in zip(("param", "grad", "m", "v", "t"), group):
                if x.dtype != _FLOAT32:
                    raise TypeError(f"{self!r}: {name} must be float32, got {x.dtype}")
            for name, x in (("grad", grad), ("m", m), ("v", v)):
                if x.shape != param.shape:
                    raise ValueError(f"{self!r}: {name} has shape {x.shape}, param "
                                     f"{param.shape}")
            if t.shape != ():
                raise ValueError(f"{self!r}: the step count t must be 0-d, got shape {t.shape}")
            outputs += tuple((x.shape, x.dtype) for x in (param, m, v, t))
        return outputs

    def _step_count(self, t):
        """(t + 1, c1, c2, the constants native.adam takes) for the count t: the same for
        every parameter of a step, so remembered (the last few counts) rather than computed
        once per parameter."""
        key = float(t)
        found = self._corrections.get(key)
        if found is None:
            one, b1, one_minus_b1, b2, one_minus_b2, log_b1, log_b2, eps, alpha = self._consts
            t = np.add(t, one)
            c1 = np.negative(np.expm1(np.multiply(t, log_b1)))
            c2 = np.negative(np.expm1(np.multiply(t, log_b2)))
            found = (np.asarray(t, _FLOAT32), c1, c2, np.array(
                (b1, one_minus_b1, b2, one_minus_b2, c1, c2, eps, alpha), _FLOAT32))
            if len(self._corrections) >= 4:
                self._corrections.clear()
            self._corrections[key] = found
        return found

    def kernel(self, *arrays):
        if self.params == 1:
            return self._one(*arrays)
        counts = [self._step_count(t) for t in arrays[4::5]]
        done = native.adam_steps(arrays, [count[3] for count in counts])
        results = ()
        for i in range(self.params):
            if done is None:
                results += self._one(*arrays[5 * i:5 * i + 5])
            else:
                results += done[3 * i:3 * i + 3] + (counts[i][0].copy(),)
        return results

    def _one(self, param, grad, m, v, t):
        t, correction1, correction2, constants = self._step_count(t)
        done = native.adam(param, grad, m, v, constants)
        if done is not None:
            return done + (t.copy(),)
        _, b1, one_minus_b1, b2, one_minus_b2, _, _, eps, _ = self._consts
        m = np.add(np.multiply(m, b1), np.multiply(grad, one_minus_b1))
        v = np.add(np.multiply(v, b2), np.multiply(np.multiply(grad, grad), one_minus_b2))
        step = np.true_divide(np.true_divide(m, correction1),
                              np.add(np.sqrt(np.true_divide(v, correction2)), eps))
        return self._update.kernel(param, step), m, v, t.copy()
