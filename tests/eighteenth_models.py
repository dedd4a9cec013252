"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout,sixth,seventh,eighth,ninth,tenth,eleventh,twelfth,
thirteenth,fourteenth,fifteenth,sixteenth,seventeenth}_models.py; written after session 61
by a helper that had not read the memory manager, picked for graph shapes the other sets
lack, models people train: S4D (a diagonal state-space layer whose whole-sequence
convolution kernel is generated from its parameters every step, a (channels, modes, length)
Vandermonde product in real arithmetic, no batch axis, then a causal depthwise Conv1d as
long as the sequence; pixel-sequence classification; two AdamWs, the SSM's own rate and no
decay), an xLSTM mLSTM language model (a matrix memory per head updated by outer products
v k^T under exponential input and sigmoid forget gates with a running-maximum stabiliser,
run token by token: a (batch, heads, d, d) state at every step; a causal depthwise conv,
a multi-head norm, an output gate; AdamW, warm-up and cosine, clipped), DGCNN (EdgeConv
layers whose k-nearest-neighbour graph is rebuilt from the current features at every
layer by a topk over a (batch, points, points) distance matrix outside the recording,
neighbours gathered by index_select into (batch, points, k, 2 channels) edge features, a
max over k; SGD under cosine), a StyleGAN2 generator and discriminator (a mapping network;
modulated and demodulated convolutions whose weights differ per sample, run as one grouped
Conv2d with the batch folded into the groups; noise injection, skip-summed RGB outputs;
the non-saturating logistic loss, two Adams and two backward passes a step), an
Instant-NGP multiresolution hash encoding fitting an image (at every level the four corners
of each point's cell hashed in int32 into one large table, read by F.embedding and mixed by
bilinear weights, a tiny MLP; Adam with eps 1e-15), a Decision Transformer on offline
gridworld trajectories (return-to-go, state and action tokens interleaved by a stack and a
reshape, a causal GPT, actions predicted from every third output by a strided slice; AdamW
with warm-up, clipped), FixMatch (a labelled batch, and weak and strong augmentations of an
unlabelled one through one ResNet in one forward pass, pseudo-labels from the weak view's
detached confidence kept above a threshold as a mask; Nesterov SGD under FixMatch's cosine),
CLIP (an image ResNet and a causal text transformer pooled at each caption's end token by
index_select, a (batch, batch) similarity under a learned temperature clamped in place
after the step, symmetric cross entropy; AdamW, warm-up and cosine), a neural spline flow
(rational-quadratic coupling layers: bins found by comparing each value with the cumulative
knots, every bin quantity read by F.gather, identity tails, log-determinants; random
permutations by index_select; Adam, clipped) and a domain-adversarial network (DANN: a
conv feature extractor over a labelled source batch and an unlabelled target batch, a label
classifier, and a domain classifier reached through a gradient reversal layer written as
x.detach() - lambda (x - x.detach()), lambda rising over the run; one backward pass through
both heads; SGD under the paper's annealed rate).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/seventeenth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import CosineAnnealingLR, LambdaLR
from fifteenth_models import _step_with_clip
from model_sets import NEG, ModelSet, attention, bce_with_logits, l2_normalize, mlp, stepper
from seventeenth_models import BasicBlock, _augment, _markov_text, _tensor
from sixteenth_models import _textures
from tenth_models import _cycle, _then


def _parameter(a):
    return imp.Parameter(np.asarray(a, np.float32))


def _warmup_cosine(warmup, total):
    """The factor of the base rate at a step: linear warm-up, then half a cosine to 0."""
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / total)))
    return factor


class CausalBlock(nn.Module):
    """A pre-norm GPT block (the Decision Transformer's and CLIP's text tower's): causal
    multi-head attention by model_sets.attention under an additive mask, a GELU MLP."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = mlp([dim, 4 * dim, dim], nn.GELU)

    def forward(self, x, mask):
        q, k, v = F.split(self.qkv(self.norm1(x)), 3, axis=2)
        x = x + self.out(attention(q, k, v, self.heads, mask))
        return x + self.mlp(self.norm2(x))


def _causal_mask(n):
    return _tensor(np.triu(np.full((n, n), NEG), 1))


# ---------------------------------------------------------------------------------------
# 1. S4D (Gu et al., "On the parameterization and initialization of diagonal state space
#    models"): each of `channels` channels a diagonal SSM of `modes` complex modes
#    (S4D-Lin: A = -1/2 + i pi n), discretised by zero-order hold with a learned step; its
#    convolution kernel over the whole sequence, K[h, l] = 2 Re sum_n C'_n exp(dt A_n l),
#    computed every step in real arithmetic as (channels, modes, length) tensors (no batch
#    axis), then applied as a causal depthwise Conv1d whose kernel is as long as the
#    sequence (the flipped kernel, padding length - 1, the first `length` outputs), plus
#    the D skip. Pre-norm residual blocks: LayerNorm, S4D, GELU, a GLU linear. Images of
#    sixteenth_models' textures classified from their pixels as a sequence (sCIFAR's
#    task). The SSM's A and dt by an AdamW of their own (a lower rate, no weight decay, as
#    the paper's recipe), the rest by AdamW with decay; both under warm-up and cosine.
class S4D(nn.Module):
    def __init__(self, channels, modes, rng, dt_min=1e-3, dt_max=1e-1):
        super().__init__()
        half = modes // 2
        self.log_dt = _parameter(rng.uniform(math.log(dt_min), math.log(dt_max), (channels, 1)))
        self.log_a_real = _parameter(np.full((channels, half), math.log(0.5)))
        self.a_imag = _parameter(np.tile(np.pi * np.arange(half), (channels, 1)))
        self.c_re = _parameter(rng.standard_normal((channels, half)) * math.sqrt(0.5))
        self.c_im = _parameter(rng.standard_normal((channels, half)) * math.sqrt(0.5))
        self.d = _parameter(rng.standard_normal((channels, 1)))

    def ssm_parameters(self):
        return [self.log_dt, self.log_a_real, self.a_imag]

    def kernel(self, length):
        dt = F.exp(self.log_dt)
        a_re, a_im = -F.exp(self.log_a_real), self.a_imag
        x_re, x_im = a_re * dt, a_im * dt                                    # dt A
        e = F.exp(x_re)
        num_re, num_im = e * F.cos(x_im) - 1, e * F.sin(x_im)               # exp(dt A) - 1
        den = a_re * a_re + a_im * a_im
        q_re, q_im = (num_re * a_re + num_im * a_im) / den, (num_im * a_re - num_re * a_im) / den
        c_re = self.c_re * q_re - self.c_im * q_im                          # C' = C q
        c_im = self.c_re * q_im + self.c_im * q_re
        steps = _tensor(np.arange(length).reshape(1, 1, -1))
        magnitude = F.exp(F.expand_dims(x_re, 2) * steps)                    # (h, n, L)
        phase = F.expand_dims(x_im, 2) * steps
        terms = (F.expand_dims(c_re, 2) * F.cos(phase) - F.expand_dims(c_im, 2) * F.sin(phase))
        return 2 * F.sum(terms * magnitude, axis=1)                          # (h, L)

    def forward(self, u):                                                    # (b, h, L)
        h, length = u.shape[1], u.shape[2]
        weight = F.reshape(F.flip(self.kernel(length), 1), (h, 1, length))
        y = F.conv1d(u, weight, padding=length - 1, groups=h)[:, :, :length]
        return y + u * self.d


class S4Block(nn.Module):
    def __init__(self, channels, modes, rng, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.ssm = S4D(channels, modes, rng)
        self.glu = nn.Linear(channels, 2 * channels)
        self.dropout = dropout

    def forward(self, x):                                                    # (b, L, h)
        z = F.transpose(self.ssm(F.transpose(self.norm(x), (0, 2, 1))), (0, 2, 1))
        z = F.dropout(F.gelu(z), self.dropout, training=self.training)
        return x + F.glu(self.glu(z), axis=-1)


class S4Classifier(nn.Module):
    def __init__(self, channels, modes, layers, classes, rng, dropout=0.1):
        super().__init__()
        self.encoder = nn.Linear(3, channels)
        self.blocks = nn.Sequential(*[S4Block(channels, modes, rng, dropout)
                                      for _ in range(layers)])
        self.norm = nn.LayerNorm(channels)
        self.head = nn.Linear(channels, classes)

    def forward(self, image):
        b, c = image.shape[:2]
        x = F.transpose(F.reshape(image, (b, c, -1)), (0, 2, 1))            # (b, pixels, 3)
        h = self.norm(self.blocks(self.encoder(x)))
        return self.head(F.mean(h, axis=1))


def _s4d(c):
    rng = np.random.default_rng(821)
    batches = [_textures(rng, c["batch"], c["size"]) for _ in range(4)]
    model = S4Classifier(c["channels"], c["modes"], c["layers"], 10, rng)
    ssm = {id(p) for block in model.blocks for p in block.ssm.ssm_parameters()}
    params = model.parameters()
    opts = [optim.AdamW([p for p in params if id(p) in ssm], 1e-3, weight_decay=0.0),
            optim.AdamW([p for p in params if id(p) not in ssm], 4e-3, weight_decay=0.01)]
    schedules = [LambdaLR(opt, _warmup_cosine(10, 500)) for opt in opts]
    gm = GradManager().attach(params)
    next_batch = _cycle(batches)

    def step():
        x, labels = next_batch()
        with gm:
            loss = F.cross_entropy(model(x), labels)
            gm.backward(loss)
        for opt, schedule in zip(opts, schedules):
            opt.step()
            opt.clear_grad()
            schedule.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 2. An xLSTM mLSTM language model (Beck et al.): pre-norm residual blocks; each projects
#    up to two branches, one through a causal depthwise Conv1d (kernel 4) and SiLU giving
#    the queries and keys, the values from the branch before the conv, input and forget
#    gate pre-activations per head from the three; then the mLSTM recurrence token by
#    token: m = max(log sigmoid(f) + m, i), C = f' C + i' v k^T (a (batch, heads, d, d)
#    matrix memory), n = f' n + i' k, h = C q / max(|n . q|, exp(-m)) with i' = exp(i - m)
#    and f' = exp(log sigmoid(f) + m_old - m) (the stabiliser m detached, as the paper's
#    implementation); a per-head LayerNorm, a learned skip from the conv branch, the other
#    branch's SiLU as an output gate, a down projection. Text from
#    seventeenth_models' Markov chain. AdamW under warm-up and cosine, clipped to 1.
class MLSTMBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        inner = 2 * dim
        self.heads, self.head_dim = heads, inner // heads
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * inner)
        self.conv = nn.Conv1d(inner, inner, 4, padding=3, groups=inner)
        self.q, self.k, self.v = (nn.Linear(inner, inner, bias=False) for _ in range(3))
        self.gates = nn.Linear(3 * inner, 2 * heads)
        self.gates.bias[...] = _tensor(np.concatenate([np.zeros(heads),
                                                       np.linspace(3.0, 6.0, heads)]))
        self.head_norm = nn.LayerNorm(self.head_dim)
        self.skip = _parameter(np.ones(inner))
        self.down = nn.Linear(inner, dim)

    def _heads(self, t):
        b, s, _ = t.shape
        return F.reshape(t, (b, s, self.heads, self.head_dim))

    def forward(self, x):
        b, s, _ = x.shape
        branch, gate = F.split(self.up(self.norm(x)), 2, axis=2)
        conv = F.silu(F.transpose(
            self.conv(F.transpose(branch, (0, 2, 1)))[:, :, :s], (0, 2, 1)))
        q, k, v = self.q(conv), self.k(conv) * (1.0 / math.sqrt(self.head_dim)), self.v(branch)
        i_pre, f_pre = F.split(self.gates(F.concat([q, k, v], axis=2)), 2, axis=2)
        log_f = F.logsigmoid(f_pre)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        d = self.head_dim
        memory = F.zeros((b, self.heads, d, d))
        normaliser = F.zeros((b, self.heads, d))
        m = F.zeros((b, self.heads))
        outputs = []
        for t in range(s):
            m_new = F.maximum(log_f[:, t] + m, i_pre[:, t]).detach()
            i_gate = F.expand_dims(F.exp(i_pre[:, t] - m_new), 2)
            f_gate = F.expand_dims(F.exp(log_f[:, t] + m - m_new), 2)
            q_t, k_t, v_t = q[:, t], k[:, t], v[:, t]                       # (b, heads, d)
            memory = (F.expand_dims(f_gate, 3) * memory
                      + F.expand_dims(i_gate * v_t, 3) * F.expand_dims(k_t, 2))
            normaliser = f_gate * normaliser + i_gate * k_t
            numerator = F.squeeze(F.matmul(memory, F.expand_dims(q_t, 3)), 3)
            scale = F.maximum(F.abs(F.sum(normaliser * q_t, axis=2, keepdims=True)),
                              F.exp(-F.expand_dims(m_new, 2)))
            outputs.append(numerator / scale)
            m = m_new
        h = F.reshape(self.head_norm(F.stack(outputs, axis=1)), (b, s, -1))
        return x + self.down((h + self.skip * conv) * F.silu(gate))


class MLSTMLanguageModel(nn.Module):
    def __init__(self, vocab, dim, heads, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.Sequential(*[MLSTMBlock(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        return self.head(self.norm(self.blocks(self.embed(tokens))))


def _mlstm(c):
    rng = np.random.default_rng(823)
    vocab = c["vocab"]
    batches = [_markov_text(rng, c["batch"], c["seq"] + 1, vocab) for _ in range(4)]
    batches = [(imp.Tensor(b[:, :-1]), imp.Tensor(b[:, 1:].reshape(-1))) for b in batches]
    model = MLSTMLanguageModel(vocab, c["dim"], c["heads"], c["layers"])
    opt = optim.AdamW(model.parameters(), 2e-3, betas=(0.9, 0.95), weight_decay=0.1)
    schedule = LambdaLR(opt, _warmup_cosine(10, 500))
    next_batch = _cycle(batches)

    def loss_of():
        tokens, targets = next_batch()
        return F.cross_entropy(F.reshape(model(tokens), (-1, vocab)), targets)
    return _then(_step_with_clip(model.parameters(), opt, loss_of, 1.0), schedule.step)


# ---------------------------------------------------------------------------------------
# 3. DGCNN (Wang et al., "Dynamic graph CNN for learning on point clouds"): EdgeConv
#    layers, each rebuilding the k-nearest-neighbour graph in the space of its input
#    features (a (batch, points, points) squared-distance matrix and a topk of the
#    smallest, outside the recording: only the indices are used), gathering each point's
#    neighbours by index_select into (batch, points, k, channels), the edge features
#    [x_i, x_j - x_i] through a shared linear layer, batch norm and LeakyReLU, a max over
#    the neighbours; the four layers' outputs concatenated, embedded, max and mean pooled,
#    an MLP head with dropout. Point clouds of eight parametric surfaces, scaled, rotated
#    and jittered. SGD with momentum under cosine, label smoothing.
def _knn(x, k):
    """(b, n, k) indices of each point's k nearest points (itself first) by x (b, n, c)."""
    x = x.detach()
    square = F.sum(x * x, axis=2, keepdims=True)
    distance = square - 2 * F.matmul(x, x, transpose_b=True) + F.transpose(square, (0, 2, 1))
    return F.topk(distance, k, axis=2, largest=False)[1]


class EdgeConv(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.k = k
        self.linear = nn.Linear(2 * cin, cout, bias=False)
        self.bn = nn.BatchNorm1d(cout)

    def forward(self, x):                                                    # (b, n, c)
        b, n, c = x.shape
        index = _knn(x, self.k) + _tensor(np.arange(b).reshape(b, 1, 1) * n, np.int32)
        neighbours = F.reshape(F.index_select(F.reshape(x, (b * n, c)), 0,
                                              F.reshape(index, (-1,))), (b, n, self.k, c))
        centre = F.broadcast_to(F.expand_dims(x, 2), (b, n, self.k, c))
        edges = F.reshape(F.concat([centre, neighbours - centre], axis=3), (b * n * self.k, 2 * c))
        h = F.leaky_relu(self.bn(self.linear(edges)), 0.2)
        return F.max(F.reshape(h, (b, n, self.k, -1)), axis=2)


class DGCNN(nn.Module):
    def __init__(self, k, widths, embed, classes):
        super().__init__()
        cins = [3] + widths[:-1]
        self.edges = nn.ModuleList([EdgeConv(a, b, k) for a, b in zip(cins, widths)])
        self.embed = nn.Linear(sum(widths), embed, bias=False)
        self.embed_bn = nn.BatchNorm1d(embed)
        self.head = nn.Sequential(nn.Linear(2 * embed, 256, bias=False), nn.BatchNorm1d(256),
                                  nn.LeakyReLU(0.2), nn.Dropout(0.5), nn.Linear(256, classes))

    def forward(self, points):
        b, n, _ = points.shape
        features, x = [], points
        for edge in self.edges:
            x = edge(x)
            features.append(x)
        h = self.embed(F.reshape(F.concat(features, axis=2), (b * n, -1)))
        h = F.reshape(F.leaky_relu(self.embed_bn(h), 0.2), (b, n, -1))
        return self.head(F.concat([F.max(h, axis=1), F.mean(h, axis=1)], axis=1))


def _shapes(rng, count, points, classes=8):
    """Point clouds (count, points, 3) of `classes` surfaces, and their labels."""
    labels = rng.integers(0, classes, count)
    clouds = np.empty((count, points, 3))
    for s, k in enumerate(labels):
        u, v = rng.uniform(0, 2 * np.pi, points), rng.uniform(-1, 1, points)
        if k == 0:                                                           # sphere
            p = rng.standard_normal((points, 3))
            p /= np.linalg.norm(p, axis=1, keepdims=True)
        elif k == 1:                                                         # cube
            p = rng.uniform(-1, 1, (points, 3))
            face = rng.integers(0, 3, points)
            p[np.arange(points), face] = np.sign(p[np.arange(points), face])
        elif k == 2:                                                         # cylinder
            p = np.stack([np.cos(u), np.sin(u), v], axis=1)
        elif k == 3:                                                         # cone
            r = (1 - v) / 2
            p = np.stack([r * np.cos(u), r * np.sin(u), v], axis=1)
        elif k == 4:                                                         # torus
            w = rng.uniform(0, 2 * np.pi, points)
            p = np.stack([(1 + 0.35 * np.cos(w)) * np.cos(u), (1 + 0.35 * np.cos(w)) * np.sin(u),
                          0.35 * np.sin(w)], axis=1)
        elif k == 5:                                                         # helix
            p = np.stack([np.cos(3 * u), np.sin(3 * u), u / np.pi - 1], axis=1)
        elif k == 6:                                                         # saddle
            x, y = rng.uniform(-1, 1, (2, points))
            p = np.stack([x, y, x * x - y * y], axis=1)
        else:                                                                # two spheres
            p = rng.standard_normal((points, 3))
            p = 0.5 * p / np.linalg.norm(p, axis=1, keepdims=True)
            p[:, 0] += np.where(rng.uniform(size=points) < 0.5, -0.6, 0.6)
        rotation, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        clouds[s] = (p * rng.uniform(0.7, 1.3, 3)) @ rotation + 0.02 * rng.standard_normal(p.shape)
    return _tensor(clouds), _tensor(labels, np.int32)


def _dgcnn(c):
    rng = np.random.default_rng(825)
    batches = [_shapes(rng, c["batch"], c["points"]) for _ in range(4)]
    model = DGCNN(c["k"], c["widths"], c["embed"], 8)
    # the paper's rate, 0.1 at a batch of 32, scaled to a batch of 8
    opt = optim.SGD(model.parameters(), 0.025, momentum=0.9, weight_decay=1e-4)
    schedule = CosineAnnealingLR(opt, 250, eta_min=1e-3)
    next_batch = _cycle(batches)

    def loss_of():
        points, labels = next_batch()
        return F.cross_entropy(model(points), labels, label_smoothing=0.2)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 4. A StyleGAN2 (Karras et al.) at small resolution: a mapping MLP from normalised z to
#    w; a synthesis network from a learned 4x4 constant, each block bilinear upsampling
#    and two modulated 3x3 convolutions (the weight scaled per sample by a style from w
#    and demodulated, so that every sample has its own weights: the batch folded into the
#    channels and run as one Conv2d of `batch` groups), per-pixel noise drawn each step
#    with a learned strength, LeakyReLU; a modulated 1x1 toRGB per block (no
#    demodulation) added to the upsampled RGB of the block before. A residual
#    discriminator with average pooling. The non-saturating logistic loss; two Adams
#    (betas 0, 0.99) and two backward passes a step, a new generator forward for each.
#    The real images sixteenth_models' textures. The loss returned the discriminator's.
class ModulatedConv(nn.Module):
    def __init__(self, cin, cout, wdim, kernel, rng, demodulate=True):
        super().__init__()
        self.weight = _parameter(rng.standard_normal((cout, cin, kernel, kernel)))
        self.style = nn.Linear(wdim, cin)
        self.style.bias[...] = 1.0
        self.scale, self.demodulate = 1 / math.sqrt(cin * kernel * kernel), demodulate

    def forward(self, x, w):
        b, cin, h, width = x.shape
        cout, _, k, _ = self.weight.shape
        style = F.reshape(self.style(w), (b, 1, cin, 1, 1))
        weight = F.expand_dims(self.weight * self.scale, 0) * style          # (b, o, i, k, k)
        if self.demodulate:
            weight = weight * F.rsqrt(F.sum(weight * weight, axis=(2, 3, 4), keepdims=True) + 1e-8)
        y = F.conv2d(F.reshape(x, (1, b * cin, h, width)),
                     F.reshape(weight, (b * cout, cin, k, k)), padding=k // 2, groups=b)
        return F.reshape(y, (b, cout, h, width))


class StyledLayer(nn.Module):
    def __init__(self, cin, cout, wdim, rng):
        super().__init__()
        self.conv = ModulatedConv(cin, cout, wdim, 3, rng)
        self.noise_strength = _parameter(np.zeros((1, cout, 1, 1)))
        self.bias = _parameter(np.zeros((1, cout, 1, 1)))

    def forward(self, x, w):
        y = self.conv(x, w)
        noise = imp.random.normal(size=(y.shape[0], 1, y.shape[2], y.shape[3]))
        return F.leaky_relu(y + self.noise_strength * noise + self.bias, 0.2) * math.sqrt(2)


class Generator(nn.Module):
    def __init__(self, zdim, width, blocks, rng):
        super().__init__()
        self.zdim = zdim
        self.mapping = mlp([zdim] * 5, lambda: nn.LeakyReLU(0.2))
        self.const = _parameter(rng.standard_normal((1, width, 4, 4)))
        self.layers = nn.ModuleList([StyledLayer(width, width, zdim, rng)
                                     for _ in range(2 * blocks + 1)])
        self.to_rgb = nn.ModuleList([ModulatedConv(width, 3, zdim, 1, rng, demodulate=False)
                                     for _ in range(blocks + 1)])

    def forward(self, z):
        w = self.mapping(z * F.rsqrt(F.mean(z * z, axis=1, keepdims=True) + 1e-8))
        x = self.layers[0](F.broadcast_to(self.const, (z.shape[0],) + self.const.shape[1:]), w)
        rgb = self.to_rgb[0](x, w)
        for i in range(1, len(self.to_rgb)):
            x = F.interpolate(x, scale_factor=2, mode="bilinear")
            x = self.layers[2 * i](self.layers[2 * i - 1](x, w), w)
            rgb = F.interpolate(rgb, scale_factor=2, mode="bilinear") + self.to_rgb[i](x, w)
        return rgb


class DiscriminatorBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(cin, cin, 3, padding=1), nn.Conv2d(cin, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1, bias=False)

    def forward(self, x):
        h = F.leaky_relu(self.c2(F.leaky_relu(self.c1(x), 0.2)), 0.2)
        return (F.avg_pool2d(h, 2) + self.skip(F.avg_pool2d(x, 2))) * (1 / math.sqrt(2))


class Discriminator(nn.Module):
    def __init__(self, width, blocks):
        super().__init__()
        self.from_rgb = nn.Conv2d(3, width, 1)
        self.blocks = nn.Sequential(*[DiscriminatorBlock(width, width) for _ in range(blocks)])
        self.head = mlp([width * 16, width, 1], lambda: nn.LeakyReLU(0.2))

    def forward(self, x):
        h = self.blocks(F.leaky_relu(self.from_rgb(x), 0.2))
        return self.head(F.flatten(h, 1))


def _stylegan(c):
    rng = np.random.default_rng(827)
    size = 4 * 2 ** c["blocks"]
    batches = [_textures(rng, c["batch"], size)[0] * 0.5 for _ in range(4)]
    gen = Generator(c["zdim"], c["width"], c["blocks"], rng)
    disc = Discriminator(c["width"], c["blocks"])
    g_opt = optim.Adam(gen.parameters(), 2e-3, betas=(0.0, 0.99))
    d_opt = optim.Adam(disc.parameters(), 2e-3, betas=(0.0, 0.99))
    g_gm, d_gm = GradManager().attach(gen.parameters()), GradManager().attach(disc.parameters())
    next_batch = _cycle(batches)

    def step():
        real = next_batch()
        b = real.shape[0]
        fake = gen(imp.random.normal(size=(b, c["zdim"]))).detach()
        with d_gm:
            d_loss = F.mean(F.softplus(disc(fake))) + F.mean(F.softplus(-disc(real)))
            d_gm.backward(d_loss)
        d_opt.step()
        d_opt.clear_grad()
        with g_gm:
            g_loss = F.mean(F.softplus(-disc(gen(imp.random.normal(size=(b, c["zdim"]))))))
            g_gm.backward(g_loss)
        g_opt.step()
        g_opt.clear_grad()
        return d_loss
    return step


# ---------------------------------------------------------------------------------------
# 5. Instant-NGP's multiresolution hash encoding (Mueller et al.) fitting an image: at
#    each of `levels` resolutions (growing geometrically) the four corners of every
#    point's cell give indices into that level's part of one large (levels x table,
#    features) parameter: dense while the level's grid fits, else a spatial hash computed
#    in int32 (x + (y p mod T) mod T, p a prime); the corners read by F.embedding and
#    mixed by bilinear weights; the levels' features concatenated into a tiny ReLU MLP
#    giving RGB. Random pixels of a procedural image each step (four batches cycle). Adam
#    (betas 0.9, 0.99, eps 1e-15, as the paper's), L2 loss.
class HashEncoding(nn.Module):
    PRIME = 40503          # small enough that y p stays in int32 up to y = 2^15

    def __init__(self, levels, log2_table, features, base, growth, rng):
        super().__init__()
        self.table_size = 2 ** log2_table
        self.resolutions = [int(base * growth ** level) for level in range(levels)]
        self.table = _parameter(rng.uniform(-1e-4, 1e-4, (levels * self.table_size, features)))

    def _index(self, level, ix, iy):
        res, size = self.resolutions[level], self.table_size
        if (res + 1) ** 2 <= size:
            index = ix + iy * (res + 1)
        else:
            index = (ix + (iy * self.PRIME) % size) % size
        return F.reshape(index + level * size, (-1,))

    def forward(self, xy):                                                   # (n, 2) in [0, 1)
        features = []
        for level, res in enumerate(self.resolutions):
            position = xy * res
            corner = F.floor(position)
            wx, wy = F.split(position - corner, 2, axis=1)
            cx, cy = F.split(corner.astype("int32"), 2, axis=1)
            mixed = 0
            for dx, weight_x in ((0, 1 - wx), (1, wx)):
                for dy, weight_y in ((0, 1 - wy), (1, wy)):
                    corner_features = F.embedding(self._index(level, cx + dx, cy + dy), self.table)
                    mixed = mixed + corner_features * (weight_x * weight_y)
            features.append(mixed)
        return F.concat(features, axis=1)


def _procedural_image(size):
    yy, xx = np.mgrid[0:size, 0:size] / size
    r = np.hypot(xx - 0.4, yy - 0.55)
    image = np.stack([0.5 + 0.5 * np.sin(40 * r), (np.floor(xx * 12) + np.floor(yy * 12)) % 2,
                      0.5 + 0.5 * np.cos(25 * xx * yy + 6 * xx)])
    return image.transpose(1, 2, 0)


def _hashgrid(c):
    rng = np.random.default_rng(829)
    size = c["image"]
    image = _procedural_image(size)
    batches = []
    for _ in range(4):
        pixels = rng.integers(0, size, (c["batch"], 2))
        batches.append((_tensor((pixels + 0.5) / size), _tensor(image[pixels[:, 1], pixels[:, 0]])))
    encoding = HashEncoding(c["levels"], c["log2_table"], 2, 16, c["growth"], rng)
    net = mlp([2 * c["levels"], 64, 64, 3])
    params = encoding.parameters() + net.parameters()
    opt = optim.Adam(params, 1e-2, betas=(0.9, 0.99), eps=1e-15)
    next_batch = _cycle(batches)

    def loss_of():
        xy, rgb = next_batch()
        return F.mean((net(encoding(xy)) - rgb) ** 2)
    return stepper(params, opt, loss_of)


# ---------------------------------------------------------------------------------------
# 6. A Decision Transformer (Chen et al.) trained offline on gridworld trajectories: an
#    agent walks to a goal, each trajectory's behaviour greedy with its own probability of
#    random moves, reward -1 a step until the goal; per timestep a return-to-go token, a
#    state token and an action token (linear, linear and embedding, each plus a timestep
#    embedding) interleaved by a stack on a new axis and a reshape to (batch, 3 T, dim),
#    a LayerNorm, causal GPT blocks, the action logits read from every state token's
#    output by a strided slice; cross entropy with the actions taken. AdamW with a
#    warm-up, clipped to 0.25.
_MOVES = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]])


def _trajectories(rng, count, horizon, grid):
    """(returns-to-go (count, T, 1), states (count, T, 4), actions (count, T))."""
    position = rng.integers(0, grid, (count, 2))
    goal = rng.integers(0, grid, (count, 2))
    noise = rng.uniform(0, 1, (count, 1))
    states, actions, rewards = [], [], []
    for _ in range(horizon):
        states.append(np.concatenate([position, goal], axis=1) / grid)
        delta = goal - position
        axis = np.where(np.abs(delta[:, 0]) >= np.abs(delta[:, 1]), 0, 1)
        step = np.sign(delta[np.arange(count), axis])
        greedy = np.where(axis == 0, np.where(step > 0, 2, 3), np.where(step > 0, 0, 1))
        action = np.where(rng.uniform(size=count) < noise[:, 0], rng.integers(0, 4, count), greedy)
        rewards.append(np.where((position == goal).all(axis=1), 0.0, -1.0))
        position = np.clip(position + _MOVES[action], 0, grid - 1)
        actions.append(action)
    to_go = np.cumsum(np.stack(rewards, 1)[:, ::-1], axis=1)[:, ::-1] / horizon
    return (_tensor(to_go[..., None]), _tensor(np.stack(states, 1)),
            _tensor(np.stack(actions, 1), np.int32))


class DecisionTransformer(nn.Module):
    def __init__(self, dim, heads, layers, horizon):
        super().__init__()
        self.embed_return, self.embed_state = nn.Linear(1, dim), nn.Linear(4, dim)
        self.embed_action, self.embed_time = nn.Embedding(4, dim), nn.Embedding(horizon, dim)
        self.norm = nn.LayerNorm(dim)
        self.blocks = nn.ModuleList([CausalBlock(dim, heads) for _ in range(layers)])
        self.head = nn.Linear(dim, 4)
        self.times = imp.Tensor(np.arange(horizon, dtype=np.int32))
        self.mask = _causal_mask(3 * horizon)

    def forward(self, to_go, states, actions):
        b, t = actions.shape
        time = self.embed_time(self.times)
        tokens = F.stack([self.embed_return(to_go) + time, self.embed_state(states) + time,
                          self.embed_action(actions) + time], axis=2)       # (b, T, 3, dim)
        x = self.norm(F.reshape(tokens, (b, 3 * t, -1)))
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(x[:, 1::3])                                         # from the states


def _decision_transformer(c):
    rng = np.random.default_rng(831)
    horizon = c["horizon"]
    batches = [_trajectories(rng, c["batch"], horizon, c["grid"]) for _ in range(4)]
    model = DecisionTransformer(c["dim"], c["heads"], c["layers"], horizon)
    opt = optim.AdamW(model.parameters(), 1e-3, weight_decay=1e-4)
    schedule = LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    next_batch = _cycle(batches)

    def loss_of():
        to_go, states, actions = next_batch()
        logits = model(to_go, states, actions)
        return F.cross_entropy(F.reshape(logits, (-1, 4)), F.reshape(actions, (-1,)))
    return _then(_step_with_clip(model.parameters(), opt, loss_of, 0.25), schedule.step)


# ---------------------------------------------------------------------------------------
# 7. FixMatch (Sohn et al.): each step a labelled batch and `mu` times as many unlabelled
#    images, the unlabelled ones weakly augmented (a flip per image, a shift of the whole
#    batch by a roll) and strongly augmented (seventeenth_models' colour jitter, noise and
#    erasing on top); the three concatenated through one ResNet in one forward pass, as
#    the reference implementation does for batch norm; pseudo-labels the argmax of the
#    weak view's detached softmax, kept where its maximum reaches the threshold (a mask);
#    cross entropy of the labelled part plus the masked cross entropy of the strong view.
#    Nesterov SGD with weight decay under FixMatch's cosine, cos(7 pi k / 16 K).
def _weak(x, rng):
    b = x.shape[0]
    x = F.where(imp.random.uniform(size=(b, 1, 1, 1)) < 0.5, F.flip(x, 3), x)
    return F.roll(x, tuple(int(s) for s in rng.integers(-2, 3, 2)), axis=(2, 3))


class WideNet(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.Sequential(BasicBlock(width, width, 1), BasicBlock(width, 2 * width, 2),
                                    BasicBlock(2 * width, 4 * width, 2))
        self.head = nn.Linear(4 * width, classes)

    def features(self, x):
        return F.mean(self.blocks(self.stem(x)), axis=(2, 3))

    def forward(self, x):
        return self.head(self.features(x))


def _fixmatch(c):
    rng = np.random.default_rng(833)
    batch, unlabelled = c["batch"], c["mu"] * c["batch"]
    labelled = [_textures(rng, batch, c["size"]) for _ in range(4)]
    images = [_textures(rng, unlabelled, c["size"])[0] for _ in range(4)]
    model = WideNet(c["width"], 10)
    opt = optim.SGD(model.parameters(), 0.03, momentum=0.9, weight_decay=5e-4, nesterov=True)
    schedule = LambdaLR(opt, lambda k: math.cos(7 * math.pi * k / (16 * 1000)))
    gm = GradManager().attach(model.parameters())
    next_labelled, next_images = _cycle(labelled), _cycle(images)

    def step():
        (x, labels), u = next_labelled(), next_images()
        weak = _weak(u, rng)
        strong = _augment(_weak(u, rng))
        with gm:
            logits = model(F.concat([x, weak, strong], axis=0))
            own, on_weak, on_strong = F.split(logits, [batch, batch + unlabelled], axis=0)
            probabilities = F.softmax(on_weak.detach(), axis=1)
            confident = (F.max(probabilities, axis=1) >= c["threshold"]).astype("float32")
            pseudo = F.argmax(probabilities, axis=1)
            unlabelled_loss = F.mean(F.cross_entropy(on_strong, pseudo, reduction="none")
                                     * confident)
            loss = F.cross_entropy(own, labels) + unlabelled_loss
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        schedule.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 8. CLIP (Radford et al.) on captioned images: texture images of ten patterns in four
#    colours, each with a caption naming both among filler words, of its own length; an
#    image tower (a ResNet, mean pooled, a linear projection) and a text tower (token and
#    position embeddings, causal GPT blocks, a final LayerNorm, the features at each
#    caption's end token picked by index_select from the flattened sequence, a linear
#    projection); both embeddings normalised, a (batch, batch) similarity times a learned
#    temperature exp(t), symmetric cross entropy against the diagonal; t clamped to
#    log 100 in place after each step. AdamW (betas 0.9, 0.98, eps 1e-6, weight decay
#    0.2) under warm-up and cosine.
_PAD, _END, _COLOURS, _PATTERNS, _FILLERS = 0, 1, 2, 6, 16


def _captioned(rng, n, size, seq):
    yy, xx = np.mgrid[0:size, 0:size] / size
    palette = np.array([[1, 0.2, 0.2], [0.2, 1, 0.2], [0.2, 0.2, 1], [1, 1, 0.2]])
    pattern, colour = rng.integers(0, 10, n), rng.integers(0, 4, n)
    images = np.empty((n, 3, size, size))
    tokens = np.full((n, seq), _PAD)
    ends = np.empty(n, np.int32)
    for s in range(n):
        angle, freq = pattern[s] * np.pi / 10, 2 + (pattern[s] % 3)
        wave = np.sin(2 * np.pi * freq * (np.cos(angle) * xx + np.sin(angle) * yy)
                      + rng.uniform(0, 2 * np.pi))
        images[s] = palette[colour[s]][:, None, None] * wave + 0.5 * rng.standard_normal(
            (3, size, size))
        words = list(rng.integers(_FILLERS, _FILLERS + 24, rng.integers(1, seq - 3)))
        words.insert(rng.integers(0, len(words) + 1), _COLOURS + colour[s])
        words.insert(rng.integers(0, len(words) + 1), _PATTERNS + pattern[s])
        tokens[s, :len(words)] = words
        tokens[s, len(words)] = _END
        ends[s] = s * seq + len(words)
    return _tensor(images), imp.Tensor(tokens.astype(np.int32)), imp.Tensor(ends)


class TextTower(nn.Module):
    def __init__(self, dim, heads, layers, seq, out):
        super().__init__()
        self.embed = nn.Embedding(_FILLERS + 24, dim)
        self.position = _parameter(np.random.default_rng(835).normal(0, 0.01, (seq, dim)))
        self.blocks = nn.ModuleList([CausalBlock(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.project = nn.Linear(dim, out, bias=False)
        self.mask = _causal_mask(seq)

    def forward(self, tokens, ends):
        b, s = tokens.shape
        x = self.embed(tokens) + self.position
        for block in self.blocks:
            x = block(x, self.mask)
        last = F.index_select(F.reshape(self.norm(x), (b * s, -1)), 0, ends)
        return self.project(last)


class CLIP(nn.Module):
    def __init__(self, width, dim, heads, layers, seq, embed):
        super().__init__()
        self.image = WideNet(width, embed)
        self.text = TextTower(dim, heads, layers, seq, embed)
        self.log_temperature = _parameter(math.log(1 / 0.07))

    def forward(self, images, tokens, ends):
        image = l2_normalize(self.image(images))
        text = l2_normalize(self.text(tokens, ends))
        logits = F.matmul(image, text, transpose_b=True) * F.exp(self.log_temperature)
        targets = imp.Tensor(np.arange(logits.shape[0], dtype=np.int32))
        return (F.cross_entropy(logits, targets)
                + F.cross_entropy(F.transpose(logits, (1, 0)), targets)) * 0.5


def _clip(c):
    rng = np.random.default_rng(837)
    batches = [_captioned(rng, c["batch"], c["size"], c["seq"]) for _ in range(4)]
    model = CLIP(c["width"], c["dim"], c["heads"], c["layers"], c["seq"], c["embed"])
    opt = optim.AdamW(model.parameters(), 1e-3, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.2)
    schedule = LambdaLR(opt, _warmup_cosine(10, 500))
    next_batch = _cycle(batches)
    ceiling = math.log(100)

    def clamp():
        schedule.step()
        model.log_temperature[...] = F.minimum(model.log_temperature, ceiling)
    return _then(stepper(model.parameters(), opt, lambda: model(*next_batch())), clamp)


# ---------------------------------------------------------------------------------------
# 9. A neural spline flow (Durkan et al.) on 8-D data (four 2-D toy densities, two moons,
#    a ring, a spiral and a checkerboard, mixed by a fixed rotation): coupling layers, each
#    a random permutation by index_select, then a conditioner MLP of the first half giving
#    every other coordinate `bins` widths, `bins` heights and `bins - 1` inner derivatives
#    of a monotone rational-quadratic spline on [-B, B] (linear tails outside, the
#    identity); the bin of each value found by comparing it with the cumulative knots (a
#    sum of a comparison), the knot, width, height and both derivatives of that bin read by
#    F.gather, the spline and its log-derivative written out; the loss the negative
#    log-likelihood under a standard normal base plus the log-determinants. Adam under
#    cosine, clipped to 5.
def _toy_8d(rng, n):
    t = rng.uniform(0, np.pi, n)
    upper = rng.uniform(size=n) < 0.5
    moons = np.stack([np.where(upper, np.cos(t), 1 - np.cos(t)),
                      np.where(upper, np.sin(t), 0.5 - np.sin(t))], 1)
    a = rng.uniform(0, 2 * np.pi, n)
    ring = 2 * np.stack([np.cos(a), np.sin(a)], 1)
    r = rng.uniform(0.2, 1, n)
    spiral = 2.5 * r[:, None] * np.stack([np.cos(4 * np.pi * r), np.sin(4 * np.pi * r)], 1)
    cells = rng.integers(0, 4, (n, 2))
    cells[:, 1] = 2 * (cells[:, 1] // 2) + (cells[:, 0] % 2)
    checker = cells + rng.uniform(size=(n, 2)) - 2
    x = np.concatenate([moons, ring, spiral, checker], 1) + 0.05 * rng.standard_normal((n, 8))
    rotation, _ = np.linalg.qr(np.random.default_rng(839).standard_normal((8, 8)))
    return _tensor(x @ rotation)


def _knots(unnormalised, bound, minimum):
    """(n, d, bins + 1) knot positions on [-bound, bound] from softmax'd bin sizes."""
    bins = unnormalised.shape[-1]
    sizes = minimum + (1 - minimum * bins) * F.softmax(unnormalised, axis=-1)
    inner = F.cumsum(sizes, axis=2)[:, :, :bins - 1] * (2 * bound) - bound
    ends = F.zeros_like(inner[:, :, :1])
    return F.concat([ends - bound, inner, ends + bound], axis=2)


def rational_quadratic(x, widths, heights, derivatives, bound, minimum=1e-3):
    """The spline of x (n, d) and log |dy/dx|: identity outside [-bound, bound]."""
    inside = (x > -bound) & (x < bound)
    xc = F.clip(x, -bound, bound)
    knots_x, knots_y = _knots(widths, bound, minimum), _knots(heights, bound, minimum)
    ones = F.ones_like(knots_x[:, :, :1])
    d = F.concat([ones, minimum + F.softplus(derivatives), ones], axis=2)   # tails' slope 1
    bins = widths.shape[-1]
    index = F.sum((F.expand_dims(xc, 2) >= knots_x[:, :, 1:bins]).astype("float32"), axis=2,
                  keepdims=True).astype("int32")

    def pick(t, shift=0):
        return F.squeeze(F.gather(t, 2, index + shift), 2)
    x_k, y_k = pick(knots_x), pick(knots_y)
    w_k, h_k = pick(knots_x, 1) - x_k, pick(knots_y, 1) - y_k
    d_k, d_k1 = pick(d), pick(d, 1)
    slope = h_k / w_k
    theta = (xc - x_k) / w_k
    mix = theta * (1 - theta)
    denominator = slope + (d_k + d_k1 - 2 * slope) * mix
    y = y_k + h_k * (slope * theta * theta + d_k * mix) / denominator
    numerator = slope * slope * (d_k1 * theta * theta + 2 * slope * mix + d_k * (1 - theta) ** 2)
    log_det = F.log(numerator) - 2 * F.log(denominator)
    return F.where(inside, y, x), F.where(inside, log_det, F.zeros_like(log_det))


class SplineCoupling(nn.Module):
    def __init__(self, dim, hidden, bins, bound, rng):
        super().__init__()
        self.half, self.bins, self.bound = dim // 2, bins, bound
        self.order = imp.Tensor(rng.permutation(dim).astype(np.int32))
        self.conditioner = mlp([self.half, hidden, hidden, (dim - self.half) * (3 * bins - 1)])
        self.scale = 1 / math.sqrt(hidden)

    def forward(self, x):
        x = F.index_select(x, 1, self.order)
        fixed, moved = x[:, :self.half], x[:, self.half:]
        n, k = x.shape[0], self.bins
        p = F.reshape(self.conditioner(fixed), (n, moved.shape[1], 3 * k - 1))
        y, log_det = rational_quadratic(moved, p[:, :, :k] * self.scale,
                                        p[:, :, k:2 * k] * self.scale, p[:, :, 2 * k:], self.bound)
        return F.concat([fixed, y], axis=1), F.sum(log_det, axis=1)


class SplineFlow(nn.Module):
    def __init__(self, dim, layers, hidden, bins, rng, bound=4.0):
        super().__init__()
        self.layers = nn.ModuleList([SplineCoupling(dim, hidden, bins, bound, rng)
                                     for _ in range(layers)])

    def forward(self, x):
        """The mean negative log-likelihood of x (n, dim)."""
        log_det = 0
        for layer in self.layers:
            x, ld = layer(x)
            log_det = log_det + ld
        log_base = -0.5 * F.sum(x * x, axis=1) - 0.5 * x.shape[1] * math.log(2 * math.pi)
        return -F.mean(log_base + log_det)


def _spline_flow(c):
    rng = np.random.default_rng(841)
    batches = [_toy_8d(rng, c["batch"]) for _ in range(4)]
    model = SplineFlow(8, c["layers"], c["hidden"], c["bins"], rng)
    opt = optim.Adam(model.parameters(), 1e-3)
    schedule = CosineAnnealingLR(opt, 1000)
    next_batch = _cycle(batches)
    return _then(_step_with_clip(model.parameters(), opt, lambda: model(next_batch()), 5.0),
                 schedule.step)


# ---------------------------------------------------------------------------------------
# 10. A domain-adversarial network (DANN, Ganin et al.): a conv feature extractor shared by
#     a labelled source domain (sixteenth_models' textures) and an unlabelled target domain
#     (the same patterns with colours permuted, contrast lowered and blurred by a shift
#     average); a label classifier on the source features, and a domain classifier on both
#     reached through a gradient reversal layer, x.detach() - lambda (x - x.detach()): x
#     forward, minus lambda times the gradient backward, lambda rising as 2 / (1 + exp(-10
#     p)) - 1 over the run; one backward pass through both heads. SGD with momentum under
#     the paper's rate, lr0 / (1 + 10 p)^0.75.
def reverse_gradient(x, factor):
    """x, whose gradient comes back multiplied by -factor."""
    held = x.detach()
    return held - factor * (x - held)


def _target_domain(images):
    x = images[:, ::-1] * 0.6                                       # colours permuted, duller
    return (x + np.roll(x, 1, axis=3) + np.roll(x, 1, axis=2)) / 3 + 0.3


class DANN(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 5, padding=2), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 5, padding=2), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(2 * width, 4 * width, 3, padding=1), nn.ReLU())
        self.classifier = mlp([4 * width, 100, 100, classes])
        self.domain = mlp([4 * width, 100, 1])

    def forward(self, source, target, labels, factor):
        n = source.shape[0]
        h = F.mean(self.features(F.concat([source, target], axis=0)), axis=(2, 3))
        label_loss = F.cross_entropy(self.classifier(h[:n]), labels)
        domains = _tensor(np.repeat([0.0, 1.0], [n, target.shape[0]])[:, None])
        return label_loss + bce_with_logits(self.domain(reverse_gradient(h, factor)), domains)


def _dann(c):
    rng = np.random.default_rng(845)
    source = [_textures(rng, c["batch"], c["size"]) for _ in range(4)]
    target = [_tensor(_target_domain(_textures(rng, c["batch"], c["size"])[0].numpy()))
              for _ in range(4)]
    model = DANN(c["width"], 10)
    opt = optim.SGD(model.parameters(), 0.01, momentum=0.9)
    total = 1000
    schedule = LambdaLR(opt, lambda k: (1 + 10 * k / total) ** -0.75)
    next_source, next_target = _cycle(source), _cycle(target)
    count = {"steps": 0}

    def loss_of():
        (x, labels), t = next_source(), next_target()
        factor = 2 / (1 + math.exp(-10 * count["steps"] / total)) - 1
        count["steps"] += 1
        return model(x, t, labels, factor)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "s4d": dict(channels=64, modes=32, layers=3, size=16, batch=16),
    "mlstm": dict(vocab=256, dim=64, heads=8, layers=2, seq=32, batch=8),
    "dgcnn": dict(points=128, k=12, widths=[32, 32, 64, 64], embed=256, batch=8),
    "stylegan": dict(zdim=64, width=32, blocks=3, batch=8),
    "hashgrid": dict(levels=12, log2_table=15, growth=1.45, image=512, batch=16384),
    "decision": dict(dim=64, heads=4, layers=3, horizon=20, grid=8, batch=48),
    "fixmatch": dict(width=16, size=24, mu=3, threshold=0.95, batch=16),
    "clip": dict(width=16, size=24, dim=64, heads=4, layers=2, seq=16, embed=64, batch=96),
    "spline_flow": dict(layers=6, hidden=128, bins=8, batch=3072),
    "dann": dict(width=32, size=32, batch=48),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "s4d": dict(channels=8, modes=8, layers=2, size=6, batch=4),
    "mlstm": dict(vocab=32, dim=16, heads=2, layers=1, seq=8, batch=4),
    "dgcnn": dict(points=32, k=6, widths=[8, 8, 16], embed=32, batch=8),
    "stylegan": dict(zdim=16, width=8, blocks=1, batch=4),
    "hashgrid": dict(levels=4, log2_table=8, growth=2.0, image=64, batch=256),
    "decision": dict(dim=16, heads=2, layers=1, horizon=6, grid=4, batch=8),
    "fixmatch": dict(width=4, size=8, mu=2, threshold=0.3, batch=4),
    "clip": dict(width=4, size=8, dim=16, heads=2, layers=1, seq=8, embed=16, batch=8),
    "spline_flow": dict(layers=2, hidden=16, bins=4, batch=64),
    "dann": dict(width=4, size=8, batch=8),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps:
# none here (every model has its own data and step)
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "s4d": _s4d,
    "mlstm": _mlstm,
    "dgcnn": _dgcnn,
    "stylegan": _stylegan,
    "hashgrid": _hashgrid,
    "decision": _decision_transformer,
    "fixmatch": _fixmatch,
    "clip": _clip,
    "spline_flow": _spline_flow,
    "dann": _dann,
}


MODEL_SET = ModelSet(__name__, "tests/eighteenth_models.py", CONFIGS, BENCH_SIZES, BUILDERS,
                     STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
