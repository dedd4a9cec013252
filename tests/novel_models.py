"""Ten more models for the memory manager, structurally different from the zoo,
tests/unseen_models.py and tests/fresh_models.py, written in session 39 by a helper that
had not read the memory manager: a bidirectional LSTM whose two directions read halves
of one input product in opposite orders, a feature pyramid with a loss on every level, a
graph convolution network over a dense normalised adjacency, a neural ODE integrated by
RK4 with one shared block, a variational autoencoder, a transformer with a learned
relative-position bias (a gather from a small table), a DARTS-like mixed-op CNN whose
parallel branches are stacked and summed under softmax weights, a deep dropout MLP with
LayerNorm and a skip every four layers, a 1-D conv front end feeding a GRU, and a
multi-task conv net with three weighted losses, one read from an intermediate layer.

Same shape as tests/fresh_models.py: `trainer(name, **overrides)` returns a seeded step
function that returns the loss (a Tensor); `CONFIGS` holds small sizes (a step of a few
milliseconds), `BENCH_SIZES` bench sizes (a step of 20-70 ms on a 2-core machine, a peak
of 8-60 MiB); `BUILDERS` maps a name to `config -> (model, one input's shape, optimizer
name, lr)` for plain `training_step`s and `STEPS` maps the others to `config -> step`.

Public API only: imperative, F, nn, optim, GradManager.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.models import cluster_task, conv_bn_relu, global_average
from model_sets import ModelSet, stepper


# ---------------------------------------------------------------------------------------
# helpers

def _upsample2(x):
    """(n, c, h, w) -> (n, c, 2h, 2w), nearest neighbour, by reshape and broadcast."""
    n, c, h, w = x.shape
    wide = F.broadcast_to(F.reshape(x, (n, c, h, 1, w, 1)), (n, c, h, 2, w, 2))
    return F.reshape(wide, (n, c, 2 * h, 2 * w))


def _down(cin, cout):
    """A strided 3x3 conv (halves the image), batch norm, ReLU."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


# ---------------------------------------------------------------------------------------
# 1. bidirectional LSTM: the input's gates for both directions are one product over the
#    whole sequence, split in two halves read in opposite orders; the two directions'
#    states are concatenated per step, stacked, projected, averaged and classified.
class BiLSTM(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        self.wx = nn.Linear(features, 8 * hidden)
        self.wh_f = nn.Linear(hidden, 4 * hidden, bias=False)
        self.wh_b = nn.Linear(hidden, 4 * hidden, bias=False)
        self.proj = nn.Linear(2 * hidden, hidden)
        self.head = nn.Linear(hidden, 10)

    def _run(self, gates, wh, b):
        h = F.zeros((b, self.hidden))
        c = F.zeros((b, self.hidden))
        states = []
        for g in gates:
            i, f, gg, o = F.split(g + wh(h), 4, axis=1)
            c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(gg)
            h = F.sigmoid(o) * F.tanh(c)
            states.append(h)
        return states

    def forward(self, x):
        b, steps, _ = x.shape
        fwd_g, bwd_g = F.split(self.wx(x), 2, axis=2)            # two (b, steps, 4 hidden)
        fwd_g = [F.squeeze(g, 1) for g in F.split(fwd_g, steps, axis=1)]
        bwd_g = [F.squeeze(g, 1) for g in F.split(bwd_g, steps, axis=1)]
        fwd = self._run(fwd_g, self.wh_f, b)
        bwd = self._run(bwd_g[::-1], self.wh_b, b)[::-1]
        out = F.stack([F.concat([a, r], axis=1) for a, r in zip(fwd, bwd)], axis=1)
        y = F.tanh(self.proj(out))                                # (b, steps, hidden)
        return self.head(F.mean(y, axis=1))


# ---------------------------------------------------------------------------------------
# 2. feature pyramid: bottom-up strided convs, top-down nearest upsampling added to lateral
#    1x1 convs, a 3x3 smoothing conv per level and one classifier shared by every level,
#    a loss on each.
class FPN(nn.Module):
    def __init__(self, ch, width):
        super().__init__()
        widths = [ch, 2 * ch, 4 * ch, 8 * ch]
        self.stem = conv_bn_relu(3, ch)
        self.downs = nn.ModuleList([_down(widths[i], widths[i + 1]) for i in range(3)])
        self.lateral = nn.ModuleList([nn.Conv2d(w, width, 1) for w in widths])
        self.smooth = nn.ModuleList([nn.Conv2d(width, width, 3, padding=1) for _ in widths])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        feats = [self.stem(x)]
        for d in self.downs:
            feats.append(d(feats[-1]))
        p = self.lateral[-1](feats[-1])
        logits = [self.head(global_average(F.relu(self.smooth[-1](p))))]
        for level in (2, 1, 0):
            p = self.lateral[level](feats[level]) + _upsample2(p)
            logits.append(self.head(global_average(F.relu(self.smooth[level](p)))))
        return logits                                             # coarse to fine


def _fpn(c):
    x, labels = cluster_task(c["batch"], (3, c["size"], c["size"]))
    model = FPN(c["ch"], c["width"])
    opt = optim.SGD(model.parameters(), 0.02, momentum=0.9)

    def every_level():
        total = None
        for logits in model(x):
            loss = F.cross_entropy(logits, labels)
            total = loss if total is None else total + loss
        return total * 0.25
    return stepper(model.parameters(), opt, every_level)


# ---------------------------------------------------------------------------------------
# 3. graph convolution network: H <- relu(A (H W)) with A = D^-1/2 (adj + I) D^-1/2 dense,
#    three layers, a class for every node. Edges mostly join nodes of one class.
class GCN(nn.Module):
    def __init__(self, adjacency, features, hidden):
        super().__init__()
        self.adj = adjacency
        self.w1 = nn.Linear(features, hidden)
        self.w2 = nn.Linear(hidden, hidden)
        self.w3 = nn.Linear(hidden, 10)

    def forward(self, x):
        h = F.relu(F.matmul(self.adj, self.w1(x)))
        h = F.relu(F.matmul(self.adj, self.w2(h))) + h
        return F.matmul(self.adj, self.w3(h))


def _gcn(c):
    n = c["nodes"]
    x, labels = cluster_task(n, (c["features"],))
    # noisier features than cluster_task's, so that the neighbours' help matters
    rng = np.random.default_rng(3)
    x = x + imp.Tensor(rng.standard_normal((n, c["features"])).astype(np.float32) * 1.5)
    lab = labels.numpy()
    same = lab[:, None] == lab[None, :]
    edges = rng.random((n, n)) < np.where(same, c["degree"] / (n / 10), 2.0 / n)
    adj = np.triu(edges, 1)
    adj = (adj | adj.T | np.eye(n, dtype=bool)).astype(np.float32)
    d = 1.0 / np.sqrt(adj.sum(axis=1))
    norm = imp.Tensor((adj * d[:, None] * d[None, :]).astype(np.float32))
    model = GCN(norm, c["features"], c["hidden"])
    opt = optim.Adam(model.parameters(), 1e-3)
    return stepper(model.parameters(), opt, lambda: F.cross_entropy(model(x), labels))


# ---------------------------------------------------------------------------------------
# 4. neural ODE: one shared block f integrated by classic RK4 (four evaluations a step,
#    every stage reading the step's start), `steps` steps over t in [0, 1].
class RK4Net(nn.Module):
    def __init__(self, features, width, steps):
        super().__init__()
        self.steps = steps
        self.inp = nn.Linear(features, width)
        self.f1 = nn.Linear(width, 2 * width)
        self.f2 = nn.Linear(2 * width, width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 10)

    def f(self, x):
        return self.f2(F.tanh(self.f1(x)))

    def forward(self, x):
        x = self.inp(x)
        h = 1.0 / self.steps
        for _ in range(self.steps):
            k1 = self.f(x)
            k2 = self.f(x + (0.5 * h) * k1)
            k3 = self.f(x + (0.5 * h) * k2)
            k4 = self.f(x + h * k3)
            x = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        return self.head(self.norm(x))


# ---------------------------------------------------------------------------------------
# 5. variational autoencoder (MLP): mean and log-variance as halves of one product, a fixed
#    noise tensor for the reparameterisation, reconstruction MSE plus a KL term.
class VAE(nn.Module):
    def __init__(self, features, hidden, latent):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 2 * latent))
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, features))

    def forward(self, x, eps):
        mu, logvar = F.split(self.enc(x), 2, axis=1)
        z = mu + F.exp(0.5 * logvar) * eps
        kl = 0.5 * F.mean(F.sum(F.exp(logvar) + mu * mu - 1.0 - logvar, axis=1))
        return self.dec(z), kl


def _vae(c):
    x, _ = cluster_task(c["batch"], (c["features"],))
    rng = np.random.default_rng(1)
    eps = imp.Tensor(rng.standard_normal((c["batch"], c["latent"])).astype(np.float32))
    model = VAE(c["features"], c["hidden"], c["latent"])
    opt = optim.Adam(model.parameters(), 1e-3)

    def elbo():
        recon, kl = model(x, eps)
        return F.mse_loss(recon, x) + c["beta"] * kl
    return stepper(model.parameters(), opt, elbo)


# ---------------------------------------------------------------------------------------
# 6. pre-norm transformer whose attention adds a learned relative-position bias, gathered
#    from a (2 seq - 1, heads) table by a fixed (seq, seq) index; mean pooling.
class RelPosAttention(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.table = nn.Embedding(2 * seq - 1, heads)
        rel = np.arange(seq)[None, :] - np.arange(seq)[:, None] + seq - 1
        self.rel = imp.Tensor(rel.astype(np.int32))

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = F.split(self.qkv(x), 3, axis=-1)

        def split_heads(t):
            return F.transpose(F.reshape(t, (b, s, h, d // h)), (0, 2, 1, 3))
        q, k, v = split_heads(q), split_heads(k), split_heads(v)
        bias = F.transpose(self.table(self.rel), (2, 0, 1))      # (heads, s, s)
        scores = F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(d // h)) + bias
        o = F.transpose(F.matmul(F.softmax(scores, axis=-1), v), (0, 2, 1, 3))
        return self.out(F.reshape(o, (b, s, d)))


class RelPosBlock(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.n1 = nn.LayerNorm(dim)
        self.attn = RelPosAttention(dim, heads, seq)
        self.n2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.fc2(F.relu(self.fc1(self.n2(x))))


class RelPosTransformer(nn.Module):
    def __init__(self, dim, heads, blocks, seq):
        super().__init__()
        self.blocks = nn.Sequential(*[RelPosBlock(dim, heads, seq) for _ in range(blocks)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(F.mean(self.norm(self.blocks(x)), axis=1))


# ---------------------------------------------------------------------------------------
# 7. DARTS-like mixed ops: four parallel branches (1x1, 3x3, dilated 3x3, avg-pool + 1x1)
#    of one input, merged by F.stack and a sum weighted by a softmax of learned logits;
#    a residual around each, a max pool between cells.
class MixedOp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.branches = nn.ModuleList([
            conv_bn_relu(c, c, 1),
            conv_bn_relu(c, c, 3),
            nn.Sequential(nn.Conv2d(c, c, 3, padding=2, dilation=2, bias=False),
                          nn.BatchNorm2d(c), nn.ReLU()),
            nn.Sequential(nn.AvgPool2d(3, stride=1, padding=1), nn.Conv2d(c, c, 1))])
        self.alpha = nn.Parameter(np.zeros(len(self.branches), np.float32))

    def forward(self, x):
        stacked = F.stack([b(x) for b in self.branches], axis=0)   # (k, n, c, h, w)
        w = F.reshape(F.softmax(self.alpha, axis=0), (len(self.branches), 1, 1, 1, 1))
        return x + F.sum(stacked * w, axis=0)


class MixedNet(nn.Module):
    def __init__(self, ch, cells):
        super().__init__()
        self.stem = conv_bn_relu(3, ch)
        self.cells = nn.ModuleList([MixedOp(ch) for _ in range(cells)])
        self.head = nn.Linear(ch, 10)

    def forward(self, x):
        x = self.stem(x)
        for i, cell in enumerate(self.cells):
            x = cell(x)
            if i == len(self.cells) // 2 - 1:
                x = F.max_pool2d(x, 2)
        return self.head(global_average(x))


# ---------------------------------------------------------------------------------------
# 8. deep MLP: `depth` x (Linear, LayerNorm, ReLU, nn.Dropout), a skip connection around
#    every four layers.
class DropSkipMLP(nn.Module):
    def __init__(self, features, width, depth, p):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.layers = nn.ModuleList([
            nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.ReLU(),
                          nn.Dropout(p)) for _ in range(depth)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = self.inp(x)
        skip = x
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i % 4 == 3:
                x = x + skip
                skip = x
        return self.head(x)


# ---------------------------------------------------------------------------------------
# 9. 1-D conv front end (two strided convs, conv2d with H = 1) whose last 1x1 conv makes
#    the GRU's input gates for every step at once; the GRU then runs over the conv
#    features, a classifier on its last state.
class ConvGRU(nn.Module):
    def __init__(self, cin, c, k, hidden):
        super().__init__()
        self.hidden = hidden
        self.front = nn.Sequential(
            nn.Conv2d(cin, c, (1, k), stride=(1, 2), padding=(0, k // 2), bias=False),
            nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, c, (1, k), stride=(1, 2), padding=(0, k // 2), bias=False),
            nn.BatchNorm2d(c), nn.ReLU(),
            nn.Conv2d(c, 3 * hidden, 1))
        self.wh = nn.Linear(hidden, 3 * hidden)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        g = self.front(x)                                         # (b, 3 hidden, 1, steps)
        b, ch, _, steps = g.shape
        g = F.transpose(F.reshape(g, (b, ch, steps)), (2, 0, 1))  # (steps, b, 3 hidden)
        h = F.zeros((b, self.hidden))
        for gt in F.split(g, steps, axis=0):
            xr, xz, xn = F.split(F.squeeze(gt, 0), 3, axis=1)
            hr, hz, hn = F.split(self.wh(h), 3, axis=1)
            r = F.sigmoid(xr + hr)
            z = F.sigmoid(xz + hz)
            n = F.tanh(xn + r * hn)
            h = n + z * (h - n)
        return self.head(h)


# ---------------------------------------------------------------------------------------
# 10. multi-task: one conv trunk, three heads and three losses summed with different
#     weights: the class from the last layer, the class mod 3 from the last layer, and a
#     dense regression of the half-resolution image read from an intermediate layer.
class MultiTask(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.s1 = conv_bn_relu(3, ch)
        self.s2 = conv_bn_relu(ch, 2 * ch)
        self.s3 = conv_bn_relu(2 * ch, 4 * ch)
        self.s4 = conv_bn_relu(4 * ch, 4 * ch)
        self.cls = nn.Linear(4 * ch, 10)
        self.mod3 = nn.Sequential(nn.Linear(4 * ch, 2 * ch), nn.ReLU(), nn.Linear(2 * ch, 3))
        self.dense = nn.Sequential(conv_bn_relu(2 * ch, ch), nn.Conv2d(ch, 3, 1))

    def forward(self, x):
        mid = self.s2(F.max_pool2d(self.s1(x), 2))                # (n, 2 ch, h/2, w/2)
        top = self.s4(self.s3(F.max_pool2d(mid, 2)))
        pooled = global_average(top)
        return self.cls(pooled), self.mod3(pooled), self.dense(mid)


def _multitask(c):
    x, labels = cluster_task(c["batch"], (3, c["size"], c["size"]))
    mod3 = imp.Tensor((labels.numpy() % 3).astype(np.int32))
    small = F.avg_pool2d(x, 2)
    model = MultiTask(c["ch"])
    opt = optim.Adam(model.parameters(), 1e-3)

    def three_losses():
        a, b, r = model(x)
        return (F.cross_entropy(a, labels) + 0.5 * F.cross_entropy(b, mod3)
                + 0.25 * F.mse_loss(r, small))
    return stepper(model.parameters(), opt, three_losses)


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "bilstm": dict(features=32, hidden=128, steps=32, batch=96),
    "fpn": dict(ch=16, width=32, size=32, batch=16),
    "gcn": dict(nodes=512, features=512, hidden=1024, degree=8),
    "rk4": dict(features=64, width=256, steps=4, batch=256),
    "vae": dict(features=256, hidden=512, latent=32, beta=0.1, batch=1024),
    "relpos": dict(dim=64, heads=4, blocks=2, seq=64, batch=64),
    "mixedop": dict(ch=16, cells=4, size=32, batch=8),
    "dropskip": dict(features=64, width=256, depth=24, p=0.1, batch=384),
    "convgru": dict(cin=4, c=32, k=5, hidden=128, length=256, batch=64),
    "multitask": dict(ch=16, size=32, batch=32),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "bilstm": dict(features=16, hidden=32, steps=8, batch=16),
    "fpn": dict(ch=8, width=16, size=16, batch=4),
    "gcn": dict(nodes=64, features=32, hidden=32, degree=4),
    "rk4": dict(features=16, width=32, steps=2, batch=64),
    "vae": dict(features=32, hidden=64, latent=8, beta=0.1, batch=64),
    "relpos": dict(dim=32, heads=2, blocks=1, seq=16, batch=4),
    "mixedop": dict(ch=8, cells=2, size=16, batch=2),
    "dropskip": dict(features=16, width=32, depth=8, p=0.1, batch=64),
    "convgru": dict(cin=4, c=8, k=5, hidden=16, length=32, batch=16),
    "multitask": dict(ch=8, size=16, batch=4),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {
    "bilstm": lambda c: (BiLSTM(c["features"], c["hidden"]), (c["steps"], c["features"]),
                         "adam", 2e-3),
    "rk4": lambda c: (RK4Net(c["features"], c["width"], c["steps"]), (c["features"],),
                      "sgd", 0.02),
    "relpos": lambda c: (RelPosTransformer(c["dim"], c["heads"], c["blocks"], c["seq"]),
                         (c["seq"], c["dim"]), "adam", 1e-3),
    "mixedop": lambda c: (MixedNet(c["ch"], c["cells"]), (3, c["size"], c["size"]),
                          "sgd", 0.02),
    "dropskip": lambda c: (DropSkipMLP(c["features"], c["width"], c["depth"], c["p"]),
                           (c["features"],), "sgd", 0.005),
    "convgru": lambda c: (ConvGRU(c["cin"], c["c"], c["k"], c["hidden"]),
                          (c["cin"], 1, c["length"]), "adam", 2e-3),
}

# name -> config -> step(): models with their own training step
STEPS = {
    "fpn": _fpn,
    "gcn": _gcn,
    "vae": _vae,
    "multitask": _multitask,
}


MODEL_SET = ModelSet(__name__, "tests/novel_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
