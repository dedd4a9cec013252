"""Fifteen models outside imperative.models' zoo, on the public API only, for the memory
manager's tests (tests/test_memory_unseen_models.py) and `tools/bench_dtr.py --unseen`: its
rules are tuned on none of the first ten. An LSTM whose four gates are views of one
product, a VGG stack, a bottleneck ResNet, an MLP-Mixer, attention over a long sequence, a
deep narrow GELU MLP, a conv autoencoder with two losses, one block applied several times,
an embedding bag, a 1-D conv net; then (session 33, see below) a SwiGLU MLP, a dropout MLP,
a vision transformer, a MobileNet-like depthwise conv net and a tied embedding. Sizes are
small (a step takes tens of milliseconds); `trainer(name, **overrides)` scales them."""
import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.models import (EncoderBlock, Lambda, cluster_task, conv_bn_relu,
                               global_average, max_pool2, training_step, upsample_nearest)


# 1. LSTM unrolled, per-step input matmul
class LSTM(nn.Module):
    """An LSTM cell unrolled over the sequence; each step's four gates are views (a split)
    of one pre-activation, the sum of two products."""

    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        self.wx = nn.Linear(features, 4 * hidden)
        self.wh = nn.Linear(hidden, 4 * hidden, bias=False)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        b, steps, _ = x.shape
        h = F.zeros((b, self.hidden))
        c = F.zeros((b, self.hidden))
        for xt in F.split(x, steps, axis=1):
            g = self.wx(F.squeeze(xt, 1)) + self.wh(h)
            i, f, gg, o = F.split(g, 4, axis=1)
            c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(gg)
            h = F.sigmoid(o) * F.tanh(c)
        return self.head(h)


# 2. VGG-like plain conv stack with max pools
def vgg(ch, classes=10):
    layers, cin = [], 3
    for mult in (1, 2, 4):
        cout = ch * mult
        layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(),
                   nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(), Lambda(max_pool2)]
        cin = cout
    return nn.Sequential(*layers, Lambda(global_average), nn.Linear(cin, classes))


# 3. bottleneck ResNet
class Bottleneck(nn.Module):
    def __init__(self, c, mid):
        super().__init__()
        self.a = conv_bn_relu(c, mid, 1)
        self.b = conv_bn_relu(mid, mid, 3)
        self.c = nn.Conv2d(mid, c, 1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.bn(self.c(self.b(self.a(x)))))


class BottleneckNet(nn.Module):
    def __init__(self, c, mid, blocks):
        super().__init__()
        self.stem = conv_bn_relu(3, c)
        self.blocks = nn.Sequential(*[Bottleneck(c, mid) for _ in range(blocks)])
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        return self.head(global_average(self.blocks(self.stem(x))))


# 4. MLP-Mixer over (batch, tokens, channels)
class MixerBlock(nn.Module):
    def __init__(self, tokens, ch):
        super().__init__()
        self.n1 = nn.LayerNorm(ch)
        self.t1 = nn.Linear(tokens, 4 * tokens)
        self.t2 = nn.Linear(4 * tokens, tokens)
        self.n2 = nn.LayerNorm(ch)
        self.c1 = nn.Linear(ch, 4 * ch)
        self.c2 = nn.Linear(4 * ch, ch)

    def forward(self, x):
        y = F.transpose(self.n1(x), (0, 2, 1))             # (b, ch, tokens)
        y = self.t2(F.gelu(self.t1(y)))
        x = x + F.transpose(y, (0, 2, 1))
        return x + self.c2(F.gelu(self.c1(self.n2(x))))


class TokenStack(nn.Module):
    """Blocks over (batch, tokens, dim), a final LayerNorm, the mean over the tokens and a
    linear head."""

    def __init__(self, blocks, dim):
        super().__init__()
        self.blocks = nn.Sequential(*blocks)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(F.mean(self.norm(self.blocks(x)), axis=1))


def mixer(tokens, ch, blocks):
    return TokenStack([MixerBlock(tokens, ch) for _ in range(blocks)], ch)


# 5. transformer with long sequence: attention matrices dominate
def long_transformer(dim, heads, blocks):
    return TokenStack([EncoderBlock(dim, heads) for _ in range(blocks)], dim)


# 6. deep narrow MLP with many tiny ops, GELU and residuals
class DeepNarrow(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for l in self.layers:
            x = x + F.gelu(l(x)) * 0.1
        return self.head(x)


# 7. conv autoencoder, loss = CE on bottleneck classifier + MSE reconstruction
class AutoEncoder(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.e1 = conv_bn_relu(3, ch)
        self.e2 = conv_bn_relu(ch, 2 * ch)
        self.e3 = nn.Conv2d(2 * ch, 8, 3, padding=1)        # bottleneck at 1/4 res, 8 ch
        self.d1 = conv_bn_relu(8, 2 * ch)
        self.d2 = conv_bn_relu(2 * ch, ch)
        self.d3 = nn.Conv2d(ch, 3, 3, padding=1)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        z = self.e3(max_pool2(self.e2(max_pool2(self.e1(x)))))
        r = self.d3(self.d2(upsample_nearest(self.d1(upsample_nearest(z)))))
        return self.head(global_average(z)), r


# 8. weight sharing: one block applied `times` times
class Shared(nn.Module):
    def __init__(self, width, times):
        super().__init__()
        self.times = times
        self.norm = nn.LayerNorm(width)
        self.l1 = nn.Linear(width, 2 * width)
        self.l2 = nn.Linear(2 * width, width)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for _ in range(self.times):
            x = x + self.l2(F.gelu(self.l1(self.norm(x))))
        return self.head(x)


# 9. big embedding parameter (gather) + small activations
class EmbedBag(nn.Module):
    def __init__(self, vocab, dim, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.l1 = nn.Linear(dim, hidden)
        self.head = nn.Linear(hidden, 10)

    def forward(self, ids):
        e = F.mean(self.emb(ids), axis=1)
        return self.head(F.relu(self.l1(e)))


# 10. 1-D conv net over long sequences (conv2d with H = 1)
class Conv1DBlock(nn.Module):
    def __init__(self, c, k):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, (1, k), padding=(0, k // 2), bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, (1, k), padding=(0, k // 2), bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class Conv1DNet(nn.Module):
    def __init__(self, cin, c, k, blocks):
        super().__init__()
        self.stem = nn.Conv2d(cin, c, (1, k), padding=(0, k // 2))
        self.blocks = nn.Sequential(*[Conv1DBlock(c, k) for _ in range(blocks)])
        self.head = nn.Linear(c, 10)

    def forward(self, x):
        x = self.stem(x)
        for i, b in enumerate(self.blocks):
            x = b(x)
            if i % 2 == 1:
                x = F.max_pool2d(x, (1, 2))
        return self.head(global_average(x))


# The five below were added in session 33, after the rules above had been tuned: the
# first two showed that session's defects (views of one storage that could not be evicted
# apart, and dropout masks nothing can recompute), and its fixes were measured on them.


# 11. SwiGLU MLP: each layer's product split in two halves (views of one storage), both
#     kept for the backward pass
class GatedMLP(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(width) for _ in range(depth)])
        self.up = nn.ModuleList([nn.Linear(width, 4 * width) for _ in range(depth)])
        self.down = nn.ModuleList([nn.Linear(2 * width, width) for _ in range(depth)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for norm, up, down in zip(self.norms, self.up, self.down):
            gate, value = F.split(up(norm(x)), 2, axis=-1)
            x = x + down(F.silu(gate) * value)
        return self.head(x)


# 12. MLP with dropout after every ReLU (its masks are RNG values: never recomputed)
class DropoutMLP(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), 0.2)
        return self.head(x)


# 13. vision transformer: patches cut from the image by a reshape and a transpose
class PatchTransformer(nn.Module):
    def __init__(self, patch, dim, heads, blocks):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(3 * patch * patch, dim)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(blocks)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        b, c, h, w = x.shape
        p = self.patch
        x = F.transpose(F.reshape(x, (b, c, h // p, p, w // p, p)), (0, 2, 4, 1, 3, 5))
        x = self.embed(F.reshape(x, (b, (h // p) * (w // p), c * p * p)))
        return self.head(F.mean(self.norm(self.blocks(x)), axis=1))


# 14. MobileNet-like: depthwise (one group a channel) and pointwise convolutions, ReLU6
class DepthwiseBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.depthwise = nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin,
                                   bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pointwise = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = F.clip(self.bn1(self.depthwise(x)), 0.0, 6.0)
        return F.clip(self.bn2(self.pointwise(x)), 0.0, 6.0)


class MobileNet(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 3, padding=1)
        plan = [(ch, 2 * ch, 1), (2 * ch, 2 * ch, 1), (2 * ch, 4 * ch, 2), (4 * ch, 4 * ch, 1),
                (4 * ch, 8 * ch, 2)]
        self.blocks = nn.Sequential(*[DepthwiseBlock(*p) for p in plan])
        self.head = nn.Linear(8 * ch, 10)

    def forward(self, x):
        return self.head(global_average(self.blocks(F.relu(self.stem(x)))))


# 15. tied embedding: the table embeds the tokens and, transposed, scores the vocabulary
class TiedEmbedding(nn.Module):
    def __init__(self, vocab, dim, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.l1 = nn.Linear(dim, hidden)
        self.l2 = nn.Linear(hidden, dim)

    def forward(self, ids):
        e = self.emb(ids)
        h = F.mean(e + self.l2(F.gelu(self.l1(e))), axis=1)
        return F.matmul(h, self.emb.weight, transpose_b=True)


CONFIGS = {
    "lstm": dict(features=16, hidden=32, steps=16, batch=32),
    "vgg": dict(ch=8, batch=4, size=32),
    "bottleneck": dict(c=32, mid=8, blocks=3, batch=4, size=16),
    "mixer": dict(tokens=16, ch=32, blocks=2, batch=8),
    "longattn": dict(dim=32, heads=2, blocks=1, seq=128, batch=2),
    "deepnarrow": dict(width=32, depth=24, batch=256),
    "autoenc": dict(ch=8, batch=4, size=32),
    "shared": dict(width=64, times=4, batch=128),
    "embed": dict(vocab=5000, dim=32, hidden=64, seq=16, batch=64),
    "conv1d": dict(cin=4, c=16, k=9, blocks=4, length=512, batch=4),
    "gated": dict(width=32, depth=4, batch=64),
    "dropout": dict(width=32, depth=4, batch=64),
    "vit": dict(patch=4, dim=32, heads=2, blocks=1, batch=4, size=16),
    "mobile": dict(ch=8, batch=4, size=16),
    "tied": dict(vocab=500, dim=16, hidden=32, seq=8, batch=16),
}


def _embedding_task(c):
    """Token ids whose range depends on the class, so that the bag can learn it."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, c["batch"])
    span = c["vocab"] // 10
    ids = labels[:, None] * span + rng.integers(0, span, (c["batch"], c["seq"]))
    return imp.Tensor(ids.astype(np.int32)), imp.Tensor(labels.astype(np.int32))


BUILDERS = {
    "lstm": lambda c: (LSTM(c["features"], c["hidden"]), (c["steps"], c["features"])),
    "vgg": lambda c: (vgg(c["ch"]), (3, c["size"], c["size"])),
    "bottleneck": lambda c: (BottleneckNet(c["c"], c["mid"], c["blocks"]),
                             (3, c["size"], c["size"])),
    "mixer": lambda c: (mixer(c["tokens"], c["ch"], c["blocks"]), (c["tokens"], c["ch"])),
    "longattn": lambda c: (long_transformer(c["dim"], c["heads"], c["blocks"]),
                           (c["seq"], c["dim"])),
    "deepnarrow": lambda c: (DeepNarrow(c["width"], c["depth"]), (c["width"],)),
    "autoenc": lambda c: (AutoEncoder(c["ch"]), (3, c["size"], c["size"])),
    "shared": lambda c: (Shared(c["width"], c["times"]), (c["width"],)),
    "embed": lambda c: (EmbedBag(c["vocab"], c["dim"], c["hidden"]), None),
    "conv1d": lambda c: (Conv1DNet(c["cin"], c["c"], c["k"], c["blocks"]),
                         (c["cin"], 1, c["length"])),
    "gated": lambda c: (GatedMLP(c["width"], c["depth"]), (c["width"],)),
    "dropout": lambda c: (DropoutMLP(c["width"], c["depth"]), (c["width"],)),
    "vit": lambda c: (PatchTransformer(c["patch"], c["dim"], c["heads"], c["blocks"]),
                      (3, c["size"], c["size"])),
    "mobile": lambda c: (MobileNet(c["ch"]), (3, c["size"], c["size"])),
    "tied": lambda c: (TiedEmbedding(c["vocab"], c["dim"], c["hidden"]), None),
}


# sizes for tools/bench_dtr.py --unseen: P of 5-50 MiB, steps of tens of milliseconds
BENCH_SIZES = {
    "lstm": dict(batch=1024, hidden=64, steps=24),
    "vgg": dict(ch=16, batch=16),
    "bottleneck": dict(c=64, mid=16, blocks=4, batch=8, size=32),
    "mixer": dict(tokens=64, ch=64, blocks=4, batch=32),
    "longattn": dict(dim=64, heads=4, blocks=2, seq=256, batch=4),
    "deepnarrow": dict(width=128, depth=24, batch=1024),
    "autoenc": dict(ch=16, batch=16, size=64),
    "shared": dict(width=256, times=6, batch=512),
    "embed": dict(vocab=50000, dim=64, hidden=256, seq=64, batch=256),
    "conv1d": dict(cin=4, c=32, k=9, blocks=6, length=2048, batch=8),
    "gated": dict(width=128, depth=8, batch=1024),
    "dropout": dict(width=256, depth=6, batch=1024),
    "vit": dict(patch=4, dim=64, heads=4, blocks=2, batch=16, size=32),
    "mobile": dict(ch=16, batch=16, size=32),
    "tied": dict(vocab=5000, dim=64, hidden=128, seq=32, batch=256),
}


def bench_trainer(name, lr=None, batch=None):
    """`trainer` at BENCH_SIZES, with the zoo trainer's signature (imperative/demo.py's runs
    call it so; `lr` is the model's own)."""
    return trainer(name, **dict(BENCH_SIZES[name], **({"batch": batch} if batch else {})))


def bench_describe(name):
    sizes = ", ".join(f"{k} {v}" for k, v in BENCH_SIZES[name].items())
    return f"{name} (tests/unseen_models.py; {sizes})"


def trainer(name, **overrides):
    """A training step of model `name` on fixed data (the same at every call): returns
    the loss. Seeded, so that two trainers of one name give the same losses."""
    c = dict(CONFIGS[name], **overrides)
    imp.random.seed(0)
    model, shape = BUILDERS[name](c)
    x, labels = _embedding_task(c) if shape is None else cluster_task(c["batch"], shape)
    if name in ("mixer", "vit", "tied"):
        opt = optim.Adam(model.parameters(), 1e-3)
    else:
        lr = 0.005 if name in ("deepnarrow", "shared", "gated") else 0.02
        opt = optim.SGD(model.parameters(), lr, momentum=0.9)
    if name != "autoenc":
        step = training_step(model, opt)
        return lambda: step(x, labels)
    gm = GradManager().attach(model.parameters())

    def two_losses():
        with gm:
            logits, reconstruction = model(x)
            loss = F.cross_entropy(logits, labels) + F.mse_loss(reconstruction, x)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return two_losses
