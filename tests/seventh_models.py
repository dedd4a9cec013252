"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout,sixth}_models.py, written in session 44 by a helper that
had not read the memory manager: gradient accumulation (four micro-batches, each its own
forward and backward pass adding into .grad, one optimizer step), LoRA (a frozen
transformer whose weights are not attached, trainable low-rank adapters), a CTC loss (the
forward algorithm's logsumexp recursion over every frame), a spiking network of leaky
integrate-and-fire neurons (a surrogate gradient through a straight-through detach, long
chains of small elementwise ops), a stacked hourglass (recursive encoder-decoders with a
loss after each stack), knowledge distillation (a larger teacher's forward outside the
recording, a student trained on KL + cross entropy), a hypernetwork (the matrices of a
target MLP generated row by row by another MLP, one set per task, each task's group of the
batch through its own), a Conformer (macaron feed-forwards, self-attention, a depthwise
conv module), a deep-equilibrium-like model (fixed-point iterations outside the
recording, then a few with gradients) and a Mamba-like selective scan (input-dependent
decays, a recurrence over the sequence).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/heldout_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.models import (Lambda, cluster_task, conv_bn_relu, global_average,
                               training_step, upsample_nearest)
from model_sets import ModelSet, stepper
from model_sets import attention as _attention

NEG = -1e30      # log(0) for the dynamic programs: finite, so that no inf - inf makes a NaN


# ---------------------------------------------------------------------------------------
# helpers

def _mlp(sizes, act=nn.ReLU):
    """Linear layers of `sizes` with `act` between them."""
    layers = [m for a, b in zip(sizes, sizes[1:]) for m in (nn.Linear(a, b), act())]
    return nn.Sequential(*layers[:-1])


def _logsumexp(t, axis):
    """log(sum(exp(t))) along `axis`, shifted by the (detached) max for stability."""
    m = F.max(t, axis=axis, keepdims=True).detach()
    return F.squeeze(m, axis) + F.log(F.sum(F.exp(t - m), axis=axis))


def _time_conv(conv, x, causal=False):
    """A Conv2d with a (1, k) kernel along the sequence of (b, s, c): to (b, c, 1, s) and
    back; `causal` pads k - 1 zeros on the left instead of the conv's own padding."""
    y = F.expand_dims(F.transpose(x, (0, 2, 1)), 2)
    if causal:
        k = conv.weight.shape[-1]
        y = F.concat([F.zeros(y.shape[:3] + (k - 1,)), y], axis=3)
    return F.transpose(F.squeeze(conv(y), 2), (0, 2, 1))


# ---------------------------------------------------------------------------------------
# 1. gradient accumulation: a conv net with batch norm; the batch is cut into `micro`
#    fixed micro-batches, each its own `with gm:` forward and backward (loss / micro),
#    the gradients adding up in .grad; one SGD step after the last. Returns the summed
#    loss.
class AccumNet(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.body = nn.Sequential(conv_bn_relu(3, ch), conv_bn_relu(ch, ch), nn.MaxPool2d(2),
                                  conv_bn_relu(ch, 2 * ch), conv_bn_relu(2 * ch, 2 * ch),
                                  nn.MaxPool2d(2), conv_bn_relu(2 * ch, 4 * ch))
        self.head = nn.Linear(4 * ch, 10)

    def forward(self, x):
        return self.head(global_average(self.body(x)))


def _gradaccum(c):
    m = c["micro"]
    x, labels = cluster_task(c["batch"] * m, (3, c["size"], c["size"]))
    chunks = list(zip(F.split(x, m, axis=0), F.split(labels, m, axis=0)))
    model = AccumNet(c["ch"])
    gm = GradManager().attach(model.parameters())
    opt = optim.SGD(model.parameters(), 0.02, momentum=0.9)

    def step():
        total = None
        for xb, yb in chunks:
            with gm:
                loss = F.cross_entropy(model(xb), yb) * (1.0 / m)
                gm.backward(loss)
            total = loss if total is None else total + loss
        opt.step()
        opt.clear_grad()
        return total
    return step


# ---------------------------------------------------------------------------------------
# 2. LoRA: a pre-norm transformer whose every Linear (input, qkv, projection, MLP) is
#    frozen and has a trainable rank-r adapter beside it, W x + (alpha / r) B A x with B
#    zero at the start; only the adapters and the classifier are attached to the
#    GradManager and the optimizer, so the base weights get no gradient.
class LoRALinear(nn.Module):
    def __init__(self, a, b, rank, alpha):
        super().__init__()
        self.base = nn.Linear(a, b)
        self.down = nn.Parameter(imp.random.normal(0, 1.0 / math.sqrt(a), (rank, a)))
        self.up = nn.Parameter(np.zeros((b, rank), np.float32))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.down), self.up) * self.scale


class LoRABlock(nn.Module):
    def __init__(self, dim, heads, rank, alpha):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = LoRALinear(dim, 3 * dim, rank, alpha)
        self.proj = LoRALinear(dim, dim, rank, alpha)
        self.fc1 = LoRALinear(dim, 4 * dim, rank, alpha)
        self.fc2 = LoRALinear(4 * dim, dim, rank, alpha)

    def forward(self, x):
        q, k, v = F.split(self.qkv(self.n1(x)), 3, axis=-1)
        x = x + self.proj(_attention(q, k, v, self.heads))
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class LoRATransformer(nn.Module):
    def __init__(self, features, dim, heads, blocks, rank, alpha):
        super().__init__()
        self.inp = LoRALinear(features, dim, rank, alpha)
        self.blocks = nn.Sequential(*[LoRABlock(dim, heads, rank, alpha) for _ in range(blocks)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(F.mean(self.norm(self.blocks(self.inp(x))), axis=1))

    def trainable(self):
        return [p for name, p in self.named_parameters()
                if name.endswith((".down", ".up")) or name.startswith("head.")]


def _lora(c):
    x, labels = cluster_task(c["batch"], (c["seq"], c["features"]))
    model = LoRATransformer(c["features"], c["dim"], c["heads"], c["blocks"], c["rank"], 16.0)
    params = model.trainable()
    opt = optim.Adam(params, 2e-3)
    return stepper(params, opt, lambda: F.cross_entropy(model(x), labels))


# ---------------------------------------------------------------------------------------
# 3. CTC: a 1-D conv encoder over frames gives per-frame log-probabilities over the
#    vocabulary (0 the blank); a one-hot batched product picks those of each sample's
#    extended label sequence (blank, l1, blank, l2, ..., blank), and the forward
#    algorithm runs over every frame: alpha_t(s) = logsumexp(alpha_{t-1}(s), s - 1, and
#    s - 2 where the skip is allowed) + the frame's log-probability; the loss is
#    -logsumexp of the last two states, per frame. The frames are noisy templates of the
#    labels, each held 1-3 frames, blanks between some.
def _ctc_data(c, rng):
    b, t, v, n = c["batch"], c["frames"], c["vocab"], c["labels"]
    templates = rng.standard_normal((v, c["features"])).astype(np.float32)
    labels = rng.integers(1, v, (b, n))
    frames = np.zeros((b, t), np.int64)
    for i in range(b):
        seq = []
        for j, lab in enumerate(labels[i]):
            if rng.random() < 0.3 or (j and lab == labels[i, j - 1]):
                seq.append(0)
            seq += [lab] * rng.integers(1, 4)
        assert len(seq) <= t, "frames must hold 4 per label"
        frames[i, :len(seq)] = seq
    x = templates[frames] + 0.8 * rng.standard_normal((b, t, c["features"]))
    s = 2 * n + 1
    ext = np.zeros((b, s), np.int64)
    ext[:, 1::2] = labels
    onehot = np.zeros((b, v, s), np.float32)
    onehot[np.arange(b)[:, None], ext, np.arange(s)[None, :]] = 1.0
    skip = np.full((b, s), NEG, np.float32)
    skip[:, 2:] = np.where((ext[:, 2:] != 0) & (ext[:, 2:] != ext[:, :-2]), 0.0, NEG)
    return (imp.Tensor(x.astype(np.float32)), imp.Tensor(onehot), imp.Tensor(skip))


class CTCEncoder(nn.Module):
    def __init__(self, features, hidden, vocab, k):
        super().__init__()
        self.c1 = nn.Conv2d(features, hidden, (1, k), padding=(0, k // 2))
        self.c2 = nn.Conv2d(hidden, hidden, (1, k), padding=(0, k // 2))
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        h = F.relu(_time_conv(self.c1, x))
        h = h + F.relu(_time_conv(self.c2, h))
        return F.log_softmax(self.out(h), axis=-1)             # (b, frames, vocab)


def _ctc_loss(logp, onehot, skip):
    b, t, _ = logp.shape
    s = onehot.shape[2]
    emit = F.split(F.matmul(logp, onehot), t, axis=1)          # t x (b, 1, s)
    start = imp.Tensor(np.where(np.arange(s) < 2, 0.0, NEG).astype(np.float32))
    pad = F.full((b, 2), NEG)
    alpha = F.squeeze(emit[0], 1) + start
    for e in emit[1:]:
        shifted = F.concat([pad, alpha], axis=1)               # alpha(s - 2), alpha(s - 1)
        prev = F.stack([alpha, shifted[:, 1:s + 1], shifted[:, :s] + skip], axis=0)
        alpha = _logsumexp(prev, 0) + F.squeeze(e, 1)
    return -F.mean(_logsumexp(alpha[:, s - 2:], 1)) * (1.0 / t)


def _ctc(c):
    x, onehot, skip = _ctc_data(c, np.random.default_rng(19))
    model = CTCEncoder(c["features"], c["hidden"], c["vocab"], 5)
    opt = optim.Adam(model.parameters(), 3e-3)
    return stepper(model.parameters(), opt, lambda: _ctc_loss(model(x), onehot, skip))


# ---------------------------------------------------------------------------------------
# 4. spiking network: two layers of leaky integrate-and-fire neurons over `steps` time
#    steps (v <- beta v + input - threshold * last spike; a spike where v > threshold)
#    fed the same input current each step, and a leaky non-spiking readout averaged over
#    time. The spike's gradient is a sigmoid's (the surrogate): spike = sg + (step - sg)
#    detached.
def _spike(v, sharpness=5.0):
    sg = F.sigmoid(sharpness * (v - 1.0))
    return sg + ((v > 1.0).astype("float32") - sg).detach()


class SpikingNet(nn.Module):
    def __init__(self, features, hidden, steps, beta):
        super().__init__()
        self.steps, self.beta, self.hidden = steps, beta, hidden
        self.fc1, self.fc2 = nn.Linear(features, hidden), nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 10)

    def forward(self, x):
        b, beta = x.shape[0], self.beta
        current = self.fc1(x)
        v1 = v2 = s1 = s2 = F.zeros((b, self.hidden))
        vo, total = F.zeros((b, 10)), None
        for _ in range(self.steps):
            v1 = beta * v1 + current - s1
            s1 = _spike(v1)
            v2 = beta * v2 + self.fc2(s1) - s2
            s2 = _spike(v2)
            vo = beta * vo + self.out(s2)
            total = vo if total is None else total + vo
        return total * (1.0 / self.steps)


# ---------------------------------------------------------------------------------------
# 5. stacked hourglass: each hourglass is recursive (a skip branch at this resolution, a
#    max-pooled branch through the next level, upsampled and added); after every stack a
#    1x1 conv predicts one heatmap per keypoint, trained by MSE against Gaussian bumps
#    (intermediate supervision), and the next stack reads the features plus the
#    remapped features and heatmaps. The images hold a coloured blob per keypoint.
class Hourglass(nn.Module):
    def __init__(self, ch, depth):
        super().__init__()
        self.skip, self.down = conv_bn_relu(ch, ch), conv_bn_relu(ch, ch)
        self.inner = Hourglass(ch, depth - 1) if depth > 1 else conv_bn_relu(ch, ch)
        self.up = conv_bn_relu(ch, ch)

    def forward(self, x):
        low = self.up(self.inner(self.down(F.max_pool2d(x, 2))))
        return self.skip(x) + upsample_nearest(low)


class StackedHourglass(nn.Module):
    def __init__(self, ch, depth, stacks, keypoints):
        super().__init__()
        self.stem = nn.Sequential(conv_bn_relu(3, ch), conv_bn_relu(ch, ch))
        self.hgs = nn.ModuleList([Hourglass(ch, depth) for _ in range(stacks)])
        self.feats = nn.ModuleList([conv_bn_relu(ch, ch, 1) for _ in range(stacks)])
        self.heads = nn.ModuleList([nn.Conv2d(ch, keypoints, 1) for _ in range(stacks)])
        self.remap = nn.ModuleList([nn.Conv2d(ch, ch, 1) for _ in range(stacks - 1)])
        self.back = nn.ModuleList([nn.Conv2d(keypoints, ch, 1) for _ in range(stacks - 1)])

    def forward(self, x):
        x, heats = self.stem(x), []
        for i, (hg, feat, head) in enumerate(zip(self.hgs, self.feats, self.heads)):
            y = feat(hg(x))
            heats.append(head(y))
            if i < len(self.remap):
                x = x + self.remap[i](y) + self.back[i](heats[-1])
        return heats


def _hourglass(c):
    rng = np.random.default_rng(23)
    b, s, k = c["batch"], c["size"], c["keypoints"]
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32)
    pos = rng.uniform(3, s - 3, (b, k, 2)).astype(np.float32)
    d2 = (yy - pos[..., 0, None, None]) ** 2 + (xx - pos[..., 1, None, None]) ** 2
    colours = rng.standard_normal((k, 3)).astype(np.float32)
    image = np.einsum("bkhw,kc->bchw", 3.0 * np.exp(-d2 / 2.0), colours)
    x = imp.Tensor((image + 0.3 * rng.standard_normal(image.shape)).astype(np.float32))
    target = imp.Tensor(np.exp(-d2 / (2 * 1.5 ** 2)).astype(np.float32))
    model = StackedHourglass(c["ch"], c["depth"], c["stacks"], k)
    opt = optim.Adam(model.parameters(), 2e-3)

    def supervised():
        losses = [F.mse_loss(h, target) for h in model(x)]
        return sum(losses[1:], losses[0]) * 10.0
    return stepper(model.parameters(), opt, supervised)


# ---------------------------------------------------------------------------------------
# 6. knowledge distillation: a wide conv teacher, trained for a few steps when the
#    trainer is made, then in eval mode (running batch statistics); each step its forward
#    runs before the recording starts, and a narrow student is trained on
#    T^2 KL(teacher / T || student / T) mixed with cross entropy on the labels. The
#    inputs get fresh noise every step.
class ConvClassifier(nn.Module):
    def __init__(self, ch, hidden):
        super().__init__()
        self.body = nn.Sequential(conv_bn_relu(3, ch), nn.MaxPool2d(2), conv_bn_relu(ch, 2 * ch),
                                  nn.MaxPool2d(2), conv_bn_relu(2 * ch, 2 * ch))
        self.head = _mlp([2 * ch, hidden, 10])

    def forward(self, x):
        return self.head(global_average(self.body(x)))


def _distill(c):
    x, labels = cluster_task(c["batch"], (3, c["size"], c["size"]))
    teacher = ConvClassifier(c["teacher"], 4 * c["teacher"])
    teach = training_step(teacher, optim.Adam(teacher.parameters(), 2e-3))
    for _ in range(c["teacher_steps"]):
        teach(x, labels)
    teacher.eval()
    student = ConvClassifier(c["student"], 4 * c["student"])
    gm = GradManager().attach(student.parameters())
    opt = optim.Adam(student.parameters(), 2e-3)
    tau, mix = c["tau"], c["mix"]

    def step():
        xn = x + 0.3 * imp.random.normal(size=x.shape)
        soft = F.log_softmax(teacher(xn) * (1.0 / tau), axis=1)   # not recorded
        with gm:
            s = student(xn)
            kl = F.mean(F.sum(F.exp(soft) * (soft - F.log_softmax(s * (1.0 / tau), axis=1)),
                              axis=1))
            loss = mix * tau * tau * kl + (1.0 - mix) * F.cross_entropy(s, labels)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 7. hypernetwork (chunked, as in Ha et al.): the two hidden layers of a target MLP have
#    no weights of their own; a generator MLP maps each (task embedding, row embedding)
#    pair to one row of a layer's matrix, so that every task gets its own matrices. The
#    batch comes grouped by task, (tasks, n, features), and each group goes through its
#    task's matrices by batched products; biases and the classifier are ordinary. The
#    label is the input's class through a permutation of the task, so the generated
#    weights must differ by task.
class HyperNet(nn.Module):
    def __init__(self, tasks, embed, gen_hidden, features, hidden):
        super().__init__()
        self.task = nn.Parameter(imp.random.normal(0, 1.0, (tasks, 1, embed)))
        self.row1 = nn.Parameter(imp.random.normal(0, 1.0, (1, hidden, embed)))
        self.row2 = nn.Parameter(imp.random.normal(0, 1.0, (1, hidden, embed)))
        self.gen1 = _mlp([2 * embed, gen_hidden, features])
        self.gen2 = _mlp([2 * embed, gen_hidden, hidden])
        self.b1, self.b2 = (nn.Parameter(np.zeros(hidden, np.float32)) for _ in range(2))
        self.head = nn.Linear(hidden, 10)

    def weights(self, gen, rows):
        """One matrix per task, (tasks, rows, columns), scaled by 1 / sqrt(columns)."""
        tasks, n, e = self.task.shape[0], rows.shape[1], rows.shape[2]
        pairs = F.concat([F.broadcast_to(self.task, (tasks, n, e)),
                          F.broadcast_to(rows, (tasks, n, e))], axis=2)
        w = gen(pairs)
        return w * (1.0 / math.sqrt(w.shape[2]))

    def forward(self, x):                                      # x: (tasks, n, features)
        h = F.relu(F.matmul(x, self.weights(self.gen1, self.row1), transpose_b=True) + self.b1)
        h = F.relu(F.matmul(h, self.weights(self.gen2, self.row2), transpose_b=True) + self.b2)
        return self.head(h)                                    # (tasks, n, 10)


def _hypernet(c):
    tasks, n = c["tasks"], c["per_task"]
    x, cls = cluster_task(tasks * n, (c["features"],))
    perms = np.stack([np.random.default_rng(29 + t).permutation(10) for t in range(tasks)])
    task = np.repeat(np.arange(tasks), n)
    labels = imp.Tensor(perms[task, cls.numpy()].astype(np.int32))
    x = F.reshape(x, (tasks, n, c["features"]))
    model = HyperNet(tasks, c["embed"], c["gen_hidden"], c["features"], c["hidden"])
    opt = optim.Adam(model.parameters(), 1e-3)
    return stepper(model.parameters(), opt,
                   lambda: F.cross_entropy(F.reshape(model(x), (-1, 10)), labels))


# ---------------------------------------------------------------------------------------
# 8. Conformer: blocks of half-step feed-forward (SiLU), multi-head self-attention, a
#    conv module (pointwise to 2d, GLU, depthwise conv along the sequence, batch norm,
#    SiLU, pointwise), a second half-step feed-forward and a LayerNorm, all pre-norm
#    residuals; mean pooling and a classifier.
def _ff(dim):
    return nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), Lambda(F.silu),
                         nn.Linear(4 * dim, dim))


class ConvModule(nn.Module):
    def __init__(self, dim, k):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.pw1, self.pw2 = nn.Linear(dim, 2 * dim), nn.Linear(dim, dim)
        self.dw = nn.Conv2d(dim, dim, (1, k), padding=(0, k // 2), groups=dim)
        self.bn = nn.BatchNorm2d(dim)

    def forward(self, x):
        a, g = F.split(self.pw1(self.norm(x)), 2, axis=-1)
        y = F.expand_dims(F.transpose(a * F.sigmoid(g), (0, 2, 1)), 2)     # (b, d, 1, s)
        y = F.transpose(F.squeeze(F.silu(self.bn(self.dw(y))), 2), (0, 2, 1))
        return self.pw2(y)


class ConformerBlock(nn.Module):
    def __init__(self, dim, heads, k):
        super().__init__()
        self.heads = heads
        self.ff1, self.ff2 = _ff(dim), _ff(dim)
        self.n_att = nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.conv, self.norm = ConvModule(dim, k), nn.LayerNorm(dim)

    def forward(self, x):
        x = x + 0.5 * self.ff1(x)
        q, k, v = F.split(self.qkv(self.n_att(x)), 3, axis=-1)
        x = x + self.proj(_attention(q, k, v, self.heads))
        x = x + self.conv(x)
        return self.norm(x + 0.5 * self.ff2(x))


class Conformer(nn.Module):
    def __init__(self, features, dim, heads, blocks, k):
        super().__init__()
        self.inp = nn.Linear(features, dim)
        self.blocks = nn.Sequential(*[ConformerBlock(dim, heads, k) for _ in range(blocks)])
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(F.mean(self.blocks(self.inp(x)), axis=1))


# ---------------------------------------------------------------------------------------
# 9. deep-equilibrium-like: z <- LayerNorm(z + W2 relu(W1 z + U x)) iterated from zero
#    `solve` times before the recording starts (no graph), then `grad_iters` more times
#    recorded from that fixed-point estimate (a truncated, "phantom" gradient), the
#    classifier reading the last z.
class DEQ(nn.Module):
    def __init__(self, features, width):
        super().__init__()
        self.width = width
        self.inject = nn.Linear(features, width)
        self.w1, self.w2 = nn.Linear(width, width), nn.Linear(width, width)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, 10)

    def cell(self, z, injected):
        return self.norm(z + self.w2(F.relu(self.w1(z) + injected)))

    def iterate(self, z, x, times):
        injected = self.inject(x)
        for _ in range(times):
            z = self.cell(z, injected)
        return z


def _deq(c):
    x, labels = cluster_task(c["batch"], (c["features"],))
    model = DEQ(c["features"], c["width"])
    gm = GradManager().attach(model.parameters())
    opt = optim.Adam(model.parameters(), 1e-3)

    def step():
        z = model.iterate(F.zeros((c["batch"], c["width"])), x, c["solve"])   # not recorded
        with gm:
            loss = F.cross_entropy(model.head(model.iterate(z, x, c["grad_iters"])), labels)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 10. Mamba-like selective scan: each block projects to (u, gate), runs u through a
#     causal depthwise conv and SiLU, makes input-dependent step sizes delta (softplus),
#     B and C from u; the decays exp(delta A) (A = -exp(A_log), (e, n)) and inputs
#     delta u B for every position at once (b, s, e, n), then the recurrence
#     h_t = decay_t h_{t-1} + input_t over the sequence with y_t = h_t C_t + D u_t; the
#     output gated by SiLU(gate), projected, residual. Next-token language modelling of
#     t_i = (t_{i-1} + t_{i-3}) mod vocab.
class MambaBlock(nn.Module):
    def __init__(self, dim, expand, state, k):
        super().__init__()
        e = expand * dim
        self.norm, self.inp, self.out = nn.LayerNorm(dim), nn.Linear(dim, 2 * e), nn.Linear(e, dim)
        self.conv = nn.Conv2d(e, e, (1, k), groups=e)
        self.dt, self.bc = nn.Linear(e, e), nn.Linear(e, 2 * state)
        a = np.tile(np.arange(1, state + 1, dtype=np.float32), (e, 1))     # S4D-real's init
        self.a_log = nn.Parameter(np.log(a))
        self.d = nn.Parameter(np.ones(e, np.float32))

    def forward(self, x):
        b, s, _ = x.shape
        u, gate = F.split(self.inp(self.norm(x)), 2, axis=-1)
        u = F.silu(_time_conv(self.conv, u, causal=True))       # (b, s, e)
        delta = F.softplus(self.dt(u) - 3.0)
        bmat, cmat = F.split(self.bc(u), 2, axis=-1)            # (b, s, n) each
        decay = F.exp(F.expand_dims(delta, 3) * -F.exp(self.a_log))          # (b, s, e, n)
        drive = F.expand_dims(delta * u, 3) * F.expand_dims(bmat, 2)         # (b, s, e, n)
        h, ys = None, []
        for a, w, cm in zip(F.split(decay, s, axis=1), F.split(drive, s, axis=1),
                            F.split(cmat, s, axis=1)):
            w = F.squeeze(w, 1)
            h = w if h is None else F.squeeze(a, 1) * h + w                  # (b, e, n)
            ys.append(F.matmul(h, cm, transpose_b=True))                     # (b, e, 1)
        y = F.transpose(F.concat(ys, axis=2), (0, 2, 1)) + u * self.d
        return x + self.out(y * F.silu(gate))


class Mamba(nn.Module):
    def __init__(self, vocab, dim, expand, state, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.Sequential(*[MambaBlock(dim, expand, state, 4) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(self.embed(tokens))))


def _mamba(c):
    v, s, b = c["vocab"], c["seq"] + 1, c["batch"]
    t = np.zeros((b, s), np.int64)
    t[:, :3] = np.random.default_rng(31).integers(0, v, (b, 3))
    for i in range(3, s):
        t[:, i] = (t[:, i - 1] + t[:, i - 3]) % v
    inputs = imp.Tensor(t[:, :-1].astype(np.int32))
    targets = imp.Tensor(t[:, 1:].reshape(-1).astype(np.int32))
    model = Mamba(v, c["dim"], c["expand"], c["state"], c["layers"])
    opt = optim.Adam(model.parameters(), 3e-3)
    return stepper(model.parameters(), opt,
                   lambda: F.cross_entropy(F.reshape(model(inputs), (-1, v)), targets))


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "gradaccum": dict(ch=24, micro=4, size=32, batch=16),
    "lora": dict(features=32, dim=128, heads=4, blocks=3, rank=8, seq=64, batch=16),
    "ctc": dict(features=32, hidden=192, vocab=16, labels=12, frames=48, batch=96),
    "lif": dict(features=64, hidden=384, steps=32, beta=0.9, batch=192),
    "hourglass": dict(ch=32, depth=3, stacks=2, keypoints=4, size=32, batch=8),
    "distill": dict(teacher=48, student=16, teacher_steps=5, tau=4.0, mix=0.7, size=32,
                    batch=48),
    "hypernet": dict(tasks=8, embed=32, gen_hidden=128, features=64, hidden=256, per_task=384),
    "conformer": dict(features=32, dim=96, heads=4, blocks=2, k=15, seq=64, batch=16),
    "deq": dict(features=64, width=512, solve=16, grad_iters=3, batch=384),
    "mamba": dict(vocab=32, dim=64, expand=2, state=8, layers=2, seq=64, batch=16),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "gradaccum": dict(ch=4, micro=4, size=8, batch=4),
    "lora": dict(features=8, dim=16, heads=2, blocks=1, rank=4, seq=8, batch=8),
    "ctc": dict(features=8, hidden=16, vocab=6, labels=3, frames=12, batch=8),
    "lif": dict(features=16, hidden=32, steps=8, beta=0.9, batch=32),
    "hourglass": dict(ch=8, depth=2, stacks=2, keypoints=2, size=8, batch=4),
    "distill": dict(teacher=8, student=4, teacher_steps=2, tau=4.0, mix=0.7, size=8, batch=8),
    "hypernet": dict(tasks=4, embed=8, gen_hidden=16, features=8, hidden=16, per_task=8),
    "conformer": dict(features=8, dim=16, heads=2, blocks=1, k=5, seq=8, batch=4),
    "deq": dict(features=16, width=32, solve=4, grad_iters=2, batch=32),
    "mamba": dict(vocab=8, dim=16, expand=2, state=4, layers=1, seq=8, batch=4),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {
    "lif": lambda c: (SpikingNet(c["features"], c["hidden"], c["steps"], c["beta"]),
                      (c["features"],), "adam", 2e-3),
    "conformer": lambda c: (Conformer(c["features"], c["dim"], c["heads"], c["blocks"], c["k"]),
                            (c["seq"], c["features"]), "adam", 1e-3),
}

# name -> config -> step(): models with their own training step
STEPS = {
    "gradaccum": _gradaccum,
    "lora": _lora,
    "ctc": _ctc,
    "hourglass": _hourglass,
    "distill": _distill,
    "hypernet": _hypernet,
    "deq": _deq,
    "mamba": _mamba,
}


MODEL_SET = ModelSet(__name__, "tests/seventh_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
