"""What tests/fresh_models.py and tests/novel_models.py share: from a set's sizes, builders
and custom steps, a seeded trainer per model name, at the tests' sizes or the bench's
(tools/bench_dtr.py --fresh / --novel)."""
import importlib
import math

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.models import cluster_task, training_step


def stepper(model_params, opt, loss_of):
    """A training step: loss_of() under a GradManager of `model_params`, its backward pass,
    then the optimizer's step; returns the loss."""
    gm = GradManager().attach(model_params)

    def step():
        with gm:
            loss = loss_of()
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return step


NEG = -1e30      # a masked score: finite, so that no inf - inf makes a NaN


def mlp(sizes, act=nn.ReLU):
    """Linear layers of `sizes` with `act` between them."""
    layers = [m for a, b in zip(sizes, sizes[1:]) for m in (nn.Linear(a, b), act())]
    return nn.Sequential(*layers[:-1])


def l2_normalize(x, axis=1):
    """torch.nn.functional.normalize: x / |x| along `axis`."""
    return x * F.rsqrt(F.sum(x * x, axis=axis, keepdims=True) + 1e-12)


def bce_with_logits(logits, targets, reduction="mean"):
    """torch.nn.functional.binary_cross_entropy_with_logits, reduction "mean" or "none"."""
    loss = F.softplus(logits) - targets * logits
    return F.mean(loss) if reduction == "mean" else loss


class LSTMCell(nn.Module):
    """torch.nn.LSTMCell: the four gates are views (a split) of one pre-activation;
    `project` gives a whole sequence's input products at once, one (b, 4 hidden) per step,
    as torch.nn.LSTM computes them."""

    def __init__(self, cin, hidden):
        super().__init__()
        self.hidden = hidden
        self.wx = nn.Linear(cin, 4 * hidden)
        self.wh = nn.Linear(hidden, 4 * hidden, bias=False)

    def project(self, x):
        return [F.squeeze(g, 1) for g in F.split(self.wx(x), x.shape[1], axis=1)]

    def step(self, gx, h, c):
        i, f, g, o = F.split(gx + self.wh(h), 4, axis=1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        return F.sigmoid(o) * F.tanh(c), c

    def forward(self, x, h, c):
        return self.step(self.wx(x), h, c)


def split_heads(t, heads):
    """Attention heads: (b, s, d) -> (b, heads, s, d / heads)."""
    b, s, d = t.shape
    return F.transpose(F.reshape(t, (b, s, heads, d // heads)), (0, 2, 1, 3))


def merge_heads(t):
    """The heads back: (b, heads, s, e) -> (b, s, heads e)."""
    b, h, s, e = t.shape
    return F.reshape(F.transpose(t, (0, 2, 1, 3)), (b, s, h * e))


def attention(q, k, v, heads, bias=None):
    """Multi-head scaled dot-product attention over (b, s, d) inputs; `bias` is added to
    the scores."""
    q, k, v = split_heads(q, heads), split_heads(k, heads), split_heads(v, heads)
    scores = F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(q.shape[-1]))
    if bias is not None:
        scores = scores + bias
    return merge_heads(F.matmul(F.softmax(scores, axis=-1), v))


def _model_set_of(module):
    """The MODEL_SET of the module named `module`."""
    return importlib.import_module(module).MODEL_SET


class ModelSet:
    """`configs` and `bench_sizes`: name -> sizes; `builders`: name -> config -> (model,
    input shape, "adam" or "sgd", learning rate); `steps`: name -> config -> step(), for
    models whose training step is not the plain one. Kept as its module's MODEL_SET, and
    pickled as a reference to it (the bench hands `bench_trainer` to the processes it
    starts; the builders, lambdas, cannot be pickled themselves)."""

    def __init__(self, module, path, configs, bench_sizes, builders, steps):
        self.module, self.path = module, path
        self.configs, self.bench_sizes = configs, bench_sizes
        self.builders, self.steps = builders, steps

    def __reduce__(self):
        return _model_set_of, (self.module,)

    def trainer(self, name, **overrides):
        """A training step of model `name` on fixed data (the same at every call): returns
        the loss. Seeded, so that two trainers of one name give the same losses."""
        c = dict(self.configs[name], **overrides)
        imp.random.seed(0)
        if name in self.steps:
            return self.steps[name](c)
        model, shape, opt_name, lr = self.builders[name](c)
        x, labels = cluster_task(c["batch"], shape)
        opt = (optim.Adam(model.parameters(), lr) if opt_name == "adam"
               else optim.SGD(model.parameters(), lr, momentum=0.9))
        step = training_step(model, opt)
        return lambda: step(x, labels)

    def bench_trainer(self, name, lr=None, batch=None):
        """`trainer` at the bench's sizes, with the zoo trainer's signature."""
        return self.trainer(name, **dict(self.bench_sizes[name],
                                         **({"batch": batch} if batch else {})))

    def bench_describe(self, name):
        sizes = ", ".join(f"{k} {v}" for k, v in self.bench_sizes[name].items())
        return f"{name} ({self.path}; {sizes})"
