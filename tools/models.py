"""The models and the synthetic task that the demo and the DTR benchmark train.

Both models keep, for backward, one tensor that is expensive to recompute (a matmul's or a
convolution's output, which the normalisation's gradient reads) and one that is cheap
(the ReLU after the normalisation), as real networks do: that mix is what DTR exploits.
"""
import numpy as np

import imperative as imp
from imperative import F, nn

# name -> the model's size, its batch and one input's shape
CONFIGS = {
    "mlp": dict(width=256, depth=32, batch=4096, input_shape=(256,)),
    "cnn": dict(channels=32, blocks=12, batch=16, input_shape=(3, 32, 32)),
}
CLASSES = 10


def cluster_task(batch, input_shape, classes=CLASSES, seed=0):
    """Noisy copies of one random template per class: learnable, so the loss visibly falls."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes,) + tuple(input_shape)).astype(np.float32)
    labels = rng.integers(0, classes, batch)
    noise = rng.standard_normal((batch,) + tuple(input_shape)).astype(np.float32)
    return imp.Tensor(centers[labels] + 0.5 * noise), imp.Tensor(labels.astype(np.int32))


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
        return self.head(F.mean(x, axis=(2, 3)))


def build(name, **overrides):
    """(model, x, labels) for a CONFIGS entry; `overrides` change its sizes. Seeded: every
    call builds the same initial weights and data."""
    config = dict(CONFIGS[name], **{k: v for k, v in overrides.items() if v is not None})
    imp.random.seed(0)
    if name == "mlp":
        model = mlp(config["width"], config["depth"])
        shape = (config["width"],)
    else:
        model = ResNet(config["channels"], config["blocks"])
        shape = config["input_shape"]
    x, labels = cluster_task(config["batch"], shape)
    return model, x, labels


def describe(name, **overrides):
    c = dict(CONFIGS[name], **{k: v for k, v in overrides.items() if v is not None})
    if name == "mlp":
        return f"MLP {c['depth']} x (Linear {c['width']} -> LayerNorm -> ReLU), batch {c['batch']}"
    return (f"ResNet {c['blocks']} blocks x {c['channels']} channels, "
            f"batch {c['batch']} x {c['input_shape']}")
