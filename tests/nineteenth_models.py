"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout,sixth,...,eighteenth}_models.py; written after session 62
by a helper that had not read the memory manager, picked for graph shapes the other sets
lack, models people train: DINO (a ViT student over two global and several local crops cut
by strided slices, the local crops' position embeddings interpolated to their smaller grid,
a teacher that sees only the global crops and is an EMA of the student updated in place
parameter by parameter, a centre updated in place, a cross-view loss over every pair of a
teacher view and another student view; AdamW under warm-up and cosine, clipped), Graphormer
(a graph transformer whose attention bias is a spatial encoding read from a shortest-path
table and an edge encoding averaged along every shortest path, a (batch, nodes, nodes,
hops, heads) embedding summed over the hops, a virtual node's row and column joined by
concatenation; AdamW, warm-up and linear decay, L1 loss), RetNet (multi-scale retention in
its chunkwise form: a causal decay-masked product inside each chunk and a (batch, heads, d,
d) state carried from chunk to chunk, strided chunk slices, concatenated chunk outputs,
rotary positions, group norm and a swish gate; AdamW), PointNet++ (multi-scale grouping set
abstraction: farthest-point sampling and ball queries outside the recording, neighbours
gathered by index_select at two radii, relative coordinates, shared MLPs with batch norm, a
max over each ball, a second abstraction over the centroids, a global one; Adam under step
decay), ESRGAN's RRDB generator (residual-in-residual dense blocks: every conv reads the
concatenation of all the block's earlier outputs, residuals scaled by 0.2 at two levels of
nesting, a long skip, nearest upsampling; L1 loss, Adam halved at milestones), a Latent ODE
(a GRU run backwards over irregularly sampled, partly observed spirals with masked updates,
a sampled initial state, a Dormand-Prince 5(4) step unrolled over every interval, seven
stages of a fan-in each, a decoder at every time, a masked Gaussian likelihood and a KL;
Adam under exponential decay), BigBird (a masked language model whose block-sparse
attention gathers for every query block a global block, its neighbours by rolls of the
key blocks and random blocks by index_select, a global query block attending to all, the
masked positions picked by index_select, a decoder tied to the embedding; AdamW), Glow
(multi-scale squeezes by pixel_unshuffle, ActNorm with data-dependent initialisation, an
LU-decomposed invertible 1x1 conv built from its factors every step, affine couplings whose
shift and scale are strided channel slices, half the channels factored out at each level
under a learned conditional prior, bits per dimension; Adam with warm-up, clipped),
MixMatch (K augmentations of an unlabelled batch, guessed labels averaged and sharpened,
labelled and unlabelled batches concatenated and mixed with a permutation of themselves by
index_select, soft cross entropy and a ramped squared error; Adam, weight decay and an EMA
model applied in place after every step) and a Graph U-Net (gPool: nodes scored by a
projection, the top k kept by indices from outside the recording, features gathered and
gated by the gathered scores, the squared adjacency gathered by rows then columns; gUnpool
by scatter_add back into zeros, skips added; Adam with weight decay).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/eighteenth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.lr_scheduler import ExponentialLR, LambdaLR, MultiStepLR, StepLR
from eighteenth_models import CausalBlock, WideNet, _parameter, _shapes, _warmup_cosine
from fifteenth_models import _step_with_clip
from model_sets import NEG, ModelSet, l2_normalize, merge_heads, mlp, split_heads, stepper
from seventeenth_models import _augment, _markov_text, _rotate_half, _tensor
from sixteenth_models import _textures
from tenth_models import _cycle, _then


def _warmup_linear(warmup, total):
    """The factor of the base rate at a step: linear warm-up, then a linear decay to 0."""
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, 1 - (step - warmup) / total)
    return factor


def _copy_into(target, source):
    """target's parameters set to source's, in place."""
    for t, s in zip(target.parameters(), source.parameters()):
        t[...] = s.detach()


# ---------------------------------------------------------------------------------------
# 1. DINO (Caron et al., "Emerging properties in self-supervised vision transformers"): a
#    small ViT (patch conv, class token, learned position embeddings kept as a grid,
#    pre-norm blocks) and DINO's head (an MLP to a bottleneck, l2-normalised, a
#    weight-normalised last layer to K prototypes). Multi-crop: two global crops and
#    `local` local crops of each image cut by strided slices at offsets drawn per step,
#    flipped and colour-jittered; the local crops' position grid bilinearly interpolated
#    to their smaller grid. The teacher (an EMA of the student, updated in place after the
#    step with a momentum rising by a cosine) sees only the global crops, its outputs
#    centred by a centre updated in place and sharpened by a low temperature; the loss the
#    cross entropy of every teacher view against every other student view. AdamW under
#    warm-up and cosine, clipped to 3.
class PatchViT(nn.Module):
    def __init__(self, dim, heads, layers, patch, grid, rng):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = _parameter(rng.normal(0, 0.02, (1, 1, dim)))
        self.position = _parameter(rng.normal(0, 0.02, (1, dim, grid, grid)))
        self.blocks = nn.ModuleList([CausalBlock(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        p = self.patch(x)
        b, d, g, _ = p.shape
        position = (self.position if g == self.position.shape[2]
                    else F.interpolate(self.position, size=(g, g), mode="bilinear"))
        tokens = F.transpose(F.reshape(p + position, (b, d, g * g)), (0, 2, 1))
        x = F.concat([F.broadcast_to(self.cls, (b, 1, d)), tokens], axis=1)
        for block in self.blocks:
            x = block(x, None)
        return self.norm(x)[:, 0]


class DinoHead(nn.Module):
    def __init__(self, dim, hidden, bottleneck, prototypes, rng):
        super().__init__()
        self.mlp = mlp([dim, hidden, hidden, bottleneck], nn.GELU)
        self.last = _parameter(rng.normal(0, 0.02, (prototypes, bottleneck)))

    def forward(self, x):
        z = l2_normalize(self.mlp(x))
        return F.matmul(z, l2_normalize(self.last), transpose_b=True)


class Dino(nn.Module):
    def __init__(self, c, rng):
        super().__init__()
        grid = (3 * c["size"] // 4) // c["patch"]
        self.backbone = PatchViT(c["dim"], c["heads"], c["layers"], c["patch"], grid, rng)
        self.head = DinoHead(c["dim"], c["hidden"], c["bottleneck"], c["prototypes"], rng)

    def forward(self, x):
        return self.head(self.backbone(x))


def _crop(images, side, rng):
    """A crop of `side` pixels at a random offset (one for the batch), flipped per sample
    and colour-jittered."""
    b, ch, s, _ = images.shape
    top, left = rng.integers(0, s - side + 1, 2)
    x = images[:, :, top:top + side, left:left + side]
    flip = imp.random.uniform(size=(b, 1, 1, 1)) < 0.5
    x = F.where(flip, F.flip(x, 3), x)
    return x * imp.random.uniform(0.6, 1.4, size=(b, ch, 1, 1))


def _dino(c):
    rng = np.random.default_rng(901)
    batches = [_textures(rng, c["batch"], c["size"])[0] for _ in range(4)]
    student = Dino(c, np.random.default_rng(903))
    teacher = Dino(c, np.random.default_rng(903))
    _copy_into(teacher, student)
    center = imp.Tensor(np.zeros((1, c["prototypes"]), np.float32))
    params = student.parameters()
    opt = optim.AdamW(params, 5e-4 * c["batch"] / 256, weight_decay=0.04)
    total = 1000
    schedule = LambdaLR(opt, _warmup_cosine(10, total))
    next_batch = _cycle(batches)
    global_side, local_side = 3 * c["size"] // 4, 3 * c["size"] // 8
    count = {"steps": 0}

    def loss_of():
        images = next_batch()
        globals_ = F.concat([_crop(images, global_side, rng) for _ in range(2)], axis=0)
        locals_ = F.concat([_crop(images, local_side, rng) for _ in range(c["local"])], axis=0)
        t_out = teacher(globals_).detach()
        targets = F.split(F.softmax((t_out - center) / 0.04, axis=1), 2, axis=0)
        s_out = F.concat([student(globals_), student(locals_)], axis=0) / 0.1
        views = F.split(F.log_softmax(s_out, axis=1), 2 + c["local"], axis=0)
        total_loss, terms = 0, 0
        for i, q in enumerate(targets):
            for j, s in enumerate(views):
                if i != j:
                    total_loss = total_loss + F.mean(F.sum(-q * s, axis=1))
                    terms += 1
        center[...] = center * 0.9 + 0.1 * F.mean(t_out, axis=0, keepdims=True)
        return total_loss / terms

    def update_teacher():
        schedule.step()
        m = 1 - (1 - 0.996) * (math.cos(math.pi * min(1.0, count["steps"] / total)) + 1) / 2
        count["steps"] += 1
        for t, s in zip(teacher.parameters(), params):
            t[...] = t * m + s.detach() * (1 - m)
    return _then(_step_with_clip(params, opt, loss_of, 3.0), update_teacher)


# ---------------------------------------------------------------------------------------
# 2. Graphormer (Ying et al., "Do transformers really perform bad for graph
#    representation?") on molecule-like graphs (random trees with ring closures, atom and
#    bond types, padded to `nodes`): atom embeddings plus degree (centrality) embeddings; a
#    virtual node prepended; every layer's attention biased by a spatial encoding (a
#    learned scalar per head for each shortest-path distance, read by F.embedding over a
#    (batch, nodes, nodes) table) and an edge encoding (the bond types along each shortest
#    path embedded per head, (batch, nodes, nodes, hops, heads), weighted per hop, summed
#    and divided by the path's length), the virtual node's row and column a learned bias
#    joined by concatenation, padding masked. Pre-norm blocks; the virtual node's output
#    regresses a graph property under an L1 loss (ZINC's). AdamW, warm-up and linear
#    decay, clipped to 5.
def _molecules(rng, n, most, hops, types=8, bonds=3):
    atoms = np.zeros((n, most), np.int32)
    degree = np.zeros((n, most), np.int32)
    distance = np.full((n, most, most), hops + 2, np.int32)
    paths = np.zeros((n, most, most, hops), np.int32)
    lengths = np.ones((n, most, most, 1))
    pad = np.full((n, 1, 1, most + 1), NEG)
    pad[:, :, :, 0] = 0
    target = np.zeros((n, 1))
    weight = np.random.default_rng(905).standard_normal(types + 1)
    for g in range(n):
        size = rng.integers(most // 2, most + 1)
        atoms[g, :size] = rng.integers(1, types + 1, size)
        pad[g, :, :, 1:size + 1] = 0
        bond = {}
        for i in range(1, size):
            j = rng.integers(max(0, i - 4), i)
            bond[i, j] = bond[j, i] = rng.integers(1, bonds + 1)
        for _ in range(size // 6):
            i, j = rng.integers(0, size, 2)
            if i != j:
                bond[i, j] = bond[j, i] = rng.integers(1, bonds + 1)
        neighbours = [[] for _ in range(size)]
        for i, j in bond:
            neighbours[i].append(j)
        for i in range(size):
            degree[g, i] = min(len(neighbours[i]), most - 1)
            parent = {i: None}
            frontier = [i]
            while frontier:
                following = []
                for u in frontier:
                    for v in neighbours[u]:
                        if v not in parent:
                            parent[v] = u
                            following.append(v)
                frontier = following
            for j in parent:
                steps, v = [], j
                while parent[v] is not None:
                    steps.append(bond[v, parent[v]])
                    v = parent[v]
                distance[g, i, j] = min(len(steps), hops + 1)
                lengths[g, i, j] = max(1, min(len(steps), hops))
                paths[g, i, j, :min(len(steps), hops)] = steps[::-1][:hops]
        counts = np.bincount(atoms[g, :size], minlength=types + 1)
        close = (distance[g, :size, :size] == 2).sum() / size
        target[g] = (counts * weight).sum() / size + 0.3 * close + 0.1 * len(bond) / size
    return (imp.Tensor(atoms), imp.Tensor(degree), imp.Tensor(distance), imp.Tensor(paths),
            _tensor(lengths), _tensor(pad), _tensor(target))


class Graphormer(nn.Module):
    def __init__(self, dim, heads, layers, most, hops, types=8, bonds=3):
        super().__init__()
        rng = np.random.default_rng(907)
        self.heads = heads
        self.atom = nn.Embedding(types + 1, dim)
        self.degree = nn.Embedding(most, dim)
        self.spatial = nn.Embedding(hops + 3, heads)
        self.edge = nn.Embedding(bonds + 1, heads)
        self.hop_weights = _parameter(rng.normal(0, 0.1, (hops, heads)))
        self.virtual = _parameter(rng.normal(0, 0.02, (1, 1, dim)))
        self.virtual_bias = _parameter(np.zeros((1, heads, 1, 1)))
        self.blocks = nn.ModuleList([CausalBlock(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, 1)

    def forward(self, atoms, degree, distance, paths, lengths, pad):
        b, n = atoms.shape
        x = self.atom(atoms) + self.degree(degree)
        x = F.concat([F.broadcast_to(self.virtual, (b, 1, x.shape[2])), x], axis=1)
        edge = F.sum(self.edge(paths) * self.hop_weights, axis=3) / lengths  # (b, n, n, h)
        bias = F.transpose(self.spatial(distance) + edge, (0, 3, 1, 2))      # (b, h, n, n)
        bias = F.concat([F.broadcast_to(self.virtual_bias, (b, self.heads, n, 1)), bias], axis=3)
        bias = F.concat([F.broadcast_to(self.virtual_bias, (b, self.heads, 1, n + 1)), bias],
                        axis=2)
        bias = bias + pad
        for block in self.blocks:
            x = block(x, bias)
        return self.out(self.norm(x)[:, 0])


def _graphormer(c):
    rng = np.random.default_rng(909)
    batches = [_molecules(rng, c["batch"], c["nodes"], c["hops"]) for _ in range(4)]
    model = Graphormer(c["dim"], c["heads"], c["layers"], c["nodes"], c["hops"])
    opt = optim.AdamW(model.parameters(), 2e-4, weight_decay=0.01)
    schedule = LambdaLR(opt, _warmup_linear(10, 1000))
    next_batch = _cycle(batches)

    def loss_of():
        *graph, target = next_batch()
        return F.mean(F.abs(model(*graph) - target))
    return _then(_step_with_clip(model.parameters(), opt, loss_of, 5.0), schedule.step)


# ---------------------------------------------------------------------------------------
# 3. RetNet (Sun et al., "Retentive network"): multi-scale retention in its chunkwise
#    recurrent form. Each head h decays at gamma_h = 1 - 2^(-5-h); queries and keys
#    rotated (rotary positions); inside a chunk of C tokens the parallel form, (Q K^T . D)
#    V with D the causal decay mask; across chunks a (batch, heads, d, d) state R, the
#    chunk's cross term (Q R) . gamma^(i+1) and the update R <- gamma^C R + K^T (V .
#    gamma^(C-1-j)); the chunk outputs (strided slices of the sequence) concatenated, a
#    group norm per head, a swish gate, an output projection; pre-norm blocks with a GELU
#    feed-forward. A language model on seventeenth_models' Markov text. AdamW (betas 0.9,
#    0.98, weight decay 0.05) under warm-up and linear decay.
class Retention(nn.Module):
    def __init__(self, dim, heads, chunk):
        super().__init__()
        self.heads, self.chunk = heads, chunk
        self.q, self.k, self.v, self.g, self.o = (nn.Linear(dim, dim, bias=False)
                                                  for _ in range(5))
        self.norm = nn.GroupNorm(heads, dim)
        gamma = (1 - 2.0 ** (-5 - np.arange(heads))).reshape(heads, 1, 1)
        i = np.arange(chunk)
        self.inner = _tensor(np.where(i[:, None] >= i[None, :],
                                      gamma ** (i[:, None] - i[None, :]), 0.0))   # (h, C, C)
        self.query_decay = _tensor(gamma ** (i.reshape(1, -1, 1) + 1))            # (h, C, 1)
        self.key_decay = _tensor(gamma ** (chunk - 1 - i.reshape(1, -1, 1)))      # (h, C, 1)
        self.chunk_decay = _tensor(gamma ** chunk)                                # (h, 1, 1)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        q, k, v = (split_heads(f(x), self.heads) for f in (self.q, self.k, self.v))
        q = q * cos + _rotate_half(q) * sin
        k = (k * cos + _rotate_half(k) * sin) * (1 / math.sqrt(k.shape[-1]))
        e, c = q.shape[-1], self.chunk
        state = F.zeros((b, self.heads, e, e))
        outputs = []
        for start in range(0, s, c):
            qi, ki, vi = (t[:, :, start:start + c] for t in (q, k, v))
            inner = F.matmul(F.matmul(qi, ki, transpose_b=True) * self.inner, vi)
            outputs.append(inner + F.matmul(qi, state) * self.query_decay)
            state = state * self.chunk_decay + F.matmul(ki * self.key_decay, vi, transpose_a=True)
        y = F.reshape(merge_heads(F.concat(outputs, axis=2)), (b * s, d))
        y = F.reshape(self.norm(y), (b, s, d))
        return self.o(F.silu(self.g(x)) * y)


class RetNetBlock(nn.Module):
    def __init__(self, dim, heads, chunk):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.retention = Retention(dim, heads, chunk)
        self.ffn = mlp([dim, 2 * dim, dim], nn.GELU)

    def forward(self, x, cos, sin):
        x = x + self.retention(self.norm1(x), cos, sin)
        return x + self.ffn(self.norm2(x))


class RetNet(nn.Module):
    def __init__(self, vocab, dim, heads, layers, chunk, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([RetNetBlock(dim, heads, chunk) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        e = dim // heads
        angle = np.arange(seq)[:, None] * (10000.0 ** (-np.arange(e // 2) * 2 / e))[None]
        angle = np.concatenate([angle, angle], axis=1)
        self.cos, self.sin = _tensor(np.cos(angle)), _tensor(np.sin(angle))

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        return self.head(self.norm(x))


def _retnet(c):
    rng = np.random.default_rng(911)
    vocab = c["vocab"]
    batches = [_markov_text(rng, c["batch"], c["seq"] + 1, vocab) for _ in range(4)]
    batches = [(imp.Tensor(b[:, :-1]), imp.Tensor(b[:, 1:].reshape(-1))) for b in batches]
    model = RetNet(vocab, c["dim"], c["heads"], c["layers"], c["chunk"], c["seq"])
    opt = optim.AdamW(model.parameters(), 1e-3, betas=(0.9, 0.98), weight_decay=0.05)
    schedule = LambdaLR(opt, _warmup_linear(10, 1000))
    next_batch = _cycle(batches)

    def loss_of():
        tokens, targets = next_batch()
        return F.cross_entropy(F.reshape(model(tokens), (-1, vocab)), targets)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 4. PointNet++ (Qi et al.) with multi-scale grouping, on eighteenth_models' point clouds:
#    farthest-point sampling and ball queries (the first `k` points within a radius, the
#    first repeated where fewer) on the coordinates, outside the recording, as their CUDA
#    kernels do; a first set abstraction at two radii, each ball's points gathered by
#    index_select from the flattened batch, their coordinates relative to the centroid,
#    a shared MLP with batch norm and a max over the ball, the two scales concatenated; a
#    second abstraction over the centroids (features and coordinates gathered again), a
#    global one, an MLP head with dropout. Adam with weight decay, the rate times 0.7
#    every 20 steps (the paper's every 20 epochs).
def _farthest_points(points, m):
    chosen = [0]
    distance = np.full(len(points), np.inf)
    for _ in range(m - 1):
        distance = np.minimum(distance, ((points - points[chosen[-1]]) ** 2).sum(1))
        chosen.append(int(distance.argmax()))
    return np.array(chosen)


def _ball(points, centres, radius, k):
    within = ((centres[:, None] - points[None]) ** 2).sum(2) <= radius * radius
    out = np.empty((len(centres), k), np.int64)
    for i, row in enumerate(within):
        found = np.flatnonzero(row)[:k]
        out[i] = np.concatenate([found, np.full(k - len(found), found[0])])
    return out


def _point_batch(rng, c):
    clouds, labels = _shapes(rng, c["batch"], c["points"])
    xyz = clouds.numpy()
    b, n = xyz.shape[:2]
    m1, m2 = c["centroids"]
    first, balls, second, ball2 = [], [[] for _ in c["radii"]], [], []
    for s in range(b):
        i1 = _farthest_points(xyz[s], m1)
        c1 = xyz[s][i1]
        first.append(i1 + s * n)
        for r, (radius, k) in enumerate(zip(c["radii"], c["ks"])):
            balls[r].append(_ball(xyz[s], c1, radius, k) + s * n)
        i2 = _farthest_points(c1, m2)
        second.append(i2 + s * m1)
        ball2.append(_ball(c1, c1[i2], 2 * c["radii"][-1], c["ks"][-1]) + s * m1)

    def index(parts):
        return imp.Tensor(np.concatenate(parts).reshape(-1).astype(np.int32))
    return (clouds, index(first), [index(part) for part in balls], index(second),
            index(ball2), labels)


def _shared_mlp(widths):
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b, bias=False), nn.BatchNorm1d(b), nn.ReLU()]
    return nn.Sequential(*layers)


def _group(xyz, features, centres, index, k, radius, mlp_):
    """The balls' points (index into xyz's rows) through `mlp_`, max over each ball."""
    m = centres.shape[0]
    rel = (F.reshape(F.index_select(xyz, 0, index), (m, k, 3)) - F.expand_dims(centres, 1))
    parts = [rel * (1 / radius)]
    if features is not None:
        parts.append(F.reshape(F.index_select(features, 0, index), (m, k, -1)))
    h = mlp_(F.reshape(F.concat(parts, axis=2), (m * k, -1)))
    return F.max(F.reshape(h, (m, k, -1)), axis=1)


class PointNet2(nn.Module):
    def __init__(self, c, classes=8):
        super().__init__()
        self.c = c
        w = c["width"]
        self.scales = nn.ModuleList([_shared_mlp([3, w, w, 2 * w]) for _ in c["radii"]])
        cin = 2 * w * len(c["radii"])
        self.second = _shared_mlp([cin + 3, 2 * w, 2 * w, 4 * w])
        self.third = _shared_mlp([4 * w + 3, 4 * w, 8 * w])
        self.head = nn.Sequential(nn.Linear(8 * w, 4 * w, bias=False), nn.BatchNorm1d(4 * w),
                                  nn.ReLU(), nn.Dropout(0.5), nn.Linear(4 * w, 2 * w, bias=False),
                                  nn.BatchNorm1d(2 * w), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Linear(2 * w, classes))

    def forward(self, clouds, first, balls, second, ball2):
        c = self.c
        b, n, _ = clouds.shape
        xyz = F.reshape(clouds, (b * n, 3))
        c1 = F.index_select(xyz, 0, first)                                  # (b m1, 3)
        f1 = F.concat([_group(xyz, None, c1, ball, k, radius, mlp_) for ball, k, radius, mlp_
                       in zip(balls, c["ks"], c["radii"], self.scales)], axis=1)
        c2 = F.index_select(c1, 0, second)                                  # (b m2, 3)
        f2 = _group(c1, f1, c2, ball2, c["ks"][-1], 2 * c["radii"][-1], self.second)
        m2 = c["centroids"][1]
        h = self.third(F.concat([c2, f2], axis=1))
        return self.head(F.max(F.reshape(h, (b, m2, -1)), axis=1))


def _pointnet2(c):
    rng = np.random.default_rng(913)
    batches = [_point_batch(rng, c) for _ in range(4)]
    model = PointNet2(c)
    opt = optim.Adam(model.parameters(), 1e-3, weight_decay=1e-4)
    schedule = StepLR(opt, 20, 0.7)
    next_batch = _cycle(batches)

    def loss_of():
        *inputs, labels = next_batch()
        return F.cross_entropy(model(*inputs), labels)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 5. ESRGAN's generator (Wang et al.), its PSNR-oriented stage: residual-in-residual dense
#    blocks, each three dense blocks of five 3x3 convs where every conv reads the
#    channel concatenation of the block's input and all its earlier outputs (LeakyReLU
#    0.2), the block's output scaled by 0.2 and added to its input, the RRDB's likewise;
#    a trunk conv and a long skip; nearest x2 upsampling and convs to RGB. Textures
#    downsampled 2x by averaging; an L1 loss against the originals. Adam (betas 0.9, 0.99)
#    halved at milestones.
class DenseBlock(nn.Module):
    def __init__(self, nf, gc):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(nf + i * gc, gc if i < 4 else nf, 3, padding=1)
                                    for i in range(5)])

    def forward(self, x):
        features = [x]
        for conv in self.convs[:4]:
            features.append(F.leaky_relu(conv(F.concat(features, axis=1)), 0.2))
        return x + 0.2 * self.convs[4](F.concat(features, axis=1))


class RRDB(nn.Module):
    def __init__(self, nf, gc):
        super().__init__()
        self.dense = nn.Sequential(*[DenseBlock(nf, gc) for _ in range(3)])

    def forward(self, x):
        return x + 0.2 * self.dense(x)


class RRDBNet(nn.Module):
    def __init__(self, nf, gc, blocks):
        super().__init__()
        self.first = nn.Conv2d(3, nf, 3, padding=1)
        self.trunk = nn.Sequential(*[RRDB(nf, gc) for _ in range(blocks)])
        self.trunk_conv = nn.Conv2d(nf, nf, 3, padding=1)
        self.up = nn.Conv2d(nf, nf, 3, padding=1)
        self.hr = nn.Conv2d(nf, nf, 3, padding=1)
        self.last = nn.Conv2d(nf, 3, 3, padding=1)

    def forward(self, x):
        fea = self.first(x)
        fea = fea + self.trunk_conv(self.trunk(fea))
        fea = F.leaky_relu(self.up(F.interpolate(fea, scale_factor=2, mode="nearest")), 0.2)
        return self.last(F.leaky_relu(self.hr(fea), 0.2))


def _rrdb(c):
    rng = np.random.default_rng(915)
    batches = []
    for _ in range(4):
        hr = _textures(rng, c["batch"], 2 * c["size"])[0].numpy() * 0.3
        lr = hr.reshape(hr.shape[0], 3, c["size"], 2, c["size"], 2).mean(axis=(3, 5))
        batches.append((_tensor(lr), _tensor(hr)))
    model = RRDBNet(c["nf"], c["gc"], c["blocks"])
    opt = optim.Adam(model.parameters(), 2e-4, betas=(0.9, 0.99))
    schedule = MultiStepLR(opt, [200, 400, 600, 800], 0.5)
    next_batch = _cycle(batches)

    def loss_of():
        lr, hr = next_batch()
        return F.mean(F.abs(model(lr) - hr))
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 6. A Latent ODE (Chen et al., "Neural ordinary differential equations"; Rubanova et al.)
#    on irregularly sampled spirals: a batch shares a sorted set of random times, each
#    spiral observed at a random subset (masks); a GRU runs backwards over the times, its
#    input the masked point, the mask and the time gap, its state updated only where the
#    point was observed (a blend by the mask); q(z0) from the last state, z0 sampled by
#    reparameterisation; the latent trajectory integrated forwards by a Dormand-Prince
#    5(4) step unrolled `substeps` times over every interval (seven stages, each the ODE
#    MLP on a weighted sum of the earlier stages); a decoder at every time; the masked
#    Gaussian negative log-likelihood plus the KL to N(0, 1). Adam under exponential decay.
_DOPRI_A = [[], [1 / 5], [3 / 40, 9 / 40], [44 / 45, -56 / 15, 32 / 9],
            [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
            [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656]]
_DOPRI_B = [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84]


def _dopri_step(f, z, h):
    stages = []
    for a in _DOPRI_A:
        arg = z
        for weight, k in zip(a, stages):
            if weight:
                arg = arg + (h * weight) * k
        stages.append(f(arg))
    return z + sum((h * w) * k for w, k in zip(_DOPRI_B, stages) if w)


class LatentODE(nn.Module):
    def __init__(self, obs, latent, hidden, units):
        super().__init__()
        self.gru = nn.GRUCell(2 * obs + 1, hidden)
        self.hidden = hidden
        self.to_q = nn.Linear(hidden, 2 * latent)
        self.func = mlp([latent, units, units, latent], nn.ELU)
        self.decoder = mlp([latent, units, obs])

    def forward(self, x, mask, times, substeps):
        """x, mask (b, T, obs); the negative ELBO per observed value."""
        b, length, _ = x.shape
        h = F.zeros((b, self.hidden))
        for t in reversed(range(length)):
            gap = times[t + 1] - times[t] if t + 1 < length else 0.0
            m = mask[:, t, :1]
            inputs = F.concat([x[:, t] * mask[:, t], mask[:, t], F.full((b, 1), gap)], axis=1)
            h = m * self.gru(inputs, h) + (1 - m) * h
        mean, log_var = F.split(self.to_q(h), 2, axis=1)
        z = mean + F.exp(0.5 * log_var) * imp.random.normal(size=mean.shape)
        outputs = [self.decoder(z)]
        for t in range(1, length):
            step = (times[t] - times[t - 1]) / substeps
            for _ in range(substeps):
                z = _dopri_step(self.func, z, step)
            outputs.append(self.decoder(z))
        predicted = F.stack(outputs, axis=1)
        nll = F.sum(mask * (predicted - x) ** 2) * (0.5 / 0.1 ** 2) / F.sum(mask)
        kl = 0.5 * F.mean(F.sum(F.exp(log_var) + mean * mean - 1 - log_var, axis=1))
        return nll + kl / length


def _spirals(rng, n, length):
    times = np.sort(rng.uniform(0, 6, length))
    times[0] = 0.0
    start = rng.uniform(0, 2 * np.pi, n)[:, None]
    direction = np.where(rng.uniform(size=n) < 0.5, -1, 1)[:, None]
    radius = (1.5 - 0.2 * times)[None]
    angle = start + direction * times[None]
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=2)
    x += 0.05 * rng.standard_normal(x.shape)
    mask = (rng.uniform(size=(n, length, 1)) < 0.5).astype(np.float64)
    mask[:, 0] = 1
    return _tensor(x), _tensor(np.repeat(mask, 2, axis=2)), [float(t) for t in times]


def _latent_ode(c):
    rng = np.random.default_rng(917)
    batches = [_spirals(rng, c["batch"], c["length"]) for _ in range(4)]
    model = LatentODE(2, c["latent"], c["hidden"], c["units"])
    opt = optim.Adam(model.parameters(), 5e-3)
    schedule = ExponentialLR(opt, 0.999)
    next_batch = _cycle(batches)

    def loss_of():
        x, mask, times = next_batch()
        return model(x, mask, times, c["substeps"])
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 7. BigBird (Zaheer et al.) as a masked language model: the sequence cut into blocks;
#    every query block attends to the first (global) block, itself and its two neighbours
#    (rolls of the key blocks, wrapping round as the paper's implementation) and `random`
#    random blocks drawn each forward outside the recording and gathered by index_select
#    along the block axis, one softmax over the (4 + random) blocks' keys; the first query
#    block attends to the whole sequence and replaces its block by concatenation. Post-norm
#    BERT blocks; 15% of the tokens masked; the masked positions picked from the flattened
#    output by index_select, a transform and a decoder tied to the token embedding. AdamW
#    under warm-up and linear decay.
class BigBirdAttention(nn.Module):
    def __init__(self, dim, heads, block, random_blocks, rng):
        super().__init__()
        self.heads, self.block, self.random = heads, block, random_blocks
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.rng = rng

    def _random_blocks(self, nb):
        picks = []
        for i in range(nb):
            allowed = [j for j in range(1, nb) if abs(j - i) > 1 and not (i == 0 or j == 0)]
            allowed = allowed or list(range(nb))
            picks.append(self.rng.choice(allowed, self.random, replace=len(allowed) < self.random))
        return imp.Tensor(np.concatenate(picks).astype(np.int32))

    def forward(self, x):
        b, s, d = x.shape
        nb, bs = s // self.block, self.block
        q, k, v = (split_heads(t, self.heads) for t in F.split(self.qkv(x), 3, axis=2))
        e = q.shape[-1]
        q = q * (1 / math.sqrt(e))
        qb, kb, vb = (F.reshape(t, (b, self.heads, nb, bs, e)) for t in (q, k, v))
        picks = self._random_blocks(nb)

        def gathered(t):
            return F.concat([
                F.broadcast_to(t[:, :, :1], t.shape), F.roll(t, 1, axis=2), t,
                F.roll(t, -1, axis=2),
                F.reshape(F.index_select(t, 2, picks), (b, self.heads, nb, self.random * bs, e))],
                axis=3)
        scores = F.matmul(qb, gathered(kb), transpose_b=True)
        sparse = F.matmul(F.softmax(scores, axis=-1), gathered(vb))        # (b, h, nb, bs, e)
        first = F.matmul(F.softmax(F.matmul(qb[:, :, 0], k, transpose_b=True), axis=-1), v)
        y = F.concat([F.expand_dims(first, 2), sparse[:, :, 1:]], axis=2)
        return self.out(merge_heads(F.reshape(y, (b, self.heads, s, e))))


class BertBlock(nn.Module):
    def __init__(self, dim, heads, block, random_blocks, rng):
        super().__init__()
        self.attention = BigBirdAttention(dim, heads, block, random_blocks, rng)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = mlp([dim, 4 * dim, dim], nn.GELU)

    def forward(self, x):
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.ffn(x))


class BigBirdMLM(nn.Module):
    def __init__(self, vocab, dim, heads, layers, block, random_blocks, seq):
        super().__init__()
        rng = np.random.default_rng(919)
        self.embed = nn.Embedding(vocab + 1, dim)
        self.embed.weight[...] = _tensor(rng.normal(0, 0.02, (vocab + 1, dim)))
        self.position = _parameter(rng.normal(0, 0.02, (seq, dim)))
        self.norm = nn.LayerNorm(dim)
        self.blocks = nn.Sequential(*[BertBlock(dim, heads, block, random_blocks, rng)
                                      for _ in range(layers)])
        self.transform = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim))
        self.bias = _parameter(np.zeros(vocab + 1))

    def forward(self, tokens, positions):
        b, s = tokens.shape
        h = self.blocks(self.norm(self.embed(tokens) + self.position))
        picked = self.transform(F.index_select(F.reshape(h, (b * s, -1)), 0, positions))
        return F.matmul(picked, self.embed.weight, transpose_b=True) + self.bias


def _bigbird(c):
    rng = np.random.default_rng(921)
    vocab = c["vocab"]
    batches = []
    for _ in range(4):
        text = _markov_text(rng, c["batch"], c["seq"], vocab)
        masked = rng.uniform(size=text.shape) < 0.15
        masked[:, 0] = True
        inputs = np.where(masked, vocab, text).astype(np.int32)
        batches.append((imp.Tensor(inputs), imp.Tensor(np.flatnonzero(masked).astype(np.int32)),
                        imp.Tensor(text.reshape(-1)[masked.reshape(-1)].astype(np.int32))))
    model = BigBirdMLM(vocab, c["dim"], c["heads"], c["layers"], c["block"], c["random"],
                       c["seq"])
    opt = optim.AdamW(model.parameters(), 5e-4, weight_decay=0.01)
    schedule = LambdaLR(opt, _warmup_linear(10, 1000))
    next_batch = _cycle(batches)

    def loss_of():
        tokens, positions, targets = next_batch()
        return F.cross_entropy(model(tokens, positions), targets)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 8. Glow (Kingma and Dhariwal): `levels` levels, each a squeeze (pixel_unshuffle) and
#    `steps` flow steps: ActNorm (initialised from the first batch's statistics, outside
#    the recording), an invertible 1x1 conv LU-decomposed, W = P (L + I) (U + diag(sign
#    exp s)) rebuilt from its factors every step, and an affine coupling whose network
#    (3x3, 1x1 and a zero-initialised 3x3 conv) gives a shift and a scale as every other
#    channel (strided slices), scale = sigmoid(. + 2); after each level but the last half
#    the channels factored out under a Gaussian whose mean and log-scale a zero conv
#    predicts from the other half, the last under a learned prior. Textures quantised to
#    5 bits, dequantised with uniform noise each step; bits per dimension. Adam with
#    linear warm-up, clipped to 50.
class ActNorm(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bias = _parameter(np.zeros((1, channels, 1, 1)))
        self.log_scale = _parameter(np.zeros((1, channels, 1, 1)))
        self.ready = False

    def forward(self, x):
        if not self.ready:
            a = x.numpy()
            self.bias[...] = _tensor(-a.mean(axis=(0, 2, 3), keepdims=True))
            self.log_scale[...] = _tensor(-np.log(a.std(axis=(0, 2, 3), keepdims=True) + 1e-6))
            self.ready = True
        return (x + self.bias) * F.exp(self.log_scale), x.shape[2] * x.shape[3] * F.sum(
            self.log_scale)


class InvertibleConv(nn.Module):
    def __init__(self, channels, rng):
        super().__init__()
        w, _ = np.linalg.qr(rng.standard_normal((channels, channels)))
        p, lower, upper = _plu(w)
        s = np.diag(upper)
        self.p = _tensor(p)
        self.sign = _tensor(np.sign(s))
        self.lower = _parameter(lower)
        self.upper = _parameter(np.triu(upper, 1))
        self.log_s = _parameter(np.log(np.abs(s)))
        self.lower_mask = _tensor(np.tril(np.ones((channels, channels)), -1))
        self.eye = _tensor(np.eye(channels))

    def forward(self, x):
        c = x.shape[1]
        lower = self.lower * self.lower_mask + self.eye
        upper = self.upper * F.transpose(self.lower_mask, (1, 0)) + self.eye * (
            self.sign * F.exp(self.log_s))
        w = F.matmul(self.p, F.matmul(lower, upper))
        return F.conv2d(x, F.reshape(w, (c, c, 1, 1))), x.shape[2] * x.shape[3] * F.sum(self.log_s)


def _plu(w):
    """w = p l u (partial pivoting), numpy."""
    n = len(w)
    u, p, lower = w.copy(), np.eye(n), np.zeros((n, n))
    for i in range(n):
        pivot = i + np.abs(u[i:, i]).argmax()
        for a in (u, p, lower):
            a[[i, pivot]] = a[[pivot, i]]
        for j in range(i + 1, n):
            lower[j, i] = u[j, i] / u[i, i]
            u[j] -= lower[j, i] * u[i]
    return p.T, lower, u


class ZeroConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.conv.weight[...] = 0.0
        self.conv.bias[...] = 0.0
        self.logs = _parameter(np.zeros((1, cout, 1, 1)))

    def forward(self, x):
        return self.conv(x) * F.exp(self.logs * 3)


class Coupling(nn.Module):
    def __init__(self, channels, hidden):
        super().__init__()
        half = channels // 2
        self.net = nn.Sequential(nn.Conv2d(half, hidden, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(hidden, hidden, 1), nn.ReLU(),
                                 ZeroConv(hidden, 2 * (channels - half)))

    def forward(self, x):
        fixed, moved = F.split(x, 2, axis=1)
        h = self.net(fixed)
        shift, scale = h[:, 0::2], F.sigmoid(h[:, 1::2] + 2.0)
        return (F.concat([fixed, (moved + shift) * scale], axis=1),
                F.sum(F.log(scale), axis=(1, 2, 3)))


def _log_gaussian(x, mean, log_scale):
    return F.sum(-0.5 * (math.log(2 * math.pi) + 2 * log_scale
                         + (x - mean) ** 2 * F.exp(-2 * log_scale)), axis=(1, 2, 3))


class Glow(nn.Module):
    def __init__(self, levels, steps, hidden, size, rng):
        super().__init__()
        flows, priors, channels = [], [], 3
        for level in range(levels):
            channels *= 4
            for _ in range(steps):
                flows += [ActNorm(channels), InvertibleConv(channels, rng),
                          Coupling(channels, hidden)]
            if level < levels - 1:
                priors.append(ZeroConv(channels // 2, channels))
                channels //= 2
        self.flows, self.priors = nn.ModuleList(flows), nn.ModuleList(priors)
        self.levels, self.steps = levels, steps
        side = size // 2 ** levels
        self.top = _parameter(np.zeros((1, 2 * channels, side, side)))

    def forward(self, x):
        log_p, log_det = 0, 0
        flows = iter(self.flows)
        for level in range(self.levels):
            x = F.pixel_unshuffle(x, 2)
            for _ in range(3 * self.steps):
                x, ld = next(flows)(x)
                log_det = log_det + ld
            if level < self.levels - 1:
                x, z = F.split(x, 2, axis=1)
                mean, log_scale = F.split(self.priors[level](x), 2, axis=1)
                log_p = log_p + _log_gaussian(z, mean, log_scale)
        mean, log_scale = F.split(F.broadcast_to(self.top, (x.shape[0],) + self.top.shape[1:]),
                                  2, axis=1)
        return log_p + _log_gaussian(x, mean, log_scale) + log_det


def _glow(c):
    rng = np.random.default_rng(923)
    bins = 32
    batches = []
    for _ in range(4):
        x = np.clip(_textures(rng, c["batch"], c["size"])[0].numpy() * 0.25 + 0.5, 0, 0.999)
        batches.append(_tensor(np.floor(x * bins) / bins - 0.5))
    model = Glow(c["levels"], c["steps"], c["hidden"], c["size"], rng)
    opt = optim.Adam(model.parameters(), 1e-3)
    schedule = LambdaLR(opt, lambda k: min(1.0, (k + 1) / 20))
    next_batch = _cycle(batches)
    dims = 3 * c["size"] ** 2

    def loss_of():
        x = next_batch()
        x = x + imp.random.uniform(0, 1 / bins, size=x.shape)
        log_likelihood = model(x) - dims * math.log(bins)
        return -F.mean(log_likelihood) / (dims * math.log(2))
    return _then(_step_with_clip(model.parameters(), opt, loss_of, 50.0), schedule.step)


# ---------------------------------------------------------------------------------------
# 9. MixMatch (Berthelot et al.): a labelled batch augmented once, an unlabelled batch
#    augmented K times (seventeenth_models' augmentation: flips, jitter, erasing), labels
#    guessed as the mean of the K views' softmax (a forward pass of its own, detached) and
#    sharpened at T = 0.5; the labelled and K unlabelled batches concatenated with their
#    targets and mixed with a permutation of themselves (index_select) by lambda' =
#    max(lambda, 1 - lambda), lambda ~ Beta(0.75, 0.75); one forward of the mixed batch;
#    soft cross entropy on the labelled part, a squared error on the unlabelled part under
#    a linear ramp. Adam, then weight decay applied in place (0.02 lr) and an EMA model
#    updated in place after every step.
def _mixmatch(c):
    rng = np.random.default_rng(925)
    batch = c["batch"]
    labelled = [_textures(rng, batch, c["size"]) for _ in range(4)]
    unlabelled = [_textures(rng, batch, c["size"])[0] for _ in range(4)]
    model, ema = WideNet(c["width"], 10), WideNet(c["width"], 10)
    _copy_into(ema, model)
    params = model.parameters()
    lr = 2e-3
    opt = optim.Adam(params, lr)
    next_labelled, next_unlabelled = _cycle(labelled), _cycle(unlabelled)
    count = {"steps": 0}
    k = c["k"]

    def loss_of():
        (x, labels), u = next_labelled(), next_unlabelled()
        x = _augment(x)
        views = [_augment(u) for _ in range(k)]
        guess = sum(F.softmax(model(v), axis=1) for v in views) * (1 / k)
        sharp = guess ** 2
        sharp = (sharp / F.sum(sharp, axis=1, keepdims=True)).detach()
        inputs = F.concat([x] + views, axis=0)
        targets = F.concat([F.one_hot(labels, 10).astype("float32")] + [sharp] * k, axis=0)
        order = imp.Tensor(rng.permutation(inputs.shape[0]).astype(np.int32))
        lam = rng.beta(0.75, 0.75)
        lam = max(lam, 1 - lam)
        mixed = lam * inputs + (1 - lam) * F.index_select(inputs, 0, order)
        mixed_targets = lam * targets + (1 - lam) * F.index_select(targets, 0, order)
        logits = model(mixed)
        n = x.shape[0]
        supervised = -F.mean(F.sum(F.log_softmax(logits[:n], axis=1) * mixed_targets[:n], axis=1))
        consistency = F.mean((F.softmax(logits[n:], axis=1) - mixed_targets[n:]) ** 2)
        ramp = min(1.0, count["steps"] / 1024)
        count["steps"] += 1
        return supervised + c["lambda_u"] * ramp * consistency

    def after():
        for e, p in zip(ema.parameters(), params):
            p[...] = p * (1 - 0.02 * lr)
            e[...] = e * 0.999 + p.detach() * 0.001
    return _then(stepper(params, opt, loss_of), after)


# ---------------------------------------------------------------------------------------
# 10. A Graph U-Net (Gao and Ji) for node classification on stochastic block model graphs
#     (dense, batched; noisy community features): GCN layers on the normalised adjacency
#     with self-loops; gPool scores the nodes by a projection on a learned vector, keeps
#     the top k (indices by topk on the detached scores), gathers their features and gates
#     them by the tanh of their gathered scores, and gathers the squared adjacency (the
#     paper's connectivity augmentation) by rows then columns; gUnpool scatters a level's
#     features back into zeros at the kept indices by scatter_add, the skip from the
#     encoder added; the first layer's features concatenated before the classifier. Adam
#     with weight decay, dropout on the features.
def _normalised(adjacency):
    n = adjacency.shape[1]
    a = adjacency + _tensor(np.eye(n))
    d = F.rsqrt(F.sum(a, axis=2))
    return a * F.expand_dims(d, 2) * F.expand_dims(d, 1)


class GCN(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.linear = nn.Linear(cin, cout)

    def forward(self, x, a):
        return F.elu(F.matmul(a, self.linear(x)))


class GPool(nn.Module):
    def __init__(self, dim, ratio):
        super().__init__()
        self.project = nn.Linear(dim, 1, bias=False)
        self.ratio = ratio

    def forward(self, x, adjacency):
        b, n, c = x.shape
        k = max(2, int(self.ratio * n))
        w = self.project.weight
        score = F.squeeze(self.project(x), 2) * F.rsqrt(F.sum(w * w))
        index = F.topk(score.detach(), k, axis=1)[1]                         # (b, k)
        gate = F.tanh(F.gather(score, 1, index))
        kept = F.gather(x, 1, F.broadcast_to(F.expand_dims(index, 2), (b, k, c)))
        square = (F.matmul(adjacency, adjacency) + adjacency > 0).astype("float32")
        rows = F.gather(square, 1, F.broadcast_to(F.expand_dims(index, 2), (b, k, n)))
        pooled = F.gather(rows, 2, F.broadcast_to(F.expand_dims(index, 1), (b, k, k)))
        return kept * F.expand_dims(gate, 2), pooled, index


def _unpool(h, index, n):
    b, k, c = h.shape
    return F.scatter_add(F.zeros((b, n, c)), 1,
                         F.broadcast_to(F.expand_dims(index, 2), (b, k, c)), h)


class GraphUNet(nn.Module):
    def __init__(self, cin, dim, classes, ratios, dropout=0.3):
        super().__init__()
        self.start = GCN(cin, dim)
        self.down = nn.ModuleList([GCN(dim, dim) for _ in ratios])
        self.pools = nn.ModuleList([GPool(dim, r) for r in ratios])
        self.bottom = GCN(dim, dim)
        self.up = nn.ModuleList([GCN(dim, dim) for _ in ratios])
        self.out = nn.Linear(2 * dim, classes)
        self.dropout = dropout

    def forward(self, x, adjacency):
        x = F.dropout(x, self.dropout, training=self.training)
        h = first = self.start(x, _normalised(adjacency))
        stack = []
        for gcn, pool in zip(self.down, self.pools):
            h = gcn(h, _normalised(adjacency))
            stack.append((h, adjacency))
            h, adjacency, index = pool(h, adjacency)
            stack[-1] += (index,)
        h = self.bottom(h, _normalised(adjacency))
        for gcn, (skip, adjacency, index) in zip(self.up, reversed(stack)):
            h = gcn(_unpool(h, index, skip.shape[1]) + skip, _normalised(adjacency))
        h = F.dropout(F.concat([h, first], axis=2), self.dropout, training=self.training)
        return self.out(h)


def _block_graphs(rng, n, nodes, communities, features):
    labels = rng.integers(0, communities, (n, nodes))
    same = labels[:, :, None] == labels[:, None, :]
    upper = np.triu(rng.uniform(size=(n, nodes, nodes)) < np.where(same, 8 / nodes, 1 / nodes), 1)
    adjacency = (upper | upper.transpose(0, 2, 1)).astype(np.float64)
    means = np.random.default_rng(927).standard_normal((communities, features))
    x = 0.7 * means[labels] + rng.standard_normal((n, nodes, features))
    return _tensor(x), _tensor(adjacency), imp.Tensor(labels.reshape(-1).astype(np.int32))


def _graph_unet(c):
    rng = np.random.default_rng(929)
    batches = [_block_graphs(rng, c["batch"], c["nodes"], 6, c["features"]) for _ in range(4)]
    model = GraphUNet(c["features"], c["dim"], 6, c["ratios"])
    opt = optim.Adam(model.parameters(), 0.01, weight_decay=1e-3)
    next_batch = _cycle(batches)

    def loss_of():
        x, adjacency, labels = next_batch()
        return F.cross_entropy(F.reshape(model(x, adjacency), (-1, 6)), labels)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "dino": dict(size=32, patch=4, dim=64, heads=4, layers=3, hidden=128, bottleneck=64,
                 prototypes=512, local=4, batch=24),
    "graphormer": dict(nodes=24, hops=5, dim=64, heads=8, layers=3, batch=48),
    "retnet": dict(vocab=256, dim=128, heads=4, layers=3, chunk=32, seq=256, batch=8),
    "pointnet2": dict(points=256, centroids=(64, 16), radii=(0.2, 0.4), ks=(8, 16), width=32,
                      batch=8),
    "rrdb": dict(nf=32, gc=16, blocks=2, size=16, batch=8),
    "latent_ode": dict(latent=8, hidden=32, units=64, length=20, substeps=1, batch=192),
    "bigbird": dict(vocab=256, dim=64, heads=4, layers=2, block=16, random=2, seq=256, batch=8),
    "glow": dict(levels=3, steps=3, hidden=48, size=32, batch=32),
    "mixmatch": dict(width=16, size=24, k=2, lambda_u=75.0, batch=32),
    "graph_unet": dict(nodes=200, features=32, dim=64, ratios=(0.9, 0.7, 0.6, 0.5), batch=8),
}
# the tests' sizes: a step of a few tens of milliseconds
CONFIGS = {
    "dino": dict(size=16, patch=4, dim=16, heads=2, layers=1, hidden=32, bottleneck=16,
                 prototypes=32, local=2, batch=4),
    "graphormer": dict(nodes=8, hops=3, dim=16, heads=2, layers=1, batch=4),
    "retnet": dict(vocab=32, dim=16, heads=2, layers=1, chunk=4, seq=16, batch=4),
    "pointnet2": dict(points=32, centroids=(8, 4), radii=(0.3, 0.6), ks=(4, 6), width=8,
                      batch=4),
    "rrdb": dict(nf=8, gc=4, blocks=1, size=6, batch=2),
    "latent_ode": dict(latent=4, hidden=8, units=16, length=5, substeps=1, batch=8),
    "bigbird": dict(vocab=32, dim=16, heads=2, layers=1, block=4, random=1, seq=32, batch=4),
    "glow": dict(levels=2, steps=1, hidden=8, size=8, batch=4),
    "mixmatch": dict(width=4, size=8, k=2, lambda_u=75.0, batch=4),
    "graph_unet": dict(nodes=24, features=8, dim=16, ratios=(0.8, 0.5), batch=4),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps:
# none here (every model has its own data and step)
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "dino": _dino,
    "graphormer": _graphormer,
    "retnet": _retnet,
    "pointnet2": _pointnet2,
    "rrdb": _rrdb,
    "latent_ode": _latent_ode,
    "bigbird": _bigbird,
    "glow": _glow,
    "mixmatch": _mixmatch,
    "graph_unet": _graph_unet,
}


MODEL_SET = ModelSet(__name__, "tests/nineteenth_models.py", CONFIGS, BENCH_SIZES, BUILDERS,
                     STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
