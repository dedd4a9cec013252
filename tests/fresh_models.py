"""Thirteen more models for the memory manager, structurally different from
tests/unseen_models.py and the zoo, written in session 37 by a helper that had not read
the memory manager: a GRU encoder-decoder with attention, a Siamese encoder with a
contrastive loss, a mixture of experts, an Inception block, squeeze-and-excitation, a
WaveNet stack, a small GPT, a highway network, an MLP with global-norm gradient clipping,
truncated backpropagation through time, two backward passes a step, an RNN writing its
states into a buffer, and a decoder reading a sparse canvas made by setitem.

Same shape as that file: `trainer(name, **overrides)` returns a seeded step function that
returns the loss (a Tensor); `CONFIGS` holds small sizes (the tests'), `BENCH_SIZES` those
`tools/bench_dtr.py --fresh` runs (a step of 20-65 ms); `BUILDERS` maps a name to
`config -> (model, data)` and `STEPS` lists models whose training step is not the plain
`training_step` (two backward passes, truncated BPTT, gradient clipping ...).

Public API only: imperative, F, nn, optim, GradManager.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.models import cluster_task, conv_bn_relu, global_average
from model_sets import ModelSet, stepper


# ---------------------------------------------------------------------------------------
# helpers

class GRUCell(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.wx = nn.Linear(features, 3 * hidden)
        self.wh = nn.Linear(hidden, 3 * hidden)

    def forward(self, x, h):
        xr, xz, xn = F.split(self.wx(x), 3, axis=1)
        hr, hz, hn = F.split(self.wh(h), 3, axis=1)
        r = F.sigmoid(xr + hr)
        z = F.sigmoid(xz + hz)
        n = F.tanh(xn + r * hn)
        return n + z * (h - n)


def _ids(rng, shape, vocab):
    return rng.integers(0, vocab, shape)


# ---------------------------------------------------------------------------------------
# 1. GRU encoder-decoder with attention over the encoder states (matmul + softmax),
#    teacher forcing; the task is to output the source reversed.
class Seq2Seq(nn.Module):
    def __init__(self, vocab, dim, hidden):
        super().__init__()
        self.hidden = hidden
        self.src_emb = nn.Embedding(vocab, dim)
        self.tgt_emb = nn.Embedding(vocab, dim)
        self.enc = GRUCell(dim, hidden)
        self.dec = GRUCell(dim + hidden, hidden)
        self.query = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(2 * hidden, vocab)

    def forward(self, src, tgt_in):
        b, t = src.shape
        e = self.src_emb(src)                                   # (b, t, dim)
        h = F.zeros((b, self.hidden))
        states = []
        for xt in F.split(e, t, axis=1):
            h = self.enc(F.squeeze(xt, 1), h)
            states.append(h)
        enc = F.stack(states, axis=1)                           # (b, t, hidden)
        d = self.tgt_emb(tgt_in)
        ctx = F.zeros((b, self.hidden))
        logits = []
        scale = 1.0 / math.sqrt(self.hidden)
        for yt in F.split(d, tgt_in.shape[1], axis=1):
            h = self.dec(F.concat([F.squeeze(yt, 1), ctx], axis=1), h)
            q = F.expand_dims(self.query(h), 2)                 # (b, hidden, 1)
            scores = F.matmul(enc, q) * scale                   # (b, t, 1)
            w = F.softmax(F.transpose(scores, (0, 2, 1)), axis=-1)   # (b, 1, t)
            ctx = F.squeeze(F.matmul(w, enc), 1)                # (b, hidden)
            logits.append(self.out(F.concat([h, ctx], axis=1)))
        return F.stack(logits, axis=1)                          # (b, t, vocab)


def _seq2seq(c):
    rng = np.random.default_rng(0)
    src = _ids(rng, (c["batch"], c["seq"]), c["vocab"] - 1) + 1
    tgt = src[:, ::-1]
    tgt_in = np.concatenate([np.zeros((c["batch"], 1), src.dtype), tgt[:, :-1]], axis=1)
    model = Seq2Seq(c["vocab"], c["dim"], c["hidden"])
    src_t, tin_t = imp.Tensor(src.astype(np.int32)), imp.Tensor(tgt_in.astype(np.int32))
    lab = imp.Tensor(np.ascontiguousarray(tgt).reshape(-1).astype(np.int32))
    opt = optim.Adam(model.parameters(), 3e-3)
    return stepper(model.parameters(), opt, lambda: F.cross_entropy(
        F.reshape(model(src_t, tin_t), (-1, c["vocab"])), lab))


# ---------------------------------------------------------------------------------------
# 2. Siamese encoder (shared weights applied twice), cosine similarities through sqrt and
#    division, symmetric InfoNCE loss through log_softmax and a diagonal mask.
class Encoder(nn.Module):
    def __init__(self, features, width, out):
        super().__init__()
        self.l1 = nn.Linear(features, width)
        self.n1 = nn.LayerNorm(width)
        self.l2 = nn.Linear(width, width)
        self.l3 = nn.Linear(width, out)

    def forward(self, x):
        x = F.relu(self.n1(self.l1(x)))
        x = x + F.relu(self.l2(x))
        return self.l3(x)


def _normalize(z):
    return z / F.sqrt(F.sum(z * z, axis=1, keepdims=True) + 1e-6)


def _siamese(c):
    rng = np.random.default_rng(0)
    x, _ = cluster_task(c["batch"], (c["features"],))
    noise = rng.standard_normal((c["batch"], c["features"])).astype(np.float32)
    x2 = x + imp.Tensor(0.3 * noise)
    eye = imp.Tensor(np.eye(c["batch"], dtype=np.float32))
    model = Encoder(c["features"], c["width"], c["out"])
    opt = optim.SGD(model.parameters(), 0.05, momentum=0.9)

    def contrastive():
        z1, z2 = _normalize(model(x)), _normalize(model(x2))
        sim = F.matmul(z1, z2, transpose_b=True) * (1.0 / 0.2)
        a = F.sum(F.log_softmax(sim, axis=1) * eye) / c["batch"]
        b = F.sum(F.log_softmax(sim, axis=0) * eye) / c["batch"]
        return -(a + b) * 0.5
    return stepper(model.parameters(), opt, contrastive)


# ---------------------------------------------------------------------------------------
# 3. mixture of experts: a dense layer whose softmax gate weights every expert, then a
#    top-1 layer routing through argmax + equal + where (every expert still computed).
class MoE(nn.Module):
    def __init__(self, width, hidden, experts, top1):
        super().__init__()
        self.top1 = top1
        self.experts = experts
        self.gate = nn.Linear(width, experts)
        self.up = nn.ModuleList([nn.Linear(width, hidden) for _ in range(experts)])
        self.down = nn.ModuleList([nn.Linear(hidden, width) for _ in range(experts)])
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        y = self.norm(x)
        g = F.softmax(self.gate(y), axis=-1)                     # (b, E)
        if self.top1:
            idx = F.argmax(g, axis=1, keepdims=True)              # (b, 1)
            hit = F.equal(idx, F.arange(self.experts, dtype="int32"))
            g = F.where(hit, g, F.zeros_like(g))
        out = None
        for e, (up, down) in enumerate(zip(self.up, self.down)):
            ye = down(F.gelu(up(y))) * g[:, e:e + 1]
            out = ye if out is None else out + ye
        return x + out


class MoENet(nn.Module):
    def __init__(self, features, width, hidden, experts, layers):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.layers = nn.ModuleList([MoE(width, hidden, experts, top1=i % 2 == 1)
                                     for i in range(layers)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = self.inp(x)
        for l in self.layers:
            x = l(x)
        return self.head(x)


# ---------------------------------------------------------------------------------------
# 4. Inception blocks: parallel 1x1, 1x1-3x3, 1x1-5x5 and maxpool-1x1 branches concatenated
class Inception(nn.Module):
    def __init__(self, cin, c1, c3r, c3, c5r, c5, cp):
        super().__init__()
        self.b1 = conv_bn_relu(cin, c1, 1)
        self.b3 = nn.Sequential(conv_bn_relu(cin, c3r, 1), conv_bn_relu(c3r, c3, 3))
        self.b5 = nn.Sequential(conv_bn_relu(cin, c5r, 1), conv_bn_relu(c5r, c5, 5))
        self.bp = conv_bn_relu(cin, cp, 1)

    def forward(self, x):
        pooled = F.max_pool2d(x, 3, stride=1, padding=1)
        return F.concat([self.b1(x), self.b3(x), self.b5(x), self.bp(pooled)], axis=1)


class InceptionNet(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.stem = conv_bn_relu(3, ch)
        self.i1 = Inception(ch, ch, ch, ch * 2, ch // 2, ch // 2, ch // 2)     # -> 4 ch
        self.i2 = Inception(4 * ch, ch, ch, ch * 2, ch // 2, ch // 2, ch // 2)  # -> 4 ch
        self.i3 = Inception(4 * ch, 2 * ch, ch, ch * 2, ch // 2, ch, ch)        # -> 6 ch
        self.head = nn.Linear(6 * ch, 10)

    def forward(self, x):
        x = self.i2(self.i1(self.stem(x)))
        x = self.i3(F.max_pool2d(x, 2))
        return self.head(global_average(x))


# ---------------------------------------------------------------------------------------
# 5. squeeze-and-excitation residual conv net (global average, sigmoid, broadcast multiply)
class SEBlock(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.conv1 = conv_bn_relu(c, c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.fc1 = nn.Linear(c, c // r)
        self.fc2 = nn.Linear(c // r, c)

    def forward(self, x):
        y = self.bn(self.conv2(self.conv1(x)))
        s = F.sigmoid(self.fc2(F.relu(self.fc1(global_average(y)))))    # (n, c)
        y = y * F.expand_dims(F.expand_dims(s, 2), 3)
        return F.relu(x + y)


class SENet(nn.Module):
    def __init__(self, ch, blocks):
        super().__init__()
        self.stem = conv_bn_relu(3, ch)
        self.blocks = nn.Sequential(*[SEBlock(ch) for _ in range(blocks)])
        self.head = nn.Linear(ch, 10)

    def forward(self, x):
        return self.head(global_average(self.blocks(self.stem(x))))


# ---------------------------------------------------------------------------------------
# 6. WaveNet-like: dilated causal 1-D convs (conv2d with H = 1, padded on both sides then
#    sliced), gated tanh * sigmoid of two halves of one conv, residual and summed skips.
class WaveLayer(nn.Module):
    def __init__(self, c, skip, dilation, k=2):
        super().__init__()
        self.pad = dilation * (k - 1)
        self.conv = nn.Conv2d(c, 2 * c, (1, k), padding=(0, self.pad), dilation=(1, dilation))
        self.res = nn.Conv2d(c, c, 1)
        self.skip = nn.Conv2d(c, skip, 1)

    def forward(self, x):
        length = x.shape[3]
        y = self.conv(x)[:, :, :, :length]                       # causal: drop the tail
        f, g = F.split(y, 2, axis=1)
        z = F.tanh(f) * F.sigmoid(g)
        return x + self.res(z), self.skip(z)


class WaveNet(nn.Module):
    def __init__(self, cin, c, skip, layers):
        super().__init__()
        self.inp = nn.Conv2d(cin, c, 1)
        self.layers = nn.ModuleList([WaveLayer(c, skip, 2 ** (i % 6)) for i in range(layers)])
        self.post = nn.Conv2d(skip, skip, 1)
        self.head = nn.Linear(skip, 10)

    def forward(self, x):
        x = self.inp(x)
        total = None
        for l in self.layers:
            x, s = l(x)
            total = s if total is None else total + s
        return self.head(global_average(self.post(F.relu(total))))


# ---------------------------------------------------------------------------------------
# 7. tiny GPT: causal mask applied through F.where, learned position embedding, tied head,
#    next-token loss over every position.
class CausalAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, s, d = x.shape
        h = self.heads
        q, k, v = F.split(self.qkv(x), 3, axis=-1)

        def heads(t):
            return F.transpose(F.reshape(t, (b, s, h, d // h)), (0, 2, 1, 3))
        q, k, v = heads(q), heads(k), heads(v)
        scores = F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(d // h))
        scores = F.where(mask, scores, F.full_like(scores, -1e9))
        w = F.softmax(scores, axis=-1)
        o = F.transpose(F.matmul(w, v), (0, 2, 1, 3))
        return self.proj(F.reshape(o, (b, s, d)))


class GPTBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.n1 = nn.LayerNorm(dim)
        self.attn = CausalAttention(dim, heads)
        self.n2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x, mask):
        x = x + self.attn(self.n1(x), mask)
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, dim, heads, blocks, seq):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(np.random.default_rng(1).standard_normal((seq, dim))
                                .astype(np.float32) * 0.02)
        self.blocks = nn.ModuleList([GPTBlock(dim, heads) for _ in range(blocks)])
        self.norm = nn.LayerNorm(dim)
        self.mask = imp.Tensor(np.tril(np.ones((seq, seq), dtype=bool)))

    def forward(self, ids):
        x = self.emb(ids) + self.pos
        for b in self.blocks:
            x = b(x, self.mask)
        scale = 1.0 / math.sqrt(x.shape[-1])
        return F.matmul(self.norm(x), self.emb.weight, transpose_b=True) * scale


def _gpt(c):
    rng = np.random.default_rng(0)
    start = rng.integers(0, c["vocab"], (c["batch"], 1))
    stride = rng.integers(1, 5, (c["batch"], 1))
    seqs = (start + stride * np.arange(c["seq"] + 1)) % c["vocab"]
    inp = imp.Tensor(seqs[:, :-1].astype(np.int32))
    lab = imp.Tensor(seqs[:, 1:].reshape(-1).astype(np.int32))
    model = GPT(c["vocab"], c["dim"], c["heads"], c["blocks"], c["seq"])
    opt = optim.AdamW(model.parameters(), 2e-3)
    return stepper(model.parameters(), opt, lambda: F.cross_entropy(
        F.reshape(model(inp), (-1, c["vocab"])), lab))


# ---------------------------------------------------------------------------------------
# 8. highway network: x = gate * relu(Wh x) + (1 - gate) * x
class Highway(nn.Module):
    def __init__(self, features, width, depth):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.h = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.t = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = self.inp(x)
        for h, t in zip(self.h, self.t):
            gate = F.sigmoid(t(x) - 1.0)
            x = gate * F.relu(h(x)) + (1.0 - gate) * x
        return self.head(x)


# ---------------------------------------------------------------------------------------
# 9. LayerNorm MLP with AdamW and a global-norm gradient clip computed from the grads
#    (sum of squares, sqrt, minimum) and written back before opt.step.
def _clipmlp(c):
    layers = [nn.Linear(c["features"], c["width"])]
    for _ in range(c["depth"]):
        layers += [nn.LayerNorm(c["width"]), nn.ReLU(), nn.Linear(c["width"], c["width"])]
    model = nn.Sequential(*layers, nn.ReLU(), nn.Linear(c["width"], 10))
    x, labels = cluster_task(c["batch"], (c["features"],))
    params = list(model.parameters())
    opt = optim.AdamW(params, 1e-3, weight_decay=0.05)
    gm = GradManager().attach(params)

    def step():
        with gm:
            loss = F.cross_entropy(model(x), labels)
            gm.backward(loss)
        sq = None
        for p in params:
            s = F.sum(p.grad * p.grad)
            sq = s if sq is None else sq + s
        norm = F.sqrt(sq)
        scale = F.minimum(F.full_like(norm, 1.0), c["max_norm"] / (norm + 1e-6))
        for p in params:
            p.grad = p.grad * scale
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 10. GRU trained with truncated backprop: the sequence in chunks, the hidden state
#     detached between chunks, one `with gm:` and backward per chunk, one opt.step.
class SeqTagger(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.cell = GRUCell(features, hidden)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x, h):
        logits = []
        for xt in F.split(x, x.shape[1], axis=1):
            h = self.cell(F.squeeze(xt, 1), h)
            logits.append(self.head(h))
        return F.concat(logits, axis=0), h


def _tbptt(c):
    x, labels = cluster_task(c["batch"], (c["steps"], c["features"]))
    model = SeqTagger(c["features"], c["hidden"])
    opt = optim.SGD(model.parameters(), 0.02, momentum=0.9)
    gm = GradManager().attach(model.parameters())
    chunks = F.split(x, c["steps"] // c["chunk"], axis=1)
    lab = F.concat([labels] * c["chunk"], axis=0)

    def step():
        h = F.zeros((c["batch"], c["hidden"]))
        total = None
        for xc in chunks:
            with gm:
                logits, h = model(xc, h)
                loss = F.cross_entropy(logits, lab)
                gm.backward(loss)
            h = h.detach()
            total = loss if total is None else total + loss
        opt.step()
        opt.clear_grad()
        return total
    return step


# ---------------------------------------------------------------------------------------
# 11. two backward passes per step: a conv net on two batches, each its own `with gm:` and
#     gm.backward, gradients accumulating into one opt.step.
class SmallConv(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.a = conv_bn_relu(3, ch)
        self.b = conv_bn_relu(ch, ch)
        self.c = conv_bn_relu(ch, 2 * ch)
        self.d = conv_bn_relu(2 * ch, 2 * ch)
        self.head = nn.Linear(2 * ch, 10)

    def forward(self, x):
        x = self.b(self.a(x))
        x = self.d(self.c(F.max_pool2d(x, 2)))
        return self.head(global_average(x))


def _twopass(c):
    shape = (3, c["size"], c["size"])
    x1, l1 = cluster_task(c["batch"], shape, seed=0)
    x2, l2 = cluster_task(c["batch"], shape, seed=1)
    model = SmallConv(c["ch"])
    opt = optim.SGD(model.parameters(), 0.02, momentum=0.9)
    gm = GradManager().attach(model.parameters())

    def step():
        with gm:
            a = F.cross_entropy(model(x1), l1)
            gm.backward(a)
        with gm:
            b = F.cross_entropy(model(x2), l2) * 0.5
            gm.backward(b)
        opt.step()
        opt.clear_grad()
        return a + b
    return step


# ---------------------------------------------------------------------------------------
# 12. setitem inside forward (a): an RNN writes each hidden state into a preallocated
#     buffer (buf[:, t] = h), then attention pooling over the buffer.
class MemWrite(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        self.wx = nn.Linear(features, hidden)
        self.wh = nn.Linear(hidden, hidden, bias=False)
        self.key = nn.Linear(hidden, hidden)
        self.q = nn.Parameter(np.random.default_rng(2).standard_normal((hidden, 1))
                              .astype(np.float32) * 0.1)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        b, steps, _ = x.shape
        xs = self.wx(x)                                           # (b, steps, hidden)
        buf = F.zeros((b, steps, self.hidden))
        h = F.zeros((b, self.hidden))
        for t in range(steps):
            h = F.tanh(xs[:, t] + self.wh(h))
            buf[:, t] = h
        k = F.tanh(self.key(buf))                                 # (b, steps, hidden)
        w = F.softmax(F.matmul(k, self.q), axis=1)                # (b, steps, 1)
        pooled = F.sum(w * buf, axis=1)
        return self.head(pooled)


# 13. setitem inside forward (b): zero-insertion upsampling by a strided write into a
#     zero canvas (canvas[:, :, ::2, ::2] = x), then a conv: a transposed conv by hand,
#     in a small conv autoencoder-classifier.
class Canvas(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.e1 = conv_bn_relu(3, ch)
        self.e2 = conv_bn_relu(ch, 2 * ch)
        self.d1 = conv_bn_relu(2 * ch, ch)
        self.d2 = nn.Conv2d(ch, 3, 3, padding=1)
        self.head = nn.Linear(2 * ch, 10)

    def forward(self, x):
        z = self.e2(F.max_pool2d(self.e1(x), 2))                  # (n, 2ch, h/2, w/2)
        n, c, h, w = z.shape
        canvas = F.zeros((n, c, 2 * h, 2 * w))
        canvas[:, :, ::2, ::2] = z
        r = self.d2(self.d1(canvas))
        return self.head(global_average(z)), r


def _canvas(c):
    shape = (3, c["size"], c["size"])
    x, labels = cluster_task(c["batch"], shape)
    model = Canvas(c["ch"])
    opt = optim.SGD(model.parameters(), 0.02, momentum=0.9)
    def two_losses():
        logits, r = model(x)
        return F.cross_entropy(logits, labels) + F.mse_loss(r, x)
    return stepper(model.parameters(), opt, two_losses)


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "seq2seq": dict(vocab=32, dim=32, hidden=128, seq=16, batch=128),
    "siamese": dict(features=128, width=512, out=64, batch=512),
    "moe": dict(features=64, width=64, hidden=256, experts=4, layers=2, batch=1024),
    "inception": dict(ch=16, batch=8, size=32),
    "senet": dict(ch=32, blocks=3, batch=8, size=32),
    "wavenet": dict(cin=4, c=32, skip=32, layers=6, length=1024, batch=8),
    "gpt": dict(vocab=64, dim=64, heads=4, blocks=2, seq=64, batch=32),
    "highway": dict(features=64, width=256, depth=8, batch=512),
    "clipmlp": dict(features=64, width=512, depth=4, batch=512, max_norm=0.5),
    "tbptt": dict(features=32, hidden=256, steps=24, chunk=8, batch=128),
    "twopass": dict(ch=16, size=32, batch=32),
    "memwrite": dict(features=32, hidden=128, steps=32, batch=128),
    "canvas": dict(ch=16, size=32, batch=32),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {name: dict(sizes, batch=max(2, sizes["batch"] // 8))
           for name, sizes in BENCH_SIZES.items()}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {
    "moe": lambda c: (MoENet(c["features"], c["width"], c["hidden"], c["experts"],
                             c["layers"]), (c["features"],), "adam", 1e-3),
    "inception": lambda c: (InceptionNet(c["ch"]), (3, c["size"], c["size"]), "sgd", 0.02),
    "senet": lambda c: (SENet(c["ch"], c["blocks"]), (3, c["size"], c["size"]), "sgd", 0.02),
    "wavenet": lambda c: (WaveNet(c["cin"], c["c"], c["skip"], c["layers"]),
                          (c["cin"], 1, c["length"]), "sgd", 0.02),
    "highway": lambda c: (Highway(c["features"], c["width"], c["depth"]), (c["features"],),
                          "sgd", 0.02),
    "memwrite": lambda c: (MemWrite(c["features"], c["hidden"]), (c["steps"], c["features"]),
                           "adam", 1e-3),
}

# name -> config -> step(): models with their own training step
STEPS = {
    "seq2seq": _seq2seq,
    "siamese": _siamese,
    "gpt": _gpt,
    "clipmlp": _clipmlp,
    "tbptt": _tbptt,
    "twopass": _twopass,
    "canvas": _canvas,
}


MODEL_SET = ModelSet(__name__, "tests/fresh_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
