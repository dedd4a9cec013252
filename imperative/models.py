"""A zoo of small, plain models and the synthetic task they learn: what the demo, the DTR
benchmark (`tools/bench_dtr.py`) and the tests train.

The zoo covers the shapes of memory use a memory manager meets in practice, with no model
tuned to it: parameter-heavy and activation-heavy ReLU MLPs, an MLP with LayerNorm, a ResNet,
transformer encoder blocks, a GRU unrolled over 64 steps, a U-Net with long skip
connections, a DenseNet block (growing concatenations) and a CNN trained with Adam, whose
parameters and optimizer state outweigh its activations.

    model, x, labels = build("transformer", batch=8)   # seeded: always the same
    step = trainer("transformer", batch=8)             # ... with its optimizer
    loss = step()                                      # one training step

Every model ends in a classifier over `CLASSES` classes and is trained with cross entropy;
`CONFIGS[name]` holds its default sizes, its optimizer and learning rate. The default sizes
make one unconstrained training step take about 50-400 ms and 20-150 MiB of tensor memory
on a small CPU machine.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager

CLASSES = 10

# name -> default sizes (overridable in build()), optimizer ("sgd": momentum 0.9, or "adam")
# and learning rate
CONFIGS = {
    "relu_wide": dict(width=1024, depth=8, batch=64, optimizer="sgd", lr=0.02),
    "relu_narrow": dict(width=256, depth=16, batch=2048, optimizer="sgd", lr=0.02),
    "mlp": dict(width=256, depth=32, batch=1024, optimizer="sgd", lr=0.02),
    "cnn": dict(channels=32, blocks=8, batch=8, size=32, optimizer="sgd", lr=0.02),
    "transformer": dict(dim=128, heads=4, blocks=4, seq=64, batch=16, optimizer="sgd", lr=0.02),
    "gru": dict(features=32, hidden=128, steps=64, batch=256, optimizer="sgd", lr=0.02),
    "unet": dict(channels=16, levels=3, size=64, batch=8, optimizer="sgd", lr=0.02),
    "densenet": dict(channels=24, growth=12, layers=10, size=32, batch=8, optimizer="sgd", lr=0.02),
    "adam_cnn": dict(channels=32, hidden=1024, size=32, batch=32, optimizer="adam", lr=1e-3),
}

# name -> a one-line description, formatted with the model's config
ABOUT = {
    "relu_wide": "ReLU MLP {depth} x Linear {width} (parameter-heavy), batch {batch}",
    "relu_narrow": "ReLU MLP {depth} x Linear {width} (activation-heavy), batch {batch}",
    "mlp": "MLP {depth} x (Linear {width} -> LayerNorm -> ReLU), batch {batch}",
    "cnn": "ResNet {blocks} blocks x {channels} channels, batch {batch} x (3, {size}, {size})",
    "transformer": "Transformer encoder {blocks} blocks, dim {dim}, {heads} heads, "
                   "batch {batch} x {seq} tokens",
    "gru": "GRU hidden {hidden} unrolled over {steps} steps, batch {batch}",
    "unet": "U-Net {levels} levels from {channels} channels, batch {batch} x (3, {size}, {size})",
    "densenet": "DenseNet block {layers} layers, growth {growth}, batch {batch} x (3, {size}, {size})",
    "adam_cnn": "CNN {channels}-{channels}x2 channels + Linear {hidden} (Adam), "
                "batch {batch} x (3, {size}, {size})",
}


def cluster_task(batch, input_shape, classes=CLASSES, seed=0):
    """Noisy copies of one random template per class: learnable, so the loss visibly falls."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes,) + tuple(input_shape)).astype(np.float32)
    labels = rng.integers(0, classes, batch)
    noise = rng.standard_normal((batch,) + tuple(input_shape)).astype(np.float32)
    return imp.Tensor(centers[labels] + 0.5 * noise), imp.Tensor(labels.astype(np.int32))


# ---------------------------------------------------------------------------------------
# Building blocks


class Lambda(nn.Module):
    """A parameter-free function as a module, so that Sequential can hold it."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def global_average(x):
    """(N, C, H, W) -> (N, C): the mean over the image."""
    return F.mean(x, axis=(2, 3))


def max_pool2(x):
    """2x2 max pooling with stride 2: halves the image."""
    return F.max_pool2d(x, 2)


def upsample_nearest(x, factor=2):
    """(N, C, H, W) -> (N, C, factor H, factor W), each pixel repeated (nearest neighbour)."""
    n, c, h, w = x.shape
    wide = F.broadcast_to(F.expand_dims(x, (3, 5)), (n, c, h, factor, w, factor))
    return F.reshape(wide, (n, c, h * factor, w * factor))


def conv_bn_relu(cin, cout, kernel=3):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, padding=kernel // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


# ---------------------------------------------------------------------------------------
# The models


def relu_mlp(width, depth, classes=CLASSES):
    """`depth` blocks of Linear -> ReLU, then a linear classifier."""
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


def mlp(width, depth, classes=CLASSES):
    """`depth` blocks of Linear -> LayerNorm -> ReLU, then a linear classifier."""
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with batch norm, and the identity shortcut (ResNet's basic block)."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class ResNet(nn.Module):
    """A small ResNet: a 3x3 stem, `blocks` residual blocks at one resolution, global
    average pooling and a linear classifier."""

    def __init__(self, channels, blocks, classes=CLASSES):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.blocks = nn.Sequential(*[ResidualBlock(channels) for _ in range(blocks)])
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.stem(x))))
        return self.head(global_average(x))


class SelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention over (batch, tokens, dim)."""

    def __init__(self, dim, heads):
        super().__init__()
        if dim % heads:
            raise ValueError(f"SelfAttention: dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        # (b, s, 3 d) -> three (b, h, s, d / h): one projection for queries, keys and values
        qkv = F.transpose(F.reshape(self.qkv(x), (b, s, 3, h, d // h)), (2, 0, 3, 1, 4))
        q, k, v = (F.squeeze(t, 0) for t in F.split(qkv, 3, axis=0))
        weights = F.softmax(F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(d // h)), axis=-1)
        mixed = F.transpose(F.matmul(weights, v), (0, 2, 1, 3))        # (b, s, h, d / h)
        return self.out(F.reshape(mixed, (b, s, d)))


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block: x + attention(LN(x)), then x + MLP(LN(x)) with a
    4x wide GELU hidden layer."""

    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attention = SelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), Lambda(F.gelu), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    """`blocks` encoder blocks over (batch, tokens, dim) inputs, a final LayerNorm, the mean
    over tokens and a linear classifier."""

    def __init__(self, dim, heads, blocks, classes=CLASSES):
        super().__init__()
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(blocks)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        return self.head(F.mean(self.norm(self.blocks(x)), axis=1))


class GRU(nn.Module):
    """A GRU layer unrolled over the sequence (batch, steps, features); returns the last
    hidden state. The input's part of the gates is one matmul over all steps."""

    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        self.input_gates = nn.Linear(features, 3 * hidden)
        self.hidden_gates = nn.Linear(hidden, 3 * hidden)

    def forward(self, x):
        batch, steps, _ = x.shape
        h = F.zeros((batch, self.hidden))
        for gates in F.split(self.input_gates(x), steps, axis=1):
            x_reset, x_update, x_new = F.split(F.squeeze(gates, 1), 3, axis=1)
            h_reset, h_update, h_new = F.split(self.hidden_gates(h), 3, axis=1)
            reset = F.sigmoid(x_reset + h_reset)
            update = F.sigmoid(x_update + h_update)
            new = F.tanh(x_new + reset * h_new)
            h = new + update * (h - new)                   # (1 - update) new + update h
        return h


def gru_classifier(features, hidden, classes=CLASSES):
    return nn.Sequential(GRU(features, hidden), nn.Linear(hidden, classes))


class UNet(nn.Module):
    """A U-Net: `levels` times (max-pool, conv doubling the channels) down, then as many
    times (nearest upsampling, concatenation with the skip from the same resolution, conv)
    up; the skips from the first levels live across the whole network. Classifies by the
    mean of the last feature map."""

    def __init__(self, channels, levels, classes=CLASSES):
        super().__init__()
        widths = [channels * 2 ** i for i in range(levels + 1)]
        self.stem = conv_bn_relu(3, widths[0])
        self.down = nn.Sequential(*[conv_bn_relu(widths[i], widths[i + 1]) for i in range(levels)])
        self.up = nn.Sequential(*[conv_bn_relu(widths[i + 1] + widths[i], widths[i])
                                  for i in reversed(range(levels))])
        self.head = nn.Linear(widths[0], classes)

    def forward(self, x):
        x, skips = self.stem(x), []
        for down in self.down:
            skips.append(x)
            x = down(max_pool2(x))
        for up, skip in zip(self.up, reversed(skips)):
            x = up(F.concat([upsample_nearest(x), skip], axis=1))
        return self.head(global_average(x))


class DenseNet(nn.Module):
    """A stem and one dense block: each layer (batch norm, ReLU, 3x3 conv adding `growth`
    channels) reads the concatenation of every earlier feature map, so the concatenations
    grow with depth; then batch norm, ReLU, global average pooling and a classifier."""

    def __init__(self, channels, growth, layers, classes=CLASSES):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.layers = nn.Sequential(*[
            nn.Sequential(nn.BatchNorm2d(channels + i * growth), nn.ReLU(),
                          nn.Conv2d(channels + i * growth, growth, 3, padding=1, bias=False))
            for i in range(layers)])
        width = channels + layers * growth
        self.norm = nn.BatchNorm2d(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        features = [self.stem(x)]
        for layer in self.layers:
            features.append(layer(F.concat(features, axis=1)))
        x = F.relu(self.norm(F.concat(features, axis=1)))
        return self.head(global_average(x))


def small_cnn(channels, hidden, size, classes=CLASSES):
    """Two conv-ReLU-maxpool stages (channels, 2 channels) and a wide fully connected
    hidden layer: most of the parameters are in the first Linear."""
    flat = 2 * channels * (size // 4) ** 2
    return nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1), nn.ReLU(), Lambda(max_pool2),
        nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(), Lambda(max_pool2),
        Lambda(lambda x: F.flatten(x, 1)),
        nn.Linear(flat, hidden), nn.ReLU(), nn.Linear(hidden, classes))


# name -> config -> (the model, one input's shape)
_MAKERS = {
    "relu_wide": lambda c: (relu_mlp(c["width"], c["depth"]), (c["width"],)),
    "relu_narrow": lambda c: (relu_mlp(c["width"], c["depth"]), (c["width"],)),
    "mlp": lambda c: (mlp(c["width"], c["depth"]), (c["width"],)),
    "cnn": lambda c: (ResNet(c["channels"], c["blocks"]), (3, c["size"], c["size"])),
    "transformer": lambda c: (Transformer(c["dim"], c["heads"], c["blocks"]), (c["seq"], c["dim"])),
    "gru": lambda c: (gru_classifier(c["features"], c["hidden"]), (c["steps"], c["features"])),
    "unet": lambda c: (UNet(c["channels"], c["levels"]), (3, c["size"], c["size"])),
    "densenet": lambda c: (DenseNet(c["channels"], c["growth"], c["layers"]), (3, c["size"], c["size"])),
    "adam_cnn": lambda c: (small_cnn(c["channels"], c["hidden"], c["size"]), (3, c["size"], c["size"])),
}


# ---------------------------------------------------------------------------------------
# Using the zoo


def config(name, **overrides):
    """CONFIGS[name] with `overrides` (None keeps the default); an unknown name or size is
    a ValueError."""
    if name not in CONFIGS:
        raise ValueError(f"unknown model {name!r}; the zoo has {', '.join(CONFIGS)}")
    unknown = set(overrides) - set(CONFIGS[name])
    if unknown:
        raise ValueError(f"model {name!r} has no setting {', '.join(sorted(unknown))}; "
                         f"it has {', '.join(CONFIGS[name])}")
    return dict(CONFIGS[name], **{k: v for k, v in overrides.items() if v is not None})


def build(name, **overrides):
    """(model, x, labels) for a CONFIGS entry; `overrides` change its sizes. Seeded: every
    call builds the same initial weights and data."""
    c = config(name, **overrides)
    imp.random.seed(0)
    model, input_shape = _MAKERS[name](c)
    x, labels = cluster_task(c["batch"], input_shape)
    return model, x, labels


def describe(name, **overrides):
    """One line naming the model and its sizes."""
    return ABOUT[name].format(**config(name, **overrides))


def optimizer(name, params, lr=None):
    """The optimizer the model's config names, at its learning rate unless `lr` is given."""
    c = config(name)
    lr = c["lr"] if lr is None else lr
    if c["optimizer"] == "adam":
        return optim.Adam(params, lr)
    return optim.SGD(params, lr, momentum=0.9)


def trainer(name, lr=None, **overrides):
    """A fresh, seeded model of the zoo with its data and optimizer; returns `step()`, which
    runs one training step (forward, cross entropy, backward, update) and returns the loss."""
    model, x, labels = build(name, **overrides)
    step = training_step(model, optimizer(name, model.parameters(), lr))
    return lambda: step(x, labels)


def training_step(model, opt):
    """`step(x, labels)`: one training step of `model` with `opt` (forward, cross entropy,
    backward, update); returns the loss."""
    gm = GradManager().attach(model.parameters())

    def step(x, labels):
        with gm:
            loss = F.cross_entropy(model(x), labels)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss

    return step
