"""Ten more models for the memory manager, structurally different from the zoo,
tests/unseen_models.py, tests/fresh_models.py and tests/novel_models.py, written in session
43 by a helper that had not read the memory manager: ConvNeXt blocks (depthwise 7x7 conv,
channels-last LayerNorm, 4x GELU MLP, layer scale), a gated causal conv language model
(GLU), linear attention (k^T v before q), a transformer encoder-decoder whose every decoder
layer reads the encoder's output, PointNet (a shared per-point MLP and a max over the
points), a DLRM-like recommender (embedding tables, pairwise dot products gathered from a
batched product), a RealNVP flow trained by its log-likelihood, a residual MLP with
stochastic depth (per-sample Bernoulli masks), a capsule net with three iterations of
dynamic routing, and a mean teacher (an EMA copy of the parameters updated in place, a
consistency loss against its outputs).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/novel_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.models import cluster_task, conv_bn_relu, global_average
from model_sets import ModelSet, stepper
from model_sets import attention as _attention
from model_sets import merge_heads as _merge
from model_sets import split_heads as _heads


# ---------------------------------------------------------------------------------------
# helpers

def _channels_last_norm(norm, x):
    """LayerNorm over the channels of (n, c, h, w): to channels-last and back."""
    return F.transpose(norm(F.transpose(x, (0, 2, 3, 1))), (0, 3, 1, 2))


def _mlp(sizes):
    """Linear layers of `sizes` with ReLU between them."""
    layers = [m for a, b in zip(sizes, sizes[1:]) for m in (nn.Linear(a, b), nn.ReLU())]
    return nn.Sequential(*layers[:-1])


# ---------------------------------------------------------------------------------------
# 1. ConvNeXt: a patchify stem, blocks of depthwise 7x7 conv -> channels-last LayerNorm ->
#    Linear 4x -> GELU -> Linear -> learned per-channel scale, residual; two stages.
class ConvNeXtBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.fc1 = nn.Linear(c, 4 * c)
        self.fc2 = nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(np.full(c, 0.1, np.float32))

    def forward(self, x):
        y = F.transpose(self.dw(x), (0, 2, 3, 1))               # (n, h, w, c)
        y = self.fc2(F.gelu(self.fc1(self.norm(y)))) * self.gamma
        return x + F.transpose(y, (0, 3, 1, 2))


class ConvNeXt(nn.Module):
    def __init__(self, ch, blocks):
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 2, stride=2)
        self.stem_norm = nn.LayerNorm(ch)
        self.stage1 = nn.Sequential(*[ConvNeXtBlock(ch) for _ in range(blocks)])
        self.down_norm = nn.LayerNorm(ch)
        self.down = nn.Conv2d(ch, 2 * ch, 2, stride=2)
        self.stage2 = nn.Sequential(*[ConvNeXtBlock(2 * ch) for _ in range(blocks)])
        self.norm = nn.LayerNorm(2 * ch)
        self.head = nn.Linear(2 * ch, 10)

    def forward(self, x):
        x = self.stage1(_channels_last_norm(self.stem_norm, self.stem(x)))
        x = self.stage2(self.down(_channels_last_norm(self.down_norm, x)))
        return self.head(self.norm(global_average(x)))


# ---------------------------------------------------------------------------------------
# 2. gated causal conv language model: embedded tokens as (b, d, 1, s), each layer a
#    causal conv (zeros concatenated on the left, no padding) to 2d channels, GLU gating
#    a * sigmoid(b), a residual; next-token cross entropy at every position. The tokens
#    follow t_i = (t_{i-1} + t_{i-2}) mod vocab, so two tokens back determine the next.
class GLULM(nn.Module):
    def __init__(self, vocab, dim, layers, k):
        super().__init__()
        self.k = k
        self.embed = nn.Embedding(vocab, dim)
        self.convs = nn.ModuleList([nn.Conv2d(dim, 2 * dim, (1, k)) for _ in range(layers)])
        self.out = nn.Linear(dim, vocab)

    def forward(self, tokens):
        b, s = tokens.shape
        x = F.transpose(self.embed(tokens), (0, 2, 1))          # (b, dim, s)
        x = F.expand_dims(x, 2) * 0.5                           # (b, dim, 1, s)
        pad = F.zeros((b, x.shape[1], 1, self.k - 1))
        for conv in self.convs:
            a, g = F.split(conv(F.concat([pad, x], axis=3)), 2, axis=1)
            x = x + a * F.sigmoid(g)
        return self.out(F.transpose(F.squeeze(x, 2), (0, 2, 1)))  # (b, s, vocab)


def _glulm(c):
    rng = np.random.default_rng(5)
    v, s = c["vocab"], c["seq"] + 1
    t = np.zeros((c["batch"], s), np.int64)
    t[:, :2] = rng.integers(0, v, (c["batch"], 2))
    for i in range(2, s):
        t[:, i] = (t[:, i - 1] + t[:, i - 2]) % v
    inputs = imp.Tensor(t[:, :-1].astype(np.int32))
    targets = imp.Tensor(t[:, 1:].reshape(-1).astype(np.int32))
    model = GLULM(v, c["dim"], c["layers"], c["k"])
    opt = optim.Adam(model.parameters(), 3e-3)

    def next_token():
        return F.cross_entropy(F.reshape(model(inputs), (-1, v)), targets)
    return stepper(model.parameters(), opt, next_token)


# ---------------------------------------------------------------------------------------
# 3. linear attention: phi(x) = elu(x) + 1 (as relu(x) + exp(min(x, 0))), kv = phi(k)^T v
#    (b, h, e, e) first, then phi(q) kv normalised by phi(q) sum(phi(k)); never an
#    (s, s) matrix. Pre-norm blocks, mean pooling.
def _phi(x):
    return F.relu(x) + F.exp(F.minimum(x, 0.0))


class LinearAttentionBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.n1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.n2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        q, k, v = F.split(self.qkv(self.n1(x)), 3, axis=-1)
        q, k, v = (_heads(t, self.heads) for t in (q, k, v))
        q, k = _phi(q), _phi(k)
        kv = F.matmul(k, v, transpose_a=True)                   # (b, h, e, e)
        ksum = F.sum(k, axis=2, keepdims=True)                  # (b, h, 1, e)
        den = F.matmul(q, ksum, transpose_b=True)               # (b, h, s, 1)
        x = x + self.proj(_merge(F.matmul(q, kv) / (den + 1e-6)))
        return x + self.mlp(self.n2(x))


class LinearTransformer(nn.Module):
    def __init__(self, features, dim, heads, blocks):
        super().__init__()
        self.inp = nn.Linear(features, dim)
        self.blocks = nn.Sequential(*[LinearAttentionBlock(dim, heads) for _ in range(blocks)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(F.mean(self.norm(self.blocks(self.inp(x))), axis=1))


# ---------------------------------------------------------------------------------------
# 4. transformer encoder-decoder: the encoder's output (memory) is read by the
#    cross-attention of every decoder layer; decoder self-attention is causal through an
#    additive -1e9 bias. The target is the source reversed, fed shifted right.
class EncoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        q, k, v = F.split(self.qkv(self.n1(x)), 3, axis=-1)
        x = x + self.proj(_attention(q, k, v, self.heads))
        return x + self.mlp(self.n2(x))


class DecoderLayer(EncoderLayer):
    def __init__(self, dim, heads):
        super().__init__(dim, heads)
        self.n3 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.cross = nn.Linear(dim, dim)

    def forward(self, x, memory, causal):
        q, k, v = F.split(self.qkv(self.n1(x)), 3, axis=-1)
        x = x + self.proj(_attention(q, k, v, self.heads, causal))
        k, v = F.split(self.kv(memory), 2, axis=-1)
        x = x + self.cross(_attention(self.q(self.n3(x)), k, v, self.heads))
        return x + self.mlp(self.n2(x))


class EncoderDecoder(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.src_pos = nn.Parameter(imp.random.normal(size=(seq, dim)))
        self.tgt_pos = nn.Parameter(imp.random.normal(size=(seq, dim)))
        self.enc = nn.ModuleList([EncoderLayer(dim, heads) for _ in range(layers)])
        self.dec = nn.ModuleList([DecoderLayer(dim, heads) for _ in range(layers)])
        self.enc_norm, self.norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.out = nn.Linear(dim, vocab)
        self.causal = imp.Tensor(np.triu(np.full((seq, seq), -1e9, np.float32), 1))

    def forward(self, src, tgt_in):
        m = self.embed(src) + self.src_pos
        for layer in self.enc:
            m = layer(m)
        memory = self.enc_norm(m)
        y = self.embed(tgt_in) + self.tgt_pos
        for layer in self.dec:
            y = layer(y, memory, self.causal)
        return self.out(self.norm(y))


def _encdec(c):
    rng = np.random.default_rng(7)
    v, s = c["vocab"], c["seq"]
    src = rng.integers(1, v, (c["batch"], s))
    tgt = src[:, ::-1]
    tgt_in = np.concatenate([np.zeros((c["batch"], 1), np.int64), tgt[:, :-1]], axis=1)
    src, tgt_in = imp.Tensor(src.astype(np.int32)), imp.Tensor(tgt_in.astype(np.int32))
    target = imp.Tensor(tgt.reshape(-1).astype(np.int32))
    model = EncoderDecoder(v, c["dim"], c["heads"], c["layers"], s)
    opt = optim.Adam(model.parameters(), 2e-3)

    def reverse():
        return F.cross_entropy(F.reshape(model(src, tgt_in), (-1, v)), target)
    return stepper(model.parameters(), opt, reverse)


# ---------------------------------------------------------------------------------------
# 5. PointNet: one MLP applied to every point of (b, points, 3), a max over the points
#    (the gradient goes to the arg max only), then a classifier MLP.
class PointNet(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.point = nn.Sequential(_mlp([3, width // 4, width // 2, width]), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(width, width // 2), nn.ReLU(),
                                  nn.LayerNorm(width // 2), nn.Linear(width // 2, 10))

    def forward(self, x):
        return self.head(F.max(self.point(x), axis=1))


# ---------------------------------------------------------------------------------------
# 6. DLRM-like recommender: a bottom MLP on dense features, one embedding table per sparse
#    feature, every pairwise dot product of the stacked vectors (a batched product with
#    its own transpose, whose strict upper triangle is gathered by a fixed index), the
#    dense vector concatenated, a top MLP. Each sparse id hints at the label.
class DLRM(nn.Module):
    def __init__(self, dense, vocabs, dim, hidden):
        super().__init__()
        self.bottom = _mlp([dense, hidden, dim])
        self.tables = nn.ModuleList([nn.Embedding(v, dim) for v in vocabs])
        n = len(vocabs) + 1
        rows, cols = np.triu_indices(n, 1)
        self.pairs = imp.Tensor((rows * n + cols).astype(np.int32))
        self.top = _mlp([dim + len(rows), hidden, hidden, 10])

    def forward(self, dense, ids):
        d = F.relu(self.bottom(dense))
        vecs = F.stack([d] + [t(i) for t, i in zip(self.tables, ids)], axis=1)  # (b, n, dim)
        b, n, _ = vecs.shape
        z = F.reshape(F.matmul(vecs, vecs, transpose_b=True), (b, n * n))
        return self.top(F.concat([d, z[:, self.pairs] * 0.1], axis=1))


def _dlrm(c):
    b = c["batch"]
    dense, labels = cluster_task(b, (c["dense"],))
    lab = labels.numpy()
    rng = np.random.default_rng(11)
    ids = []
    for v in c["vocabs"]:
        hinted = lab * (v // 10) + rng.integers(0, v // 10, b)
        ids.append(imp.Tensor(np.where(rng.random(b) < 0.7, hinted,
                                       rng.integers(0, v, b)).astype(np.int32)))
    model = DLRM(c["dense"], c["vocabs"], c["dim"], c["hidden"])
    opt = optim.Adam(model.parameters(), 3e-3)
    return stepper(model.parameters(), opt,
                   lambda: F.cross_entropy(model(dense, ids), labels))


# ---------------------------------------------------------------------------------------
# 7. RealNVP: affine coupling layers on vectors. Each splits x into (x1, x2), makes a
#    scale (tanh) and a shift from x1, y2 = x2 * exp(scale) + shift, and outputs
#    (y2, x1), so the halves alternate; the log-determinant (the scales' sum) enters the
#    negative log-likelihood under a standard normal.
class Coupling(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.net = _mlp([dim // 2, hidden, hidden, dim])

    def forward(self, x):
        x1, x2 = F.split(x, 2, axis=1)
        scale, shift = F.split(self.net(x1), 2, axis=1)
        scale = F.tanh(scale)
        return F.concat([x2 * F.exp(scale) + shift, x1], axis=1), F.sum(scale, axis=1)


class RealNVP(nn.Module):
    def __init__(self, dim, hidden, layers):
        super().__init__()
        self.layers = nn.ModuleList([Coupling(dim, hidden) for _ in range(layers)])

    def forward(self, x):
        logdet = None
        for layer in self.layers:
            x, ld = layer(x)
            logdet = ld if logdet is None else logdet + ld
        return x, logdet


def _realnvp(c):
    x, _ = cluster_task(c["batch"], (c["dim"],))
    model = RealNVP(c["dim"], c["hidden"], c["layers"])
    opt = optim.Adam(model.parameters(), 1e-3)
    const = 0.5 * math.log(2 * math.pi)

    def nll():                                                 # per dimension
        z, logdet = model(x)
        return F.mean(0.5 * F.sum(z * z, axis=1) - logdet) / c["dim"] + const
    return stepper(model.parameters(), opt, nll)


# ---------------------------------------------------------------------------------------
# 8. stochastic depth: pre-norm residual MLP blocks whose branch is multiplied, per
#    sample, by a Bernoulli keep mask (imp.random.uniform < keep) scaled by 1 / keep; keep
#    falls linearly with depth to `survive`.
class DropPathMLP(nn.Module):
    def __init__(self, features, width, depth, survive):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.blocks = nn.ModuleList([
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(),
                          nn.Linear(2 * width, width)) for _ in range(depth)])
        self.keep = [1.0 - (1.0 - survive) * (i + 1) / depth for i in range(depth)]
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 10))

    def forward(self, x):
        x = self.inp(x)
        for block, keep in zip(self.blocks, self.keep):
            mask = (imp.random.uniform(size=(x.shape[0], 1)) < keep).astype("float32")
            x = x + block(x) * (mask * (1.0 / keep))
        return self.head(x)


# ---------------------------------------------------------------------------------------
# 9. capsule net: conv features cut into primary capsules (squashed vectors), each
#    predicting every class capsule through its own matrix (one batched product); three
#    iterations of routing by agreement, each reading all the predictions; the class
#    capsules' lengths trained by the margin loss.
def _squash(s, axis=-1):
    n2 = F.sum(s * s, axis=axis, keepdims=True)
    return s * (n2 / (1.0 + n2) / F.sqrt(n2 + 1e-7))


class CapsNet(nn.Module):
    def __init__(self, ch, caps, dim, out_dim, size, iters):
        super().__init__()
        self.caps, self.dim, self.out_dim, self.iters = caps, dim, out_dim, iters
        self.conv = conv_bn_relu(3, ch)
        self.primary = nn.Conv2d(ch, caps * dim, 3, stride=2, padding=1)
        n_in = caps * (size // 2) ** 2
        self.w = nn.Parameter(imp.random.normal(0, 0.5, (n_in, dim, 10 * out_dim)))

    def forward(self, x):
        p = self.primary(self.conv(x))                          # (b, caps dim, h, w)
        b, _, h, w = p.shape
        u = F.transpose(F.reshape(p, (b, self.caps, self.dim, h * w)), (1, 3, 0, 2))
        u = _squash(F.reshape(u, (-1, b, self.dim)))            # (n_in, b, dim)
        u_hat = F.matmul(u, self.w)                             # (n_in, b, 10 out_dim)
        u_hat = F.transpose(F.reshape(u_hat, (-1, b, 10, self.out_dim)), (1, 0, 2, 3))
        logits = F.zeros(u_hat.shape[:3])                       # (b, n_in, 10)
        for r in range(self.iters):
            cc = F.expand_dims(F.softmax(logits, axis=2), 3)
            v = _squash(F.sum(u_hat * cc, axis=1))              # (b, 10, out_dim)
            if r < self.iters - 1:
                logits = logits + F.sum(u_hat * F.expand_dims(v, 1), axis=3)
        return F.sqrt(F.sum(v * v, axis=2) + 1e-7)              # (b, 10) lengths


def _capsnet(c):
    x, labels = cluster_task(c["batch"], (3, c["size"], c["size"]))
    onehot = imp.Tensor(np.eye(10, dtype=np.float32)[labels.numpy()])
    model = CapsNet(c["ch"], c["caps"], c["dim"], c["out_dim"], c["size"], c["iters"])
    opt = optim.Adam(model.parameters(), 2e-3)

    def margin():
        lengths = model(x)
        present = onehot * F.relu(0.9 - lengths) ** 2
        absent = 0.5 * (1.0 - onehot) * F.relu(lengths - 0.1) ** 2
        return F.mean(F.sum(present + absent, axis=1))
    return stepper(model.parameters(), opt, margin)


# ---------------------------------------------------------------------------------------
# 10. mean teacher: a student conv net and an EMA copy of it. Each step both see the
#     batch under their own fresh Gaussian noise; the loss is cross entropy on the first
#     half (the labelled part) plus an MSE between the two nets' softmaxes on all of it;
#     the teacher runs inside the recording (its parameters are not attached) and its
#     output is detached. After the update, teacher = decay teacher + (1 - decay) student,
#     in place.
class SmallNet(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.body = nn.Sequential(conv_bn_relu(3, ch), nn.MaxPool2d(2),
                                  conv_bn_relu(ch, 2 * ch), nn.MaxPool2d(2),
                                  conv_bn_relu(2 * ch, 2 * ch))
        self.head = nn.Linear(2 * ch, 10)

    def forward(self, x):
        return self.head(global_average(self.body(x)))


def _meanteacher(c):
    x, labels = cluster_task(c["batch"], (3, c["size"], c["size"]))
    half = c["batch"] // 2
    student, teacher = SmallNet(c["ch"]), SmallNet(c["ch"])
    teacher.load_state_dict(student.state_dict())
    pairs = list(zip(teacher.parameters(), student.parameters()))
    opt = optim.SGD(student.parameters(), 0.02, momentum=0.9)
    decay = c["decay"]

    def losses():
        s = student(x + 0.3 * imp.random.normal(size=x.shape))
        t = teacher(x + 0.3 * imp.random.normal(size=x.shape)).detach()
        consistency = F.mse_loss(F.softmax(s, axis=1), F.softmax(t, axis=1))
        return F.cross_entropy(s[:half], labels[:half]) + c["weight"] * consistency
    train = stepper(student.parameters(), opt, losses)

    def step():
        loss = train()
        for pt, ps in pairs:
            pt *= decay
            pt += (1.0 - decay) * ps
        return loss
    return step


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "convnext": dict(ch=32, blocks=2, size=32, batch=12),
    "glulm": dict(vocab=64, dim=128, layers=6, k=3, seq=96, batch=16),
    "linattn": dict(features=32, dim=128, heads=4, blocks=2, seq=256, batch=8),
    "encdec": dict(vocab=32, dim=96, heads=4, layers=2, seq=32, batch=32),
    "pointnet": dict(width=256, points=512, batch=24),
    "dlrm": dict(dense=16, vocabs=(20000, 10000, 5000, 2000, 1000, 500), dim=32,
                 hidden=256, batch=4096),
    "realnvp": dict(dim=64, hidden=256, layers=8, batch=768),
    "droppath": dict(features=64, width=256, depth=12, survive=0.5, batch=256),
    "capsnet": dict(ch=32, caps=8, dim=8, out_dim=16, size=16, iters=3, batch=16),
    "meanteacher": dict(ch=16, size=32, batch=48, decay=0.9, weight=1.0),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "convnext": dict(ch=8, blocks=1, size=16, batch=4),
    "glulm": dict(vocab=16, dim=16, layers=2, k=3, seq=16, batch=8),
    "linattn": dict(features=16, dim=32, heads=2, blocks=1, seq=16, batch=8),
    "encdec": dict(vocab=12, dim=32, heads=2, layers=1, seq=8, batch=16),
    "pointnet": dict(width=32, points=32, batch=16),
    "dlrm": dict(dense=8, vocabs=(200, 100, 50), dim=8, hidden=32, batch=64),
    "realnvp": dict(dim=16, hidden=32, layers=4, batch=64),
    "droppath": dict(features=16, width=32, depth=4, survive=0.5, batch=64),
    "capsnet": dict(ch=8, caps=4, dim=4, out_dim=8, size=8, iters=3, batch=8),
    "meanteacher": dict(ch=8, size=16, batch=8, decay=0.9, weight=1.0),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {
    "convnext": lambda c: (ConvNeXt(c["ch"], c["blocks"]), (3, c["size"], c["size"]),
                           "adam", 2e-3),
    "linattn": lambda c: (LinearTransformer(c["features"], c["dim"], c["heads"], c["blocks"]),
                          (c["seq"], c["features"]), "adam", 1e-3),
    "pointnet": lambda c: (PointNet(c["width"]), (c["points"], 3), "adam", 2e-3),
    "droppath": lambda c: (DropPathMLP(c["features"], c["width"], c["depth"], c["survive"]),
                           (c["features"],), "sgd", 0.01),
}

# name -> config -> step(): models with their own training step
STEPS = {
    "glulm": _glulm,
    "encdec": _encdec,
    "dlrm": _dlrm,
    "realnvp": _realnvp,
    "capsnet": _capsnet,
    "meanteacher": _meanteacher,
}


MODEL_SET = ModelSet(__name__, "tests/heldout_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
