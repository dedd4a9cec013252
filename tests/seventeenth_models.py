"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout,sixth,seventh,eighth,ninth,tenth,eleventh,twelfth,
thirteenth,fourteenth,fifteenth,sixteenth}_models.py; written after session 59 by a helper
that had not read the memory manager, picked for graph shapes the other sets lack, most of
them models users train every day: a physics-informed network for Burgers' equation (the PDE
residual needs u_t, u_x and u_xx at every collocation point: a GradManager over the points
nested in a second one, itself nested in the training recording, so that the loss's backward
pass runs through a backward pass through a backward pass; Adam, StepLR), a LLaMA-style
decoder (RMSNorm, rotary position embeddings applied by halves and a concat, grouped-query
attention whose few key and value heads are broadcast to the query heads, SwiGLU; AdamW
under a warm-up and cosine, clipped), a conv net trained by Muon (the momentum of every conv
filter past the stem orthogonalised by five Newton-Schulz iterations of matrix products
outside any recording, the update written into the filter in place; AdamW for the rest),
N-BEATS (doubly residual stacks: each block's backcast subtracted from the input of the
next, its forecast added to a running sum, the trend and seasonality stacks' blocks one
weight-shared block applied three times on polynomial and Fourier bases; MASE loss; Adam,
MultiStepLR), a spatial transformer network (the PyTorch tutorial's: a localisation net's
affine matrix, a sampling grid, bilinear sampling by four F.gather of the padded image at
indices computed from the grid, weights differentiable back to the matrix; plain SGD), soft
actor-critic on a vectorised pendulum (an environment step a training step, actions read
back, a replay buffer in numpy; twin critics against Polyak averaged targets updated in
place, a tanh-Gaussian actor differentiated through critics it does not train, a learned
temperature; three Adam optimizers and three backward passes a step), a DETR-like detector
(a conv backbone, a transformer encoder, a decoder of learned object queries; each decoder
layer's predictions matched to the objects by the Hungarian algorithm on a cost read back,
the matched pairs gathered by index_select for L1 and GIoU losses, a no-object-weighted
cross entropy; two AdamWs, clipped), Barlow Twins (two augmented views drawn each step
through one ResNet and a wide projector, the (D, D) cross-correlation of the
batch-normalised embeddings pushed to the identity; a hand-written LARS with trust ratios
per layer and a warm-up and cosine), an R(2+1)D video classifier (each 3-D convolution
factored into a spatial Conv2d over the frames and a temporal Conv1d over every pixel's time
series, reshapes and transposes between the two layouts, strided in space and time; Nesterov
SGD, MultiStepLR) and a ResNet-9 in mixed precision (fp16 copies of fp32 master weights cast
in every layer, batch norm in fp32, dynamic loss scaling: every gradient checked for
overflow by a sum read back, a step skipped and the scale halved on overflow, doubled after
a run of good steps; SGD under OneCycleLR).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/sixteenth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import (CosineAnnealingLR, LambdaLR, MultiStepLR, OneCycleLR,
                                     StepLR)
from fifteenth_models import _step_with_clip
from model_sets import NEG, ModelSet, mlp, stepper
from sixteenth_models import _textures
from tenth_models import _cycle, _then


def _tensor(a, dtype=np.float32):
    return imp.Tensor(np.asarray(a).astype(dtype))


# ---------------------------------------------------------------------------------------
# 1. A physics-informed neural network (Raissi et al.) for the viscous Burgers' equation
#    u_t + u u_x = (0.01 / pi) u_xx on [-1, 1] x [0, 1], u(x, 0) = -sin(pi x),
#    u(+-1, t) = 0: a tanh MLP of (x, t); at every collocation point the residual needs u_t
#    and u_x (a GradManager attached to the points, inside a second one attached to x that
#    differentiates u_x once more for u_xx, both inside the training recording), so the
#    loss's backward pass runs through two nested backward passes (third order). The loss
#    the residual's mean square plus the initial and boundary conditions'. Adam, the rate
#    halved every 100 steps. Four batches of points cycle.
def _burgers_derivatives(net, x, t):
    """(u, u_t, u_x, u_xx) at the points (x, t), differentiable again."""
    outer = GradManager().attach([x])
    with outer:
        inner = GradManager().attach([x, t])
        with inner:
            u = net(F.concat([x, t], axis=1))
            inner.backward(F.sum(u))
        u_x, u_t = x.grad, t.grad
        x.grad = t.grad = None
        outer.backward(F.sum(u_x))
    u_xx = x.grad
    x.grad = None
    return u, u_t, u_x, u_xx


def _burgers_points(rng, interior, edge):
    x, t = rng.uniform(-1, 1, (interior, 1)), rng.uniform(0, 1, (interior, 1))
    x0 = rng.uniform(-1, 1, (edge, 1))
    initial = np.concatenate([x0, np.zeros_like(x0)], axis=1)
    boundary = np.concatenate([rng.choice([-1.0, 1.0], (edge, 1)), rng.uniform(0, 1, (edge, 1))],
                              axis=1)
    return (_tensor(x), _tensor(t), _tensor(initial), _tensor(-np.sin(np.pi * x0)),
            _tensor(boundary))


def _pinn(c):
    rng = np.random.default_rng(801)
    batches = [_burgers_points(rng, c["interior"], c["edge"]) for _ in range(4)]
    net = mlp([2] + [c["hidden"]] * c["depth"] + [1], nn.Tanh)
    opt = optim.Adam(net.parameters(), 1e-3)
    schedule = StepLR(opt, 100, gamma=0.5)
    next_batch = _cycle(batches)
    nu = 0.01 / math.pi

    def loss_of():
        x, t, initial, u0, boundary = next_batch()
        u, u_t, u_x, u_xx = _burgers_derivatives(net, x, t)
        residual = u_t + u * u_x - nu * u_xx
        return (F.mean(residual ** 2) + F.mean((net(initial) - u0) ** 2)
                + F.mean(net(boundary) ** 2))
    return _then(stepper(net.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 2. A LLaMA-style decoder-only language model: pre-norm blocks with RMSNorm, rotary
#    position embeddings (queries and keys rotated by halves: x cos + rotate_half(x) sin,
#    rotate_half a concat of the negated second half and the first), grouped-query
#    attention (`kv_heads` key and value heads, each broadcast to the query heads of its
#    group by expand_dims, broadcast_to and a reshape), a causal additive mask, SwiGLU
#    feed-forwards, no biases, an untied output head. Text from a sparse random Markov
#    chain. AdamW (betas 0.9, 0.95, weight decay 0.1), a linear warm-up then cosine
#    decay, the gradient clipped to norm 1. Four batches cycle.
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = imp.Parameter(np.ones(dim, np.float32))

    def forward(self, x):
        return x * F.rsqrt(F.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.weight


def _rotate_half(x):
    first, second = F.split(x, 2, axis=-1)
    return F.concat([-second, first], axis=-1)


class LlamaBlock(nn.Module):
    def __init__(self, dim, heads, kv_heads, ff):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attn_norm, self.ff_norm = RMSNorm(dim), RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.w1, self.w3 = nn.Linear(dim, ff, bias=False), nn.Linear(dim, ff, bias=False)
        self.w2 = nn.Linear(ff, dim, bias=False)

    def _heads(self, t, n):
        b, s, _ = t.shape
        return F.transpose(F.reshape(t, (b, s, n, self.head_dim)), (0, 2, 1, 3))

    def _repeat_kv(self, t):
        b, k, s, d = t.shape
        group = self.heads // k
        t = F.broadcast_to(F.expand_dims(t, 2), (b, k, group, s, d))
        return F.reshape(t, (b, k * group, s, d))

    def forward(self, x, cos, sin, mask):
        b, s, dim = x.shape
        h = self.attn_norm(x)
        q = self._heads(self.wq(h), self.heads)
        k = self._heads(self.wk(h), self.kv_heads)
        v = self._heads(self.wv(h), self.kv_heads)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        k, v = self._repeat_kv(k), self._repeat_kv(v)
        scores = F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(self.head_dim)) + mask
        out = F.matmul(F.softmax(scores, axis=-1), v)
        x = x + self.wo(F.reshape(F.transpose(out, (0, 2, 1, 3)), (b, s, dim)))
        h = self.ff_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, ff, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([LlamaBlock(dim, heads, kv_heads, ff) for _ in range(layers)])
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        half = dim // heads // 2
        angles = np.outer(np.arange(seq), 10000.0 ** (-np.arange(half) / half))
        self.cos = _tensor(np.cos(np.concatenate([angles, angles], axis=1)))
        self.sin = _tensor(np.sin(np.concatenate([angles, angles], axis=1)))
        self.mask = _tensor(np.triu(np.full((seq, seq), NEG), 1))

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin, self.mask)
        return self.head(self.norm(x))


def _markov_text(rng, n, length, vocab, successors=4):
    """(n, length) tokens of a random chain: each token followed by one of a few likely
    tokens, sometimes by any."""
    likely = rng.integers(0, vocab, (vocab, successors))
    out = np.empty((n, length), np.int32)
    out[:, 0] = rng.integers(0, vocab, n)
    for t in range(1, length):
        pick = likely[out[:, t - 1], rng.integers(0, successors, n)]
        out[:, t] = np.where(rng.uniform(size=n) < 0.9, pick, rng.integers(0, vocab, n))
    return out


def _llama(c):
    rng = np.random.default_rng(803)
    seq, vocab = c["seq"], c["vocab"]
    batches = [_markov_text(rng, c["batch"], seq + 1, vocab) for _ in range(4)]
    batches = [(imp.Tensor(b[:, :-1]), imp.Tensor(b[:, 1:].reshape(-1))) for b in batches]
    model = Llama(vocab, c["dim"], c["layers"], c["heads"], c["kv_heads"], c["ff"], seq)
    opt = optim.AdamW(model.parameters(), 3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    schedule = CosineAnnealingLR(opt, 500, eta_min=3e-4, warmup_steps=20)
    next_batch = _cycle(batches)

    def loss_of():
        tokens, targets = next_batch()
        return F.cross_entropy(F.reshape(model(tokens), (-1, vocab)), targets)
    return _then(_step_with_clip(model.parameters(), opt, loss_of, 1.0), schedule.step)


# ---------------------------------------------------------------------------------------
# 3. A conv net trained by Muon (Jordan et al.): conv, batch norm and GELU layers, max
#    pooling, on the textures of tests/sixteenth_models.py. Every conv filter past the
#    stem is updated by Muon: a Nesterov momentum buffer, flattened to (out, in k k),
#    orthogonalised by five iterations of the quintic Newton-Schulz map X <- a X + (b A +
#    c A A) X with A = X X^T, scaled by sqrt(max(1, rows / cols)), the filter decayed and
#    moved in place; the stem, the batch norms and the head by AdamW. The two rates decay
#    linearly together. Four batches cycle.
def _newton_schulz(g, steps=5):
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = g.shape[0] > g.shape[1]
    x = F.transpose(g, (1, 0)) if tall else g
    x = x * (1.0 / (F.sqrt(F.sum(x * x)) + 1e-7))
    for _ in range(steps):
        gram = F.matmul(x, x, transpose_b=True)
        x = a * x + F.matmul(b * gram + c * F.matmul(gram, gram), x)
    return F.transpose(x, (1, 0)) if tall else x


class Muon:
    """Muon for matrices (conv filters flattened): momentum, Newton-Schulz, in place."""

    def __init__(self, params, lr, momentum=0.95, weight_decay=0.0):
        self.params, self.lr, self.momentum, self.weight_decay = params, lr, momentum, weight_decay
        self.buffers = [F.zeros(p.shape) for p in params]

    def step(self):
        mu = self.momentum
        for i, p in enumerate(self.params):
            buf = mu * self.buffers[i] + p.grad
            self.buffers[i] = buf
            g = F.reshape(p.grad + mu * buf, (p.shape[0], -1))
            scale = math.sqrt(max(1.0, g.shape[0] / g.shape[1]))
            update = F.reshape(_newton_schulz(g), p.shape)
            p *= 1.0 - self.lr * self.weight_decay
            p -= (self.lr * scale) * update

    def clear_grad(self):
        for p in self.params:
            p.grad = None


class MuonNet(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        widths = [width, 2 * width, 4 * width]
        self.stem = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(width)
        layers = []
        cin = width
        for w in widths:
            layers += [nn.Conv2d(cin, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.GELU(),
                       nn.Conv2d(w, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.GELU(),
                       nn.MaxPool2d(2)]
            cin = w
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes, bias=False)

    def forward(self, x):
        h = self.body(F.gelu(self.stem_bn(self.stem(x))))
        return self.head(F.max(h, axis=(2, 3))) * 0.2


def _muon(c):
    rng = np.random.default_rng(805)
    batches = [_textures(rng, c["batch"], c["size"]) for _ in range(4)]
    model = MuonNet(c["width"], 10)
    filters = [m.weight for m in model.body.modules() if isinstance(m, nn.Conv2d)]
    chosen = {id(p) for p in filters}
    rest = [p for p in model.parameters() if id(p) not in chosen]
    muon = Muon(filters, 0.05, weight_decay=1e-4)
    adamw = optim.AdamW(rest, 2e-3, betas=(0.9, 0.95), weight_decay=0.0)
    total = 400

    def decay(step):
        return max(0.05, 1.0 - step / total)
    schedule = LambdaLR(adamw, decay)
    gm = GradManager().attach(model.parameters())
    next_batch = _cycle(batches)
    count = {"steps": 0}

    def step():
        x, labels = next_batch()
        with gm:
            loss = F.cross_entropy(model(x), labels, label_smoothing=0.2)
            gm.backward(loss)
        muon.step()
        adamw.step()
        muon.clear_grad()
        adamw.clear_grad()
        count["steps"] += 1
        muon.lr = 0.05 * decay(count["steps"])
        schedule.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 4. N-BEATS (Oreshkin et al.), the interpretable configuration plus a generic stack, on
#    positive series of a level, a trend, two seasonalities and noise: a trend stack and a
#    seasonality stack, each one block (four ReLU layers, then expansion coefficients)
#    applied three times (the paper's weights shared within a stack), their backcasts and
#    forecasts the coefficients times a fixed polynomial or Fourier basis over the whole
#    window; then two generic blocks with learned bases. Each block's backcast subtracted
#    from the residual the next block reads, its forecast added to the running forecast.
#    The history divided by its mean level; MASE (the error scaled by the history's mean
#    absolute difference). Adam, MultiStepLR. Four batches cycle.
class NBeatsBlock(nn.Module):
    def __init__(self, lookback, hidden, theta, back_basis=None, fore_basis=None,
                 horizon=None):
        super().__init__()
        self.fc = mlp([lookback, hidden, hidden, hidden, hidden])
        self.theta_b = nn.Linear(hidden, theta, bias=False)
        self.theta_f = nn.Linear(hidden, theta, bias=False)
        self.back_basis, self.fore_basis = back_basis, fore_basis
        if back_basis is None:
            self.back, self.fore = nn.Linear(theta, lookback), nn.Linear(theta, horizon)

    def forward(self, x):
        h = F.relu(self.fc(x))
        tb, tf = self.theta_b(h), self.theta_f(h)
        if self.back_basis is None:
            return self.back(tb), self.fore(tf)
        return F.matmul(tb, self.back_basis), F.matmul(tf, self.fore_basis)


def _bases(lookback, horizon, degree, harmonics):
    """(trend back, trend fore, seasonality back, seasonality fore): rows basis functions
    over the window's positions (history then horizon)."""
    t = np.arange(lookback + horizon) / (lookback + horizon)
    trend = np.stack([t ** p for p in range(degree + 1)])
    period = np.arange(lookback + horizon) / horizon
    waves = [np.ones_like(t)]
    for k in range(1, harmonics + 1):
        waves += [np.cos(2 * np.pi * k * period / 2), np.sin(2 * np.pi * k * period / 2)]
    season = np.stack(waves)
    return (_tensor(trend[:, :lookback]), _tensor(trend[:, lookback:]),
            _tensor(season[:, :lookback]), _tensor(season[:, lookback:]))


class NBeats(nn.Module):
    def __init__(self, lookback, horizon, hidden, degree=3, harmonics=None, generic=2):
        super().__init__()
        harmonics = harmonics or horizon // 2
        tb, tf, sb, sf = _bases(lookback, horizon, degree, harmonics)
        self.trend = NBeatsBlock(lookback, hidden, degree + 1, tb, tf)
        self.season = NBeatsBlock(lookback, hidden, 2 * harmonics + 1, sb, sf)
        self.generic = nn.ModuleList([NBeatsBlock(lookback, hidden, 32, horizon=horizon)
                                      for _ in range(generic)])

    def forward(self, x):
        forecast = 0
        for block in [self.trend] * 3 + [self.season] * 3 + list(self.generic):
            back, fore = block(x)
            x = x - back
            forecast = forecast + fore
        return forecast


def _seasonal_series(rng, n, lookback, horizon):
    t = np.arange(lookback + horizon)[None]
    level = rng.uniform(20, 100, (n, 1))
    slope = rng.normal(0, 0.15, (n, 1))
    out = level + slope * t
    for period in (rng.integers(6, 14, (n, 1)), rng.integers(20, 40, (n, 1))):
        out = out + rng.uniform(2, 10, (n, 1)) * np.sin(2 * np.pi * t / period
                                                         + rng.uniform(0, 2 * np.pi, (n, 1)))
    out = out + rng.normal(0, 1.0, out.shape)
    history, future = out[:, :lookback], out[:, lookback:]
    mean = history.mean(axis=1, keepdims=True)
    scale = np.abs(np.diff(history, axis=1)).mean(axis=1, keepdims=True)
    return _tensor(history / mean), _tensor(future / mean), _tensor(scale / mean)


def _nbeats(c):
    rng = np.random.default_rng(807)
    lookback, horizon = c["lookback"], c["horizon"]
    batches = [_seasonal_series(rng, c["batch"], lookback, horizon) for _ in range(4)]
    model = NBeats(lookback, horizon, c["hidden"])
    opt = optim.Adam(model.parameters(), 1e-3)
    schedule = MultiStepLR(opt, [200, 400], gamma=0.3)
    next_batch = _cycle(batches)

    def loss_of():
        history, future, scale = next_batch()
        return F.mean(F.abs(model(history) - future) / scale)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 5. A spatial transformer network (Jaderberg et al.; the PyTorch tutorial's): glyphs of
#    ten classes rotated, scaled and moved at random in a larger canvas; a localisation
#    net (conv, max pool, ReLU twice, two linear layers started at the identity
#    transform) gives each image an affine matrix; the sampling grid (affine_grid,
#    align_corners False) and bilinear sampling with zero padding written out: the image
#    padded by one pixel and flattened, the four corners' indices from the floor of the
#    grid, clipped into the padding, read by four F.gather, mixed by weights that carry the
#    gradient back to the matrix; then the tutorial's classifier (two convs, Dropout2d,
#    dropout, log_softmax and NLL). Plain SGD. Four batches cycle.
class SpatialTransformer(nn.Module):
    def __init__(self, size, classes):
        super().__init__()
        self.size = size
        self.loc = nn.Sequential(nn.Conv2d(1, 8, 7), nn.MaxPool2d(2), nn.ReLU(),
                                 nn.Conv2d(8, 10, 5), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten())
        side = ((size - 6) // 2 - 4) // 2
        self.fc_loc = nn.Sequential(nn.Linear(10 * side * side, 32), nn.ReLU(), nn.Linear(32, 6))
        self.fc_loc[2].weight[...] = 0
        self.fc_loc[2].bias[...] = _tensor([1, 0, 0, 0, 1, 0])
        self.conv1, self.conv2 = nn.Conv2d(1, 10, 5), nn.Conv2d(10, 20, 5)
        self.conv2_drop = nn.Dropout2d(0.3)
        side = ((size - 4) // 2 - 4) // 2
        self.fc1, self.fc2 = nn.Linear(20 * side * side, 50), nn.Linear(50, classes)
        coords = (2 * np.arange(size) + 1) / size - 1               # pixel centres in [-1, 1]
        gy, gx = np.meshgrid(coords, coords, indexing="ij")
        base = np.stack([gx.ravel(), gy.ravel(), np.ones(size * size)])         # (3, s s)
        self.base = _tensor(base)

    def sample(self, x, theta):
        b, s = x.shape[0], self.size
        grid = F.matmul(F.reshape(theta, (b, 2, 3)), self.base)                # (b, 2, s s)
        gx, gy = F.split(grid, 2, axis=1)
        ix, iy = ((gx + 1) * s - 1) * 0.5, ((gy + 1) * s - 1) * 0.5              # pixels
        x0, y0 = F.floor(ix).detach(), F.floor(iy).detach()
        wx1, wy1 = ix - x0, iy - y0
        flat = F.reshape(F.pad(x, (1, 1, 1, 1)), (b, -1))                      # (b, (s+2)^2)
        out = 0
        for dy, wy in ((0, 1 - wy1), (1, wy1)):
            for dx, wx in ((0, 1 - wx1), (1, wx1)):
                cx = F.clip(x0 + dx, -1, s) + 1
                cy = F.clip(y0 + dy, -1, s) + 1
                index = F.reshape(cy * (s + 2) + cx, (b, -1)).astype("int32")
                out = out + F.gather(flat, 1, index) * F.reshape(wx * wy, (b, -1))
        return F.reshape(out, (b, 1, s, s))

    def forward(self, x):
        x = self.sample(x, self.fc_loc(self.loc(x)))
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.dropout(F.relu(self.fc1(F.flatten(x, 1))), 0.3, training=self.training)
        return F.log_softmax(self.fc2(x), axis=1)


def _distorted_glyphs(rng, n, size, glyphs):
    side = glyphs.shape[1]
    labels = rng.integers(0, len(glyphs), n)
    images = np.zeros((n, 1, size, size), np.float32)
    centre = (size - 1) / 2
    yy, xx = np.mgrid[0:size, 0:size] - centre
    for s, k in enumerate(labels):
        angle, scale = rng.uniform(-0.8, 0.8), rng.uniform(0.8, 1.5)
        shift = rng.uniform(-size / 6, size / 6, 2)
        cos, sin = math.cos(angle) / scale, math.sin(angle) / scale
        u = cos * (xx - shift[0]) + sin * (yy - shift[1]) + side / 2
        v = -sin * (xx - shift[0]) + cos * (yy - shift[1]) + side / 2
        inside = (u >= 0) & (u < side) & (v >= 0) & (v < side)
        ui, vi = np.clip(u.astype(int), 0, side - 1), np.clip(v.astype(int), 0, side - 1)
        images[s, 0] = np.where(inside, glyphs[k][vi, ui], 0.0)
    images += 0.1 * rng.standard_normal(images.shape).astype(np.float32)
    return imp.Tensor(images), _tensor(labels, np.int32)


def _stn(c):
    rng = np.random.default_rng(809)
    side = c["size"] // 2
    glyphs = (rng.uniform(0, 1, (10, side // 2, side // 2)) < 0.5).astype(np.float32)
    glyphs = glyphs.repeat(2, axis=1).repeat(2, axis=2)
    batches = [_distorted_glyphs(rng, c["batch"], c["size"], glyphs) for _ in range(4)]
    model = SpatialTransformer(c["size"], 10)
    opt = optim.SGD(model.parameters(), 0.01)
    next_batch = _cycle(batches)

    def loss_of():
        images, labels = next_batch()
        return F.nll_loss(model(images), labels)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 6. Soft actor-critic (Haarnoja et al.) on `envs` pendulums swung up in parallel (numpy,
#    Gymnasium's Pendulum-v1 dynamics and reward): each training step the actor's
#    tanh-Gaussian actions for every pendulum are sampled (imp.random) and read back, the
#    pendulums step and the transitions go into a replay buffer; then a minibatch drawn
#    from it trains the twin critics against the minimum of two Polyak-averaged target
#    critics (the next action and its log-probability from the actor, outside any
#    recording), the actor through the critics (which its GradManager does not attach)
#    with the entropy bonus, and the temperature toward a target entropy; three Adam
#    optimizers, three backward passes; the targets moved toward the critics in place.
class TanhGaussianActor(nn.Module):
    def __init__(self, obs, act, hidden):
        super().__init__()
        self.body = mlp([obs, hidden, hidden])
        self.mean, self.log_std = nn.Linear(hidden, act), nn.Linear(hidden, act)

    def forward(self, obs):
        h = F.relu(self.body(obs))
        mean, log_std = self.mean(h), F.clip(self.log_std(h), -5.0, 2.0)
        eps = imp.random.normal(size=mean.shape)
        u = mean + F.exp(log_std) * eps
        log_prob = F.sum(-0.5 * eps * eps - log_std - 0.5 * math.log(2 * math.pi)
                         - 2 * (math.log(2) - u - F.softplus(-2 * u)), axis=1)
        return 2.0 * F.tanh(u), log_prob - math.log(2.0)


class TwinCritic(nn.Module):
    def __init__(self, obs, act, hidden):
        super().__init__()
        self.q1, self.q2 = mlp([obs + act, hidden, hidden, 1]), mlp([obs + act, hidden, hidden, 1])

    def forward(self, obs, action):
        x = F.concat([obs, action], axis=1)
        return F.squeeze(self.q1(x), 1), F.squeeze(self.q2(x), 1)


class Pendulums:
    """Pendulum-v1, vectorised: angle, angular velocity; torque in [-2, 2]."""

    def __init__(self, rng, n):
        self.rng = rng
        self.theta = rng.uniform(-np.pi, np.pi, n)
        self.omega = rng.uniform(-1, 1, n)
        self.t = 0

    def observe(self):
        return np.stack([np.cos(self.theta), np.sin(self.theta), self.omega], axis=1)

    def step(self, torque):
        torque = np.clip(torque, -2, 2)
        angle = (self.theta + np.pi) % (2 * np.pi) - np.pi
        reward = -(angle ** 2 + 0.1 * self.omega ** 2 + 0.001 * torque ** 2)
        self.omega = np.clip(self.omega + (15.0 * np.sin(self.theta) + 3.0 * torque) * 0.05,
                             -8, 8)
        self.theta = self.theta + self.omega * 0.05
        self.t += 1
        if self.t % 200 == 0:
            n = len(self.theta)
            self.theta = self.rng.uniform(-np.pi, np.pi, n)
            self.omega = self.rng.uniform(-1, 1, n)
        return reward


def _sac(c):
    rng = np.random.default_rng(811)
    hidden, batch, gamma, tau = c["hidden"], c["batch"], 0.99, 0.005
    envs = Pendulums(rng, c["envs"])
    actor = TanhGaussianActor(3, 1, hidden)
    critic, target = TwinCritic(3, 1, hidden), TwinCritic(3, 1, hidden)
    for p, q in zip(target.parameters(), critic.parameters()):
        p[...] = q
    log_alpha = imp.Parameter(np.zeros(1, np.float32))
    critic_opt = optim.Adam(critic.parameters(), 3e-4)
    actor_opt = optim.Adam(actor.parameters(), 3e-4)
    alpha_opt = optim.Adam([log_alpha], 3e-4)
    critic_gm = GradManager().attach(critic.parameters())
    actor_gm = GradManager().attach(actor.parameters())
    alpha_gm = GradManager().attach([log_alpha])

    capacity = c["capacity"]
    buffer = {"obs": np.zeros((capacity, 3), np.float32),
              "act": np.zeros((capacity, 1), np.float32),
              "rew": np.zeros(capacity, np.float32),
              "next": np.zeros((capacity, 3), np.float32)}
    filled = {"n": 0}

    def push(obs, act, rew, nxt):
        n = len(obs)
        at = (filled["n"] + np.arange(n)) % capacity
        buffer["obs"][at], buffer["act"][at], buffer["rew"][at], buffer["next"][at] = (
            obs, act, rew, nxt)
        filled["n"] += n

    while filled["n"] < 4 * batch:                   # a warm-up of random torques
        obs = envs.observe()
        act = rng.uniform(-2, 2, (len(obs), 1))
        push(obs, act, envs.step(act[:, 0]), envs.observe())

    def step():
        obs = envs.observe()
        act, _ = actor(_tensor(obs))
        act = act.numpy()
        push(obs, act, envs.step(act[:, 0]), envs.observe())
        pick = rng.integers(0, min(filled["n"], capacity), batch)
        o, a, r, o2 = (_tensor(buffer[k][pick]) for k in ("obs", "act", "rew", "next"))
        alpha = F.exp(log_alpha).detach()

        next_act, next_logp = actor(o2)
        t1, t2 = target(o2, next_act)
        y = (r + gamma * (F.minimum(t1, t2) - alpha * next_logp)).detach()
        with critic_gm:
            q1, q2 = critic(o, a)
            critic_loss = F.mean((q1 - y) ** 2) + F.mean((q2 - y) ** 2)
            critic_gm.backward(critic_loss)
        critic_opt.step()
        critic_opt.clear_grad()

        with actor_gm:
            new_act, logp = actor(o)
            q1, q2 = critic(o, new_act)
            actor_loss = F.mean(alpha * logp - F.minimum(q1, q2))
            actor_gm.backward(actor_loss)
        actor_opt.step()
        actor_opt.clear_grad()

        with alpha_gm:
            alpha_loss = -F.mean(log_alpha * (logp.detach() - 1.0))
            alpha_gm.backward(alpha_loss)
        alpha_opt.step()
        alpha_opt.clear_grad()

        for p, q in zip(target.parameters(), critic.parameters()):
            p *= 1 - tau
            p += tau * q
        return critic_loss + actor_loss + alpha_loss
    return step


# ---------------------------------------------------------------------------------------
# 7. A DETR-like detector (Carion et al.) of coloured rectangles: a conv backbone to an
#    eighth of the resolution, a 1x1 projection, learned positional embeddings, a
#    post-norm transformer encoder (nn.TransformerEncoderLayer); a decoder of `queries`
#    learned object queries (self-attention, cross-attention to the memory, a
#    feed-forward; nn.MultiheadAttention), class and box heads shared by every decoder
#    layer. Each layer's predictions (the auxiliary losses) are matched to the image's
#    objects by the Hungarian algorithm (numpy) on a cost read back (class probability,
#    L1 and GIoU of the boxes); the matched queries gathered by index_select for the L1
#    and GIoU losses, the rest labelled "no object" in a cross entropy that weighs that
#    class 0.1. AdamW for the transformer and heads, a tenth of its rate for the
#    backbone, the gradient clipped; StepLR. Four batches cycle, each image with 1 to
#    `objects` rectangles.
def _hungarian(cost):
    """The column assigned to each row of `cost` (rows <= columns) by the Hungarian
    algorithm (shortest augmenting paths with potentials), least total cost."""
    n, m = cost.shape
    u, v = np.zeros(n + 1), np.zeros(m + 1)
    owner, way = np.zeros(m + 1, int), np.zeros(m + 1, int)
    for i in range(1, n + 1):
        owner[0], j0 = i, 0
        slack, used = np.full(m + 1, np.inf), np.zeros(m + 1, bool)
        while owner[j0]:
            used[j0] = True
            i0 = owner[j0]
            reduced = cost[i0 - 1] - u[i0] - v[1:]
            better = ~used[1:] & (reduced < slack[1:])
            slack[1:][better] = reduced[better]
            way[1:][better] = j0
            free = np.flatnonzero(~used[1:]) + 1
            j1 = free[np.argmin(slack[free])]
            delta = slack[j1]
            u[owner[used]] += delta
            v[used] -= delta
            slack[~used] -= delta
            j0 = j1
        while j0:
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    column = np.zeros(n, int)
    for j in range(1, m + 1):
        if owner[j]:
            column[owner[j] - 1] = j - 1
    return column


def _corners(box):
    cx, cy, w, h = box[..., 0], box[..., 1], box[..., 2], box[..., 3]
    return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2


def _giou_np(a, b):
    """GIoU of every box of a (n, 4) with every box of b (m, 4), (cx, cy, w, h)."""
    ax0, ay0, ax1, ay1 = (t[:, None] for t in _corners(a))
    bx0, by0, bx1, by1 = (t[None] for t in _corners(b))
    inter = (np.clip(np.minimum(ax1, bx1) - np.maximum(ax0, bx0), 0, None)
             * np.clip(np.minimum(ay1, by1) - np.maximum(ay0, by0), 0, None))
    union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
    hull = (np.maximum(ax1, bx1) - np.minimum(ax0, bx0)) * (np.maximum(ay1, by1)
                                                              - np.minimum(ay0, by0))
    return inter / union - (hull - union) / hull


def _giou(a, b):
    """GIoU of matched pairs of boxes, tensors (k, 4)."""
    ax0, ay0, ax1, ay1 = F.split(F.concat([a[:, :2] - a[:, 2:] / 2, a[:, :2] + a[:, 2:] / 2],
                                          axis=1), 4, axis=1)
    bx0, by0, bx1, by1 = F.split(F.concat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2],
                                          axis=1), 4, axis=1)
    inter = (F.relu(F.minimum(ax1, bx1) - F.maximum(ax0, bx0))
             * F.relu(F.minimum(ay1, by1) - F.maximum(ay0, by0)))
    union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
    hull = (F.maximum(ax1, bx1) - F.minimum(ax0, bx0)) * (F.maximum(ay1, by1)
                                                          - F.minimum(ay0, by0))
    return inter / union - (hull - union) / hull


class DecoderLayer(nn.Module):
    def __init__(self, dim, heads, ff):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ff = mlp([dim, ff, dim])
        self.n1, self.n2, self.n3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, tgt, query_pos, memory, pos):
        q = tgt + query_pos
        tgt = self.n1(tgt + self.self_attn(q, q, tgt, need_weights=False)[0])
        tgt = self.n2(tgt + self.cross_attn(tgt + query_pos, memory + pos, memory,
                                            need_weights=False)[0])
        return self.n3(tgt + self.ff(tgt))


class Detr(nn.Module):
    def __init__(self, size, width, dim, heads, enc_layers, dec_layers, queries, classes):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, width, 3, 2, 1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, 2, 1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.Conv2d(2 * width, 4 * width, 3, 2, 1), nn.BatchNorm2d(4 * width), nn.ReLU(),
            nn.Conv2d(4 * width, 4 * width, 3, 1, 1), nn.BatchNorm2d(4 * width), nn.ReLU())
        self.proj = nn.Conv2d(4 * width, dim, 1)
        tokens = (size // 8) ** 2
        self.pos = imp.Parameter(0.1 * np.random.default_rng(0).standard_normal(
            (1, tokens, dim)).astype(np.float32))
        self.encoder = nn.ModuleList([nn.TransformerEncoderLayer(
            dim, heads, 2 * dim, dropout=0.0, batch_first=True) for _ in range(enc_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(dim, heads, 2 * dim)
                                      for _ in range(dec_layers)])
        self.query_pos = nn.Embedding(queries, dim)
        self.cls = nn.Linear(dim, classes + 1)
        self.box = mlp([dim, dim, dim, 4])

    def forward(self, images):
        b = images.shape[0]
        f = self.proj(self.backbone(images))
        memory = F.transpose(F.reshape(f, (b, f.shape[1], -1)), (0, 2, 1))   # (b, tokens, d)
        for layer in self.encoder:
            memory = layer(memory + self.pos)
        query_pos = F.broadcast_to(F.expand_dims(self.query_pos.weight, 0),
                                   (b,) + self.query_pos.weight.shape)
        tgt = F.zeros(query_pos.shape)
        outs = []
        for layer in self.decoder:
            tgt = layer(tgt, query_pos, memory, self.pos)
            outs.append((self.cls(tgt), F.sigmoid(self.box(tgt))))
        return outs


def _rectangles(rng, n, size, most, classes):
    colours = np.eye(3)[:classes] * 0.8 + 0.1
    images = 0.15 * rng.standard_normal((n, 3, size, size))
    targets = []
    for s in range(n):
        objects = []
        for _ in range(rng.integers(1, most + 1)):
            k = rng.integers(classes)
            w, h = rng.uniform(0.15, 0.5, 2)
            cx, cy = rng.uniform(w / 2, 1 - w / 2), rng.uniform(h / 2, 1 - h / 2)
            x0, x1 = int((cx - w / 2) * size), int(math.ceil((cx + w / 2) * size))
            y0, y1 = int((cy - h / 2) * size), int(math.ceil((cy + h / 2) * size))
            images[s, :, y0:y1, x0:x1] = colours[k][:, None, None]
            objects.append((k, cx, cy, w, h))
        targets.append(np.array(objects, np.float32))
    return _tensor(images), targets


def _detr_loss(outputs, targets, classes, queries):
    b = len(targets)
    boxes = np.concatenate([t[:, 1:] for t in targets])
    loss = 0
    weight = _tensor([1.0] * classes + [0.1])
    for logits, pred in outputs:
        probs = F.softmax(logits, axis=-1).numpy()
        pred_np = pred.numpy()
        picked, labels = [], np.full(b * queries, classes, np.int32)
        for s, t in enumerate(targets):
            cost = (-probs[s][:, t[:, 0].astype(int)].T
                    + 5 * np.abs(t[:, None, 1:] - pred_np[s][None]).sum(axis=2)
                    - 2 * _giou_np(t[:, 1:], pred_np[s]))
            column = _hungarian(cost) + s * queries
            picked.append(column)
            labels[column] = t[:, 0]
        index = _tensor(np.concatenate(picked), np.int32)
        matched = F.index_select(F.reshape(pred, (-1, 4)), 0, index)
        target = _tensor(boxes)
        count = len(boxes)
        loss = (loss + F.cross_entropy(F.reshape(logits, (-1, classes + 1)),
                                       _tensor(labels, np.int32), weight=weight)
                + 5 * F.sum(F.abs(matched - target)) / count
                + 2 * F.sum(1 - _giou(matched, target)) / count)
    return loss


def _detr(c):
    rng = np.random.default_rng(813)
    classes, queries = 3, c["queries"]
    batches = [_rectangles(rng, c["batch"], c["size"], c["objects"], classes) for _ in range(4)]
    model = Detr(c["size"], c["width"], c["dim"], c["heads"], c["enc_layers"], c["dec_layers"],
                 queries, classes)
    backbone = model.backbone.parameters()
    chosen = {id(p) for p in backbone}
    rest = [p for p in model.parameters() if id(p) not in chosen]
    opt = optim.AdamW(rest, 1e-3, weight_decay=1e-4)
    backbone_opt = optim.AdamW(backbone, 1e-4, weight_decay=1e-4)
    schedules = [StepLR(opt, 200, gamma=0.1), StepLR(backbone_opt, 200, gamma=0.1)]
    params = model.parameters()
    gm = GradManager().attach(params)
    next_batch = _cycle(batches)

    def step():
        images, targets = next_batch()
        with gm:
            loss = _detr_loss(model(images), targets, classes, queries)
            gm.backward(loss)
        optim.clip_grad_norm(params, 0.1)
        for o in (opt, backbone_opt):
            o.step()
            o.clear_grad()
        for s in schedules:
            s.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 8. Barlow Twins (Zbontar et al.): two views of each image drawn each step by imp.random
#    (a horizontal flip per image, a brightness and contrast per image and channel, noise,
#    a random erased square by a mask), one ResNet encoder, a projector of three linear
#    layers (batch norm and ReLU between) to a wide embedding; the loss from the (D, D)
#    cross-correlation of the two views' batch-normalised embeddings: its diagonal pulled
#    to one, the rest to zero (weight 1 / D). A hand-written LARS (SGD with momentum, each
#    matrix's and filter's step scaled by the trust ratio |w| / |g + weight decay w|,
#    biases and batch norms left alone) under a linear warm-up and cosine decay.
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b1, self.b2 = nn.BatchNorm2d(cout), nn.BatchNorm2d(cout)
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                    nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else None)

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.short is None else self.short(x)))


class BarlowTwins(nn.Module):
    def __init__(self, width, embed):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            BasicBlock(width, width, 1), BasicBlock(width, 2 * width, 2),
            BasicBlock(2 * width, 4 * width, 2))
        self.projector = nn.Sequential(
            nn.Linear(4 * width, embed, bias=False), nn.BatchNorm1d(embed), nn.ReLU(),
            nn.Linear(embed, embed, bias=False), nn.BatchNorm1d(embed), nn.ReLU(),
            nn.Linear(embed, embed, bias=False))
        self.eye = _tensor(np.eye(embed))

    def embed(self, x):
        return self.projector(F.mean(self.encoder(x), axis=(2, 3)))

    def forward(self, v1, v2):
        z1, z2 = self.embed(v1), self.embed(v2)
        n, d = z1.shape

        def standardise(z):
            return (z - F.mean(z, axis=0, keepdims=True)) * F.rsqrt(
                F.var(z, axis=0, keepdims=True) + 1e-5)
        corr = F.matmul(standardise(z1), standardise(z2), transpose_a=True) * (1.0 / n)
        diagonal = F.sum(corr * self.eye, axis=1)
        on = F.sum((diagonal - 1) ** 2)
        off = F.sum(corr * corr) - F.sum(diagonal * diagonal)
        return on + off / d


def _augment(x):
    b, ch, s, _ = x.shape
    flip = imp.random.uniform(size=(b, 1, 1, 1)) < 0.5
    x = F.where(flip, F.flip(x, 3), x)
    x = x * imp.random.uniform(0.6, 1.4, size=(b, ch, 1, 1)) + imp.random.normal(
        0.0, 0.2, size=(b, ch, 1, 1))
    x = x + imp.random.normal(0.0, 0.1, size=x.shape)
    side = s // 3
    corner = imp.random.uniform(0, s - side, size=(b, 2, 1, 1))
    rows = F.reshape(F.arange(s, dtype="float32"), (1, 1, s, 1))
    cols = F.reshape(F.arange(s, dtype="float32"), (1, 1, 1, s))
    top, left = F.split(corner, 2, axis=1)
    erase = (rows >= top) & (rows < top + side) & (cols >= left) & (cols < left + side)
    return F.where(erase, F.zeros_like(x), x)


class LARS:
    """SGD with momentum and LARS trust ratios for tensors of two or more dimensions."""

    def __init__(self, params, lr, momentum=0.9, weight_decay=1e-6, eta=0.02):
        self.params, self.lr, self.momentum = params, lr, momentum
        self.weight_decay, self.eta = weight_decay, eta
        self.buffers = [F.zeros(p.shape) for p in params]

    def step(self):
        for i, p in enumerate(self.params):
            g = p.grad
            if p.ndim > 1:
                g = g + self.weight_decay * p
                pn, gn = F.sqrt(F.sum(p * p)), F.sqrt(F.sum(g * g))
                usable = (pn > 0) & (gn > 0)
                trust = F.where(usable, self.eta * pn / F.where(usable, gn, F.ones_like(gn)),
                                F.ones_like(pn))
                g = g * trust
            self.buffers[i] = self.momentum * self.buffers[i] + g
            p -= self.lr * self.buffers[i]

    def clear_grad(self):
        for p in self.params:
            p.grad = None


def _barlow(c):
    rng = np.random.default_rng(815)
    batches = [_textures(rng, c["batch"], c["size"])[0] for _ in range(4)]
    model = BarlowTwins(c["width"], c["embed"])
    params = model.parameters()
    opt = LARS(params, 0.2, weight_decay=1.5e-6)
    gm = GradManager().attach(params)
    next_batch = _cycle(batches)
    warmup, total, count = 10, 500, {"steps": 0}

    def step():
        x = next_batch()
        with gm:
            loss = model(_augment(x), _augment(x))
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        count["steps"] += 1
        s = count["steps"]
        opt.lr = 0.2 * (s / warmup if s < warmup
                        else 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / total))))
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 9. An R(2+1)D video classifier (Tran et al.) of the direction of a textured disc's
#    motion (eight classes): every t x d x d convolution factored into a d x d Conv2d over
#    the frames (the clip reshaped to (batch time, channels, h, w)), batch norm and ReLU,
#    then a t-tap Conv1d over each pixel's time series (transposed to (batch h w, mid,
#    time)), the mid width the paper's parameter-matching one; batch norm over the 5-D
#    clip by a reshape to 4-D; residual blocks strided in space and time with 1x1x1
#    shortcuts (a strided slice, then a Conv2d), global average pooling. Nesterov SGD with
#    weight decay, MultiStepLR after a warm-up. Four batches cycle.
class Conv2Plus1D(nn.Module):
    def __init__(self, cin, cout, k=3, t=3, stride=1, tstride=1):
        super().__init__()
        mid = (t * k * k * cin * cout) // (k * k * cin + t * cout)
        self.spatial = nn.Conv2d(cin, mid, k, stride, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(mid)
        self.temporal = nn.Conv1d(mid, cout, t, tstride, t // 2, bias=False)

    def forward(self, x):                                             # (b, c, t, h, w)
        b, c, t, h, w = x.shape
        y = F.reshape(F.transpose(x, (0, 2, 1, 3, 4)), (b * t, c, h, w))
        y = F.relu(self.bn(self.spatial(y)))
        _, m, h, w = y.shape
        y = F.transpose(F.reshape(y, (b, t, m, h, w)), (0, 3, 4, 2, 1))   # (b, h, w, m, t)
        y = self.temporal(F.reshape(y, (b * h * w, m, t)))
        cout, t = y.shape[1], y.shape[2]
        return F.transpose(F.reshape(y, (b, h, w, cout, t)), (0, 3, 4, 1, 2))


class BatchNorm3d(nn.Module):
    """Batch norm over (b, c, t, h, w), as BatchNorm2d over (b, c, t h, w)."""

    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        b, c, t, h, w = x.shape
        return F.reshape(self.bn(F.reshape(x, (b, c, t * h, w))), x.shape)


class R2Plus1DBlock(nn.Module):
    def __init__(self, cin, cout, stride, tstride):
        super().__init__()
        self.stride, self.tstride = stride, tstride
        self.conv1 = Conv2Plus1D(cin, cout, stride=stride, tstride=tstride)
        self.conv2 = Conv2Plus1D(cout, cout)
        self.bn1, self.bn2 = BatchNorm3d(cout), BatchNorm3d(cout)
        self.short = (nn.Conv2d(cin, cout, 1, bias=False)
                      if stride != 1 or tstride != 1 or cin != cout else None)
        self.short_bn = BatchNorm3d(cout) if self.short is not None else None

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        if self.short is not None:
            x = x[:, :, ::self.tstride, ::self.stride, ::self.stride]
            b, c, t, h, w = x.shape
            x = F.reshape(self.short(F.reshape(x, (b, c, t * h, w))), (b, -1, t, h, w))
            x = self.short_bn(x)
        return F.relu(x + y)


class R2Plus1D(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem = Conv2Plus1D(3, width, k=5, t=3, stride=2)
        self.stem_bn = BatchNorm3d(width)
        self.blocks = nn.Sequential(R2Plus1DBlock(width, width, 1, 1),
                                    R2Plus1DBlock(width, 2 * width, 2, 2),
                                    R2Plus1DBlock(2 * width, 4 * width, 2, 2))
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x):
        h = self.blocks(F.relu(self.stem_bn(self.stem(x))))
        return self.head(F.mean(h, axis=(2, 3, 4)))


def _moving_discs(rng, n, frames, size, classes=8):
    labels = rng.integers(0, classes, n)
    yy, xx = np.mgrid[0:size, 0:size]
    video = 0.2 * rng.standard_normal((n, 3, frames, size, size))
    for s, k in enumerate(labels):
        angle = 2 * np.pi * k / classes
        speed = rng.uniform(0.8, 1.6) * size / 16
        radius = rng.uniform(size / 8, size / 5)
        colour = rng.uniform(0.5, 1.0, 3)
        start = rng.uniform(0.3, 0.7, 2) * size
        pattern = np.sin(xx * rng.uniform(0.5, 1.5)) * np.cos(yy * rng.uniform(0.5, 1.5))
        for t in range(frames):
            cy = start[0] + speed * np.sin(angle) * (t - frames / 2)
            cx = start[1] + speed * np.cos(angle) * (t - frames / 2)
            disc = ((yy - cy) ** 2 + (xx - cx) ** 2) < radius ** 2
            video[s, :, t] += colour[:, None, None] * disc * (0.7 + 0.3 * pattern)
    return _tensor(video), _tensor(labels, np.int32)


def _r2plus1d(c):
    rng = np.random.default_rng(817)
    batches = [_moving_discs(rng, c["batch"], c["frames"], c["size"]) for _ in range(4)]
    model = R2Plus1D(c["width"], 8)
    opt = optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=1e-4, nesterov=True)
    schedule = MultiStepLR(opt, [150, 300], gamma=0.1, warmup_steps=10)
    next_batch = _cycle(batches)

    def loss_of():
        x, labels = next_batch()
        return F.cross_entropy(model(x), labels)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 10. A ResNet-9 (the DAWNBench CIFAR net: a prep conv, three layers of conv, batch norm,
#     ReLU and max pooling, two of them with a residual pair, a max pool and a scaled
#     linear head) trained in mixed precision as torch.autocast and GradScaler do it: fp32
#     master weights, each conv and the head run in fp16 on weights cast every step (the
#     casts' backward passes bring the gradients back to fp32), batch norm in fp32; the
#     loss scaled by a dynamic scale before the backward pass; after it, the sum of every
#     gradient read back: not finite, the step is skipped and the scale halved; finite,
#     the gradients are unscaled and the optimizer steps, and after `growth` good steps in
#     a row the scale doubles. The scale starts at 2^16 (GradScaler's) at the bench's size
#     and at 2^19 at the tests', where the first two steps overflow and the third does not,
#     so that the tests' steps see both branches. SGD with Nesterov momentum and weight
#     decay under OneCycleLR. Four batches cycle.
class HalfConvBN(nn.Module):
    def __init__(self, cin, cout, pool=False):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.pool = pool

    def forward(self, x):                                               # fp16 in, fp16 out
        y = F.conv2d(x, self.conv.weight.astype("float16"), padding=1)
        if self.pool:
            y = F.max_pool2d(y, 2)
        return F.relu(self.bn(y.astype("float32"))).astype("float16")


class ResNet9(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        w = width
        self.prep = HalfConvBN(3, w)
        self.layer1 = HalfConvBN(w, 2 * w, pool=True)
        self.res1 = nn.Sequential(HalfConvBN(2 * w, 2 * w), HalfConvBN(2 * w, 2 * w))
        self.layer2 = HalfConvBN(2 * w, 4 * w, pool=True)
        self.layer3 = HalfConvBN(4 * w, 8 * w, pool=True)
        self.res3 = nn.Sequential(HalfConvBN(8 * w, 8 * w), HalfConvBN(8 * w, 8 * w))
        self.head = nn.Linear(8 * w, classes, bias=False)

    def forward(self, x):
        h = self.layer1(self.prep(x.astype("float16")))
        h = h + self.res1(h)
        h = self.layer3(self.layer2(h))
        h = h + self.res3(h)
        h = F.max(h, axis=(2, 3))
        logits = F.matmul(h, self.head.weight.astype("float16"), transpose_b=True)
        return logits.astype("float32") * 0.125


class GradScaler:
    """torch.cuda.amp.GradScaler's dynamic loss scale, the overflow found by a read-back."""

    def __init__(self, scale=2.0 ** 16, growth=2000):
        self.scale, self.growth, self.good = scale, growth, 0

    def step(self, params, opt):
        total = float(sum(F.sum(p.grad) for p in params))
        if not math.isfinite(total):
            self.scale, self.good = self.scale / 2, 0
            opt.clear_grad()
            return
        for p in params:
            p.grad = p.grad * (1.0 / self.scale)
        opt.step()
        opt.clear_grad()
        self.good += 1
        if self.good == self.growth:
            self.scale, self.good = self.scale * 2, 0


def _amp(c):
    rng = np.random.default_rng(819)
    batches = [_textures(rng, c["batch"], c["size"]) for _ in range(4)]
    model = ResNet9(c["width"], 10)
    params = model.parameters()
    opt = optim.SGD(params, 0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    schedule = OneCycleLR(opt, 0.2, total_steps=600)
    scaler = GradScaler(2.0 ** c["log2_scale"], c["growth"])
    gm = GradManager().attach(params)
    next_batch = _cycle(batches)

    def step():
        x, labels = next_batch()
        with gm:
            loss = F.cross_entropy(model(x), labels, label_smoothing=0.2)
            gm.backward(loss * scaler.scale)
        scaler.step(params, opt)
        schedule.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "pinn": dict(hidden=64, depth=5, interior=4096, edge=256),
    "llama": dict(vocab=512, dim=128, layers=4, heads=8, kv_heads=2, ff=344, seq=128, batch=8),
    "muon": dict(width=32, size=32, batch=32),
    "nbeats": dict(lookback=96, horizon=24, hidden=256, batch=512),
    "stn": dict(size=40, batch=128),
    "sac": dict(hidden=256, envs=16, capacity=20000, batch=1024),
    "detr": dict(size=64, width=16, dim=64, heads=4, enc_layers=2, dec_layers=3, queries=16,
                 objects=5, batch=16),
    "barlow": dict(width=16, size=24, embed=512, batch=64),
    "r2plus1d": dict(width=16, frames=8, size=32, batch=8),
    "amp": dict(width=16, size=32, log2_scale=16, growth=8, batch=32),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "pinn": dict(hidden=32, depth=3, interior=128, edge=32),
    "llama": dict(vocab=48, dim=32, layers=2, heads=4, kv_heads=2, ff=64, seq=16, batch=4),
    "muon": dict(width=4, size=8, batch=8),
    "nbeats": dict(lookback=24, horizon=8, hidden=32, batch=32),
    "stn": dict(size=28, batch=8),
    "sac": dict(hidden=32, envs=4, capacity=512, batch=64),
    "detr": dict(size=32, width=4, dim=16, heads=2, enc_layers=1, dec_layers=2, queries=6,
                 objects=3, batch=4),
    "barlow": dict(width=4, size=12, embed=32, batch=16),
    "r2plus1d": dict(width=4, frames=4, size=12, batch=2),
    "amp": dict(width=4, size=8, log2_scale=19, growth=2, batch=8),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps:
# none here (every model has its own data and step)
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "pinn": _pinn,
    "llama": _llama,
    "muon": _muon,
    "nbeats": _nbeats,
    "stn": _stn,
    "sac": _sac,
    "detr": _detr,
    "barlow": _barlow,
    "r2plus1d": _r2plus1d,
    "amp": _amp,
}


MODEL_SET = ModelSet(__name__, "tests/seventeenth_models.py", CONFIGS, BENCH_SIZES, BUILDERS,
                     STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
