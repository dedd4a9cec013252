"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout,sixth,seventh}_models.py, written in session 45 by a
helper that had not read the memory manager: a universal transformer (one weight-tied block
applied many times, a learned embedding per iteration), a neural cellular automaton (many
small conv update steps from a seed cell, stochastic fire masks, alive masking), a binary
Tree-LSTM over a fixed complete tree (children paired by reshapes and splits, level by
level), a Set Transformer (induced set attention blocks and attention pooling), a
PixelCNN-like stack of masked gated convs (a 16-way softmax per pixel), a diffusion U-Net
step (noise at a random time, a sinusoidal time embedding conditioning every residual block
by scale and shift, group norms, skip concatenations), a pointer network sorting its input
(LSTM encoder and decoder, additive attention over every input at every output step), a
modern Hopfield network (iterated retrieval from a large learned memory of patterns), an
HRNet-like segmenter (parallel resolutions exchanging at the end of every stage) and MoCo
(a momentum key encoder outside the recording, a large queue of negatives updated in
place).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/seventh_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.models import cluster_task, conv_bn_relu, global_average, upsample_nearest
from model_sets import NEG, LSTMCell, ModelSet, l2_normalize, mlp, stepper
from model_sets import attention as _attention

# ---------------------------------------------------------------------------------------
# helpers: what a PyTorch user would have taken from torch.nn (and model_sets' mlp,
# l2_normalize, LSTMCell)

def _channels(v):
    """(b, c) -> (b, c, 1, 1), to scale or shift a feature map per sample and channel."""
    return F.expand_dims(v, (2, 3))


class GroupNorm(nn.Module):
    """torch.nn.GroupNorm over (b, c, h, w): each sample's `groups` groups of channels
    normalised by their own mean and variance, then a per-channel scale and shift."""

    def __init__(self, groups, ch, eps=1e-5):
        super().__init__()
        self.groups, self.eps = groups, eps
        self.weight = nn.Parameter(np.ones(ch, np.float32))
        self.bias = nn.Parameter(np.zeros(ch, np.float32))

    def forward(self, x):
        b, c, h, w = x.shape
        g = F.reshape(x, (b, self.groups, -1))
        mean = F.mean(g, axis=2, keepdims=True)
        var = F.var(g, axis=2, keepdims=True)
        g = (g - mean) * F.rsqrt(var + self.eps)
        return (F.reshape(g, (b, c, h, w)) * F.reshape(self.weight, (1, c, 1, 1))
                + F.reshape(self.bias, (1, c, 1, 1)))


class Identity(nn.Module):
    """torch.nn.Identity (ModuleList takes no None where a branch has nothing to do)."""

    def forward(self, x):
        return x


# ---------------------------------------------------------------------------------------
# 1. universal transformer: one pre-norm encoder block (its weights shared) applied
#    `depth` times, a learned embedding of the iteration added before each application
#    (no halting); mean pooling and a classifier.
class SharedBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        q, k, v = F.split(self.qkv(self.n1(x)), 3, axis=-1)
        x = x + self.proj(_attention(q, k, v, self.heads))
        return x + self.ff(self.n2(x))


class UniversalTransformer(nn.Module):
    def __init__(self, features, dim, heads, depth, seq):
        super().__init__()
        self.depth = depth
        self.inp = nn.Linear(features, dim)
        self.pos = nn.Parameter(imp.random.normal(0, 0.02, (1, seq, dim)))
        self.when = nn.Parameter(imp.random.normal(0, 0.02, (depth, 1, dim)))
        self.block = SharedBlock(dim, heads)
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x):
        h = self.inp(x) + self.pos
        for e in F.split(self.when, self.depth, axis=0):
            h = self.block(h + e)
        return self.head(F.mean(self.norm(h), axis=1))


# ---------------------------------------------------------------------------------------
# 2. neural cellular automaton (growing, as in Mordvintsev et al.): `ch` channels per
#    cell (RGBA first), a fixed perception (identity and Sobel x, y per channel: a
#    depthwise conv), a per-cell MLP of 1x1 convs proposing an update, applied where a
#    fresh random fire mask is set, then cells with no living neighbour (alpha > 0.1 in
#    their 3x3 neighbourhood, before and after) zeroed. `steps` updates from a seed cell;
#    the loss is the MSE of the RGBA channels against a target ring.
SOBEL = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float32) / 8.0


class CellularAutomaton(nn.Module):
    def __init__(self, ch, hidden, fire):
        super().__init__()
        ident = np.zeros((3, 3), np.float32)
        ident[1, 1] = 1.0
        kernels = np.stack([ident, SOBEL, SOBEL.T])
        self.ch, self.fire = ch, fire
        self.perceive = imp.Tensor(np.tile(kernels, (ch, 1, 1))[:, None])   # (3 ch, 1, 3, 3)
        self.fc1 = nn.Conv2d(3 * ch, hidden, 1)
        self.fc2 = nn.Conv2d(hidden, ch, 1, bias=False)
        self.fc2.weight = nn.Parameter(imp.random.normal(0, 1e-3, (ch, hidden, 1, 1)))

    def alive(self, x):
        return (F.max_pool2d(x[:, 3:4], 3, stride=1, padding=1) > 0.1).astype("float32")

    def forward(self, x, steps):
        b, _, h, w = x.shape
        for _ in range(steps):
            before = self.alive(x)
            p = F.conv2d(x, self.perceive, padding=1, groups=self.ch)
            dx = self.fc2(F.relu(self.fc1(p)))
            fire = (imp.random.uniform(size=(b, 1, h, w)) < self.fire).astype("float32")
            x = x + dx * fire
            x = x * (before * self.alive(x))
        return x


def _nca(c):
    b, s, ch = c["batch"], c["size"], c["ch"]
    rng = np.random.default_rng(37)
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32) - (s - 1) / 2.0
    r = np.sqrt(yy ** 2 + xx ** 2)
    ring = np.exp(-((r - s / 4.0) ** 2) / 4.0)
    rgba = np.stack([ring * (0.5 + 0.5 * np.cos(np.arctan2(yy, xx) + k)) for k in (0, 2, 4)]
                    + [ring], axis=0)
    target = imp.Tensor(np.broadcast_to(rgba, (b, 4, s, s)).astype(np.float32))
    seed = np.zeros((b, ch, s, s), np.float32)
    seed[:, 3:, s // 2, s // 2] = 1.0
    seed[:, 4:, s // 2, s // 2] += 0.1 * rng.standard_normal((b, ch - 4))
    seed = imp.Tensor(seed)
    model = CellularAutomaton(ch, c["hidden"], 0.5)
    opt = optim.Adam(model.parameters(), 2e-3)
    return stepper(model.parameters(), opt,
                   lambda: F.mse_loss(model(seed, c["steps"])[:, :4], target))


# ---------------------------------------------------------------------------------------
# 3. binary Tree-LSTM (Tai et al.'s N-ary form) over a fixed complete binary tree of
#    `leaves` tokens: leaves from their embeddings (input, output and update gates), then
#    each level's nodes from their two children, paired by a reshape (b, n, d) ->
#    (b, n / 2, 2 d) and a split: c = i u + f_l c_l + f_r c_r, a forget gate per child.
#    The root's state is classified. Each class is a template token sequence with a
#    quarter of its tokens replaced at random.
class TreeLSTM(nn.Module):
    def __init__(self, vocab, embed, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.leaf = nn.Linear(embed, 3 * hidden)
        self.node = nn.Linear(2 * hidden, 5 * hidden)
        self.head = nn.Linear(hidden, 10)

    def forward(self, tokens):
        i, o, u = F.split(self.leaf(self.embed(tokens)), 3, axis=-1)
        c = F.sigmoid(i) * F.tanh(u)
        h = F.sigmoid(o) * F.tanh(c)
        while h.shape[1] > 1:
            b, n, d = h.shape
            c_left, c_right = F.split(F.reshape(c, (b, n // 2, 2 * d)), 2, axis=-1)
            i, f_left, f_right, o, u = F.split(self.node(F.reshape(h, (b, n // 2, 2 * d))),
                                               5, axis=-1)
            c = (F.sigmoid(i) * F.tanh(u) + F.sigmoid(f_left) * c_left
                 + F.sigmoid(f_right) * c_right)
            h = F.sigmoid(o) * F.tanh(c)
        return self.head(F.squeeze(h, 1))


def _treelstm(c):
    rng = np.random.default_rng(41)
    b, n, v = c["batch"], c["leaves"], c["vocab"]
    assert n & (n - 1) == 0, "a complete binary tree: leaves must be a power of two"
    templates = rng.integers(0, v, (10, n))
    labels = rng.integers(0, 10, b)
    tokens = templates[labels]
    noise = rng.random((b, n)) < 0.25
    tokens[noise] = rng.integers(0, v, noise.sum())
    tokens, labels = imp.Tensor(tokens.astype(np.int32)), imp.Tensor(labels.astype(np.int32))
    model = TreeLSTM(v, c["embed"], c["hidden"])
    opt = optim.Adam(model.parameters(), 2e-3)
    return stepper(model.parameters(), opt, lambda: F.cross_entropy(model(tokens), labels))


# ---------------------------------------------------------------------------------------
# 4. Set Transformer (Lee et al.): two induced set attention blocks (m learned inducing
#    points attend to the set, the set attends to them), then pooling by attention from
#    one learned seed; each MAB is H = LN(Q + MHA(Q, K)), LN(H + FF(H)). A set is `points`
#    points drawn from its class's mixture of four Gaussians.
class MAB(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q, self.kv, self.o = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim), nn.Linear(dim, dim)
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff = mlp([dim, 2 * dim, dim])

    def forward(self, x, y):
        k, v = F.split(self.kv(y), 2, axis=-1)
        h = self.n1(x + self.o(_attention(self.q(x), k, v, self.heads)))
        return self.n2(h + self.ff(h))


class ISAB(nn.Module):
    def __init__(self, dim, heads, inducing):
        super().__init__()
        self.inducing = nn.Parameter(imp.random.normal(0, 1.0 / math.sqrt(dim),
                                                       (1, inducing, dim)))
        self.mab1, self.mab2 = MAB(dim, heads), MAB(dim, heads)

    def forward(self, x):
        i = F.broadcast_to(self.inducing, (x.shape[0],) + self.inducing.shape[1:])
        return self.mab2(x, self.mab1(i, x))


class SetTransformer(nn.Module):
    def __init__(self, features, dim, heads, inducing):
        super().__init__()
        self.inp = nn.Linear(features, dim)
        self.isab1, self.isab2 = ISAB(dim, heads, inducing), ISAB(dim, heads, inducing)
        self.seed = nn.Parameter(imp.random.normal(0, 1.0 / math.sqrt(dim), (1, 1, dim)))
        self.pool, self.head = MAB(dim, heads), nn.Linear(dim, 10)

    def forward(self, x):
        h = self.isab2(self.isab1(self.inp(x)))
        s = F.broadcast_to(self.seed, (x.shape[0], 1, self.seed.shape[2]))
        return self.head(F.squeeze(self.pool(s, h), 1))


def _settrans(c):
    rng = np.random.default_rng(43)
    b, n, f = c["batch"], c["points"], c["features"]
    means = rng.standard_normal((10, 4, f)).astype(np.float32) * 2.0
    labels = rng.integers(0, 10, b)
    comp = rng.integers(0, 4, (b, n))
    x = means[labels[:, None], comp] + rng.standard_normal((b, n, f)).astype(np.float32)
    x, labels = imp.Tensor(x.astype(np.float32)), imp.Tensor(labels.astype(np.int32))
    model = SetTransformer(f, c["dim"], c["heads"], c["inducing"])
    opt = optim.Adam(model.parameters(), 1e-3)
    return stepper(model.parameters(), opt, lambda: F.cross_entropy(model(x), labels))


# ---------------------------------------------------------------------------------------
# 5. PixelCNN-like: a masked 7x7 conv (type A: the centre pixel hidden), `layers` gated
#    residual blocks of masked 3x3 convs (type B), tanh(a) sigmoid(g) from the two halves
#    of the channels; a 1x1 head gives `levels` logits per pixel, trained by a per-pixel
#    cross entropy against the image's quantised levels. The masks multiply the weights
#    at every call. The images are random smooth sums of blobs and stripes.
def _causal_mask(cout, cin, k, centre):
    m = np.ones((cout, cin, k, k), np.float32)
    m[:, :, k // 2, k // 2 + (1 if centre else 0):] = 0.0
    m[:, :, k // 2 + 1:, :] = 0.0
    return imp.Tensor(m)


class MaskedConv(nn.Conv2d):
    def __init__(self, cin, cout, k, centre):
        super().__init__(cin, cout, k, padding=k // 2)
        self.mask = _causal_mask(cout, cin, k, centre)

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, self.bias, padding=self.padding)


class GatedBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv, self.out = MaskedConv(ch, 2 * ch, 3, True), nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        a, g = F.split(self.conv(x), 2, axis=1)
        return x + self.out(F.tanh(a) * F.sigmoid(g))


class PixelCNN(nn.Module):
    def __init__(self, ch, layers, levels):
        super().__init__()
        self.first = MaskedConv(1, ch, 7, False)
        self.blocks = nn.Sequential(*[GatedBlock(ch) for _ in range(layers)])
        self.head = nn.Sequential(nn.ReLU(), nn.Conv2d(ch, ch, 1), nn.ReLU(),
                                  nn.Conv2d(ch, levels, 1))

    def forward(self, x):
        return self.head(self.blocks(self.first(x)))


def _pixelcnn(c):
    rng = np.random.default_rng(47)
    b, s, levels = c["batch"], c["size"], c["levels"]
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32) / s
    img = np.zeros((b, s, s), np.float32)
    for i in range(b):
        for _ in range(3):
            cy, cx, w = rng.random(3)
            img[i] += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (0.02 + 0.05 * w))
        img[i] += 0.3 * np.sin(2 * np.pi * (rng.integers(1, 4) * xx + rng.random()))
    img = (img - img.min()) / (img.max() - img.min())
    q = np.minimum((img * levels).astype(np.int64), levels - 1)
    x = imp.Tensor((q[:, None] / (levels - 1) * 2.0 - 1.0).astype(np.float32))
    target = imp.Tensor(q.astype(np.int32))
    model = PixelCNN(c["ch"], c["layers"], levels)
    opt = optim.Adam(model.parameters(), 1e-3)
    return stepper(model.parameters(), opt,
                   lambda: F.cross_entropy(model(x), target, axis=1))


# ---------------------------------------------------------------------------------------
# 6. diffusion U-Net step (DDPM's epsilon prediction, cosine schedule): each step a fresh
#    time t per image and fresh Gaussian noise, x_t = sqrt(abar) x_0 + sqrt(1 - abar) eps;
#    a U-Net of residual blocks (group norm, SiLU, conv; the time embedding, sinusoidal
#    then an MLP, scales and shifts every block's features), two stride-2 downsamplings,
#    nearest upsamplings with the skips concatenated, predicts eps under an MSE.
def _sinusoidal(t, dim):
    """(b,) times in [0, 1) -> (b, dim): sines and cosines at geometric frequencies."""
    half = dim // 2
    freqs = imp.Tensor(np.exp(-math.log(10000.0) * np.arange(half) / half).astype(np.float32))
    args = F.expand_dims(t * 1000.0, 1) * freqs
    return F.concat([F.sin(args), F.cos(args)], axis=1)


class TimeResBlock(nn.Module):
    def __init__(self, cin, cout, tdim, groups):
        super().__init__()
        self.n1, self.n2 = GroupNorm(groups, cin), GroupNorm(groups, cout)
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.film = nn.Linear(tdim, 2 * cout)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        scale, shift = F.split(self.film(temb), 2, axis=1)
        h = self.n2(h) * (1.0 + _channels(scale)) + _channels(shift)
        h = self.c2(F.silu(h))
        return h + (x if self.skip is None else self.skip(x))


class DiffusionUNet(nn.Module):
    def __init__(self, ch, tdim, groups):
        super().__init__()
        self.tdim = tdim
        self.time = mlp([tdim, 4 * tdim, 4 * tdim], act=nn.SiLU)
        t4 = 4 * tdim
        self.inp = nn.Conv2d(3, ch, 3, padding=1)
        self.d1 = TimeResBlock(ch, ch, t4, groups)
        self.down1 = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.d2 = TimeResBlock(ch, 2 * ch, t4, groups)
        self.down2 = nn.Conv2d(2 * ch, 2 * ch, 3, stride=2, padding=1)
        self.mid1 = TimeResBlock(2 * ch, 2 * ch, t4, groups)
        self.mid2 = TimeResBlock(2 * ch, 2 * ch, t4, groups)
        self.u2 = TimeResBlock(4 * ch, 2 * ch, t4, groups)
        self.u1 = TimeResBlock(3 * ch, ch, t4, groups)
        self.out_norm, self.out = GroupNorm(groups, ch), nn.Conv2d(ch, 3, 3, padding=1)

    def forward(self, x, t):
        temb = F.silu(self.time(_sinusoidal(t, self.tdim)))
        s1 = self.d1(self.inp(x), temb)                         # full resolution
        s2 = self.d2(self.down1(s1), temb)                      # half
        h = self.mid2(self.mid1(self.down2(s2), temb), temb)    # quarter
        h = self.u2(F.concat([upsample_nearest(h), s2], axis=1), temb)
        h = self.u1(F.concat([upsample_nearest(h), s1], axis=1), temb)
        return self.out(F.silu(self.out_norm(h)))


def _diffusion(c):
    b = c["batch"]
    x0, _ = cluster_task(b, (3, c["size"], c["size"]))
    x0 = x0 * 0.5
    model = DiffusionUNet(c["ch"], c["tdim"], c["groups"])
    opt = optim.Adam(model.parameters(), 2e-4)

    def denoising():
        t = imp.random.uniform(0.02, 0.98, size=(b,))
        abar = F.reshape(F.cos(t * (math.pi / 2)) ** 2, (b, 1, 1, 1))
        eps = imp.random.normal(size=x0.shape)
        xt = F.sqrt(abar) * x0 + F.sqrt(1.0 - abar) * eps
        return F.mse_loss(model(xt, t), eps)
    return stepper(model.parameters(), opt, denoising)


# ---------------------------------------------------------------------------------------
# 7. pointer network (Vinyals et al.) sorting `n` vectors by their first component: an
#    LSTM encoder over the inputs' embeddings, an LSTM decoder fed (teacher forcing) the
#    embedding of the element it should have pointed at last (a one-hot product), whose
#    state scores every input by additive attention, v tanh(W1 e_j + W2 d_t), the chosen
#    ones masked out; cross entropy of each step's scores against the right index.
class PointerNet(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Linear(features, hidden)
        self.enc, self.dec = LSTMCell(hidden, hidden), LSTMCell(hidden, hidden)
        self.w1 = nn.Linear(hidden, hidden, bias=False)
        self.w2 = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, 1, bias=False)
        self.start = nn.Parameter(imp.random.normal(0, 0.1, (1, hidden)))

    def forward(self, x, previous, masks):
        b, n, _ = x.shape
        e = self.embed(x)
        h = c = F.zeros((b, self.hidden))
        states = []
        for et in F.split(e, n, axis=1):
            h, c = self.enc(F.squeeze(et, 1), h, c)
            states.append(h)
        keys = self.w1(F.stack(states, axis=1))                 # (b, n, hidden), read by every step
        inp, scores = F.broadcast_to(self.start, (b, self.hidden)), []
        for prev, mask in zip(previous, masks):
            h, c = self.dec(inp, h, c)
            u = self.v(F.tanh(keys + F.expand_dims(self.w2(h), 1)))
            scores.append(F.squeeze(u, 2) + mask)
            inp = F.squeeze(F.matmul(prev, e), 1)               # (b, 1, n) @ (b, n, hidden)
        return F.stack(scores, axis=1)                          # (b, n, n)


def _pointer(c):
    rng = np.random.default_rng(53)
    b, n, f = c["batch"], c["n"], c["features"]
    x = rng.random((b, n, f)).astype(np.float32)
    order = np.argsort(x[:, :, 0], axis=1)                      # the pointers, step by step
    rows = np.arange(b)
    previous, masks = [], []
    chosen = np.zeros((b, n), np.float32)
    for t in range(n):
        masks.append(imp.Tensor(chosen.copy()))
        onehot = np.zeros((b, 1, n), np.float32)
        onehot[rows, 0, order[:, t]] = 1.0
        previous.append(imp.Tensor(onehot))
        chosen[rows, order[:, t]] = NEG
    x, targets = imp.Tensor(x), imp.Tensor(order.astype(np.int32))
    model = PointerNet(f, c["hidden"])
    opt = optim.Adam(model.parameters(), 1e-3)
    return stepper(model.parameters(), opt,
                   lambda: F.cross_entropy(model(x, previous, masks), targets))


# ---------------------------------------------------------------------------------------
# 8. modern Hopfield network (Ramsauer et al.): two layers, each projecting its input to
#    a state xi and iterating the retrieval xi <- softmax(beta xi Y^T) Y `iters` times
#    from a large learned memory Y of `patterns` stored patterns (parameter-heavy, and the
#    (batch, patterns) association matrices are the largest activations), then a
#    projection, residual and LayerNorm; a classifier.
class HopfieldLayer(nn.Module):
    def __init__(self, dim, patterns, beta, iters):
        super().__init__()
        self.beta, self.iters = beta, iters
        self.q, self.o = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.stored = nn.Parameter(imp.random.normal(0, 1.0 / math.sqrt(dim), (patterns, dim)))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        xi = self.q(x)
        for _ in range(self.iters):
            assoc = F.softmax(self.beta * F.matmul(xi, self.stored, transpose_b=True), axis=-1)
            xi = F.matmul(assoc, self.stored)
        return self.norm(x + self.o(xi))


class Hopfield(nn.Module):
    def __init__(self, features, dim, patterns, beta, iters):
        super().__init__()
        self.inp = nn.Linear(features, dim)
        self.layers = nn.Sequential(HopfieldLayer(dim, patterns, beta, iters),
                                    HopfieldLayer(dim, patterns, beta, iters))
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.layers(self.inp(x)))


# ---------------------------------------------------------------------------------------
# 9. HRNet-like segmenter: a stem at full resolution, then stages of parallel branches
#    (resolution r / 2^k, channels ch 2^k; one, two, then three branches) of residual
#    blocks; at the end of each stage every output branch is the ReLU of the sum over all
#    branches brought to it (1x1 conv + nearest upsampling from below, chains of stride-2
#    3x3 convs from above, itself as is), a new lower branch made the same way. The head
#    upsamples every branch to full resolution, concatenates them and classifies each
#    pixel (background or one of three shapes).
class ResBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.c1 = conv_bn_relu(ch, ch)
        self.c2 = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch))

    def forward(self, x):
        return F.relu(x + self.c2(self.c1(x)))


def _bring(cin, cout, steps):
    """The exchange from a branch `steps` levels away: up (steps < 0) or down."""
    if steps < 0:
        return nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))
    layers = []
    for k in range(steps):
        last = k == steps - 1
        layers += [nn.Conv2d(cin, cout if last else cin, 3, stride=2, padding=1, bias=False),
                   nn.BatchNorm2d(cout if last else cin)] + ([] if last else [nn.ReLU()])
    return nn.Sequential(*layers)


class HRStage(nn.Module):
    def __init__(self, ch, branches, outputs, blocks):
        super().__init__()
        self.branches = nn.ModuleList([nn.Sequential(*[ResBlock(ch << i) for _ in range(blocks)])
                                       for i in range(branches)])
        self.fuse = nn.ModuleList([nn.ModuleList([Identity() if i == j else
                                                  _bring(ch << i, ch << j, j - i)
                                                  for i in range(branches)])
                                   for j in range(outputs)])

    def forward(self, xs):
        ys = [branch(x) for branch, x in zip(self.branches, xs)]
        outs = []
        for j, row in enumerate(self.fuse):
            total = None
            for i, (y, bring) in enumerate(zip(ys, row)):
                z = bring(y)
                if i > j:
                    z = upsample_nearest(z, 2 ** (i - j))
                total = z if total is None else total + z
            outs.append(F.relu(total))
        return outs


class HRNet(nn.Module):
    def __init__(self, ch, blocks, classes):
        super().__init__()
        self.stem = nn.Sequential(conv_bn_relu(3, ch), conv_bn_relu(ch, ch))
        self.stages = nn.ModuleList([HRStage(ch, 1, 2, blocks), HRStage(ch, 2, 3, blocks),
                                     HRStage(ch, 3, 3, blocks)])
        self.head = nn.Sequential(conv_bn_relu(7 * ch, ch, 1), nn.Conv2d(ch, classes, 1))

    def forward(self, x):
        xs = [self.stem(x)]
        for stage in self.stages:
            xs = stage(xs)
        full = [xs[0]] + [upsample_nearest(y, 2 ** i) for i, y in enumerate(xs) if i]
        return self.head(F.concat(full, axis=1))


def _hrnet(c):
    rng = np.random.default_rng(59)
    b, s = c["batch"], c["size"]
    colours = rng.standard_normal((4, 3)).astype(np.float32)
    yy, xx = np.mgrid[0:s, 0:s]
    seg = np.zeros((b, s, s), np.int64)
    for i in range(b):
        for cls in (1, 2, 3):
            cy, cx = rng.integers(0, s, 2)
            r = rng.integers(s // 8, s // 4 + 1)
            if cls == 1:
                region = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            elif cls == 2:
                region = (abs(yy - cy) <= r) & (abs(xx - cx) <= r)
            else:
                region = abs(yy - cy) + abs(xx - cx) <= r
            seg[i][region] = cls
    image = colours[seg].transpose(0, 3, 1, 2) + 0.5 * rng.standard_normal((b, 3, s, s))
    x, target = imp.Tensor(image.astype(np.float32)), imp.Tensor(seg.astype(np.int32))
    model = HRNet(c["ch"], c["blocks"], 4)
    opt = optim.Adam(model.parameters(), 2e-3)
    return stepper(model.parameters(), opt,
                   lambda: F.cross_entropy(model(x), target, axis=1))


# ---------------------------------------------------------------------------------------
# 10. MoCo (v2-like): a query encoder (conv net, MLP projection) trained by InfoNCE of each
#     query against its key and a queue of `queue` negative keys; the key encoder, a
#     momentum copy updated in place after every step, runs outside the recording; the
#     step's keys then replace the oldest in the queue, in place (a slice assignment).
#     Both views get a fresh random brightness, contrast and noise every step.
class ContrastEncoder(nn.Module):
    def __init__(self, ch, hidden, dim):
        super().__init__()
        self.body = nn.Sequential(conv_bn_relu(3, ch), nn.MaxPool2d(2), conv_bn_relu(ch, 2 * ch),
                                  nn.MaxPool2d(2), conv_bn_relu(2 * ch, 4 * ch))
        self.proj = mlp([4 * ch, hidden, dim])

    def forward(self, x):
        return l2_normalize(self.proj(global_average(self.body(x))))


def _moco(c):
    b, k_size, tau, m = c["batch"], c["queue"], 0.2, c["momentum"]
    x, _ = cluster_task(b, (3, c["size"], c["size"]))          # labels unused
    query = ContrastEncoder(c["ch"], c["hidden"], c["dim"])
    key = ContrastEncoder(c["ch"], c["hidden"], c["dim"])
    key.load_state_dict(query.state_dict())
    pairs = list(zip(key.parameters(), query.parameters()))
    queue = l2_normalize(imp.random.normal(size=(k_size, c["dim"])))
    positives = imp.Tensor(np.zeros(b, np.int32))               # the key is logit 0
    gm = GradManager().attach(query.parameters())
    opt = optim.SGD(query.parameters(), 0.03, momentum=0.9)
    state = {"at": 0}

    def view():
        gain = imp.random.uniform(0.6, 1.4, size=(b, 1, 1, 1))
        bias = imp.random.uniform(-0.3, 0.3, size=(b, 1, 1, 1))
        return x * gain + bias + 0.3 * imp.random.normal(size=x.shape)

    def step():
        xq, xk = view(), view()
        k = key(xk)                                             # not recorded
        with gm:
            q = query(xq)
            pos = F.sum(q * k, axis=1, keepdims=True)
            neg = F.matmul(q, queue, transpose_b=True)
            loss = F.cross_entropy(F.concat([pos, neg], axis=1) * (1.0 / tau), positives)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        for pk, pq in pairs:
            pk *= m
            pk += (1.0 - m) * pq
        at = state["at"]
        queue[at:at + b] = k
        state["at"] = (at + b) % k_size
        return loss
    return step


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "universal": dict(features=32, dim=128, heads=4, depth=8, seq=64, batch=12),
    "nca": dict(ch=16, hidden=64, steps=28, size=24, batch=8),
    "treelstm": dict(vocab=64, embed=64, hidden=128, leaves=256, batch=32),
    "settrans": dict(features=8, dim=128, heads=4, inducing=16, points=256, batch=16),
    "pixelcnn": dict(ch=48, layers=6, levels=16, size=24, batch=12),
    "diffusion": dict(ch=32, tdim=32, groups=8, size=32, batch=8),
    "pointer": dict(features=4, hidden=128, n=24, batch=64),
    "hopfield": dict(features=64, dim=256, patterns=4096, beta=0.25, iters=3, batch=128),
    "hrnet": dict(ch=16, blocks=1, size=32, batch=12),
    "moco": dict(ch=16, hidden=256, dim=128, queue=16384, momentum=0.99, size=32, batch=64),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "universal": dict(features=8, dim=16, heads=2, depth=3, seq=8, batch=8),
    "nca": dict(ch=8, hidden=16, steps=4, size=8, batch=4),
    "treelstm": dict(vocab=12, embed=8, hidden=16, leaves=16, batch=8),
    "settrans": dict(features=4, dim=16, heads=2, inducing=4, points=16, batch=8),
    "pixelcnn": dict(ch=8, layers=2, levels=8, size=8, batch=4),
    "diffusion": dict(ch=8, tdim=8, groups=4, size=8, batch=4),
    "pointer": dict(features=3, hidden=16, n=6, batch=8),
    "hopfield": dict(features=16, dim=16, patterns=64, beta=0.5, iters=2, batch=16),
    "hrnet": dict(ch=4, blocks=1, size=8, batch=4),
    "moco": dict(ch=4, hidden=16, dim=8, queue=64, momentum=0.99, size=8, batch=8),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {
    "universal": lambda c: (UniversalTransformer(c["features"], c["dim"], c["heads"],
                                                 c["depth"], c["seq"]),
                            (c["seq"], c["features"]), "adam", 1e-3),
    "hopfield": lambda c: (Hopfield(c["features"], c["dim"], c["patterns"], c["beta"],
                                    c["iters"]),
                           (c["features"],), "adam", 1e-3),
}

# name -> config -> step(): models with their own training step
STEPS = {
    "nca": _nca,
    "treelstm": _treelstm,
    "settrans": _settrans,
    "pixelcnn": _pixelcnn,
    "diffusion": _diffusion,
    "pointer": _pointer,
    "hrnet": _hrnet,
    "moco": _moco,
}


MODEL_SET = ModelSet(__name__, "tests/eighth_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
