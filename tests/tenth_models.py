"""Ten more models for the memory manager, ordinary ones as a user would write them from a
PyTorch tutorial or the paper, unlike the zoo and tests/{unseen,fresh,novel,heldout,sixth,
seventh,eighth,ninth}_models.py; written in session 46 by a helper that had not read the
memory manager: Kim's multichannel text CNN (a frozen and a tuned embedding, three filter
widths max-pooled over time, a hand-written Adadelta whose state is rebound by setitem, a
max-norm constraint on the classifier), a graph isomorphism network with edge features
(GINE) on batches of small molecule-like graphs (messages gathered by edge, summed into
padded incoming slots, a readout per layer, masked multi-task BCE), Show, Attend and Tell
(a CNN encoder, an LSTM decoder attending over the feature map at every word, a doubly
stochastic attention penalty, scheduled sampling of its own argmax), a PixelRNN Row LSTM
(a masked 7x7 conv, then LSTMs whose recurrence runs down the image row by row, an 8-way
softmax per pixel), a ResNeXt (grouped 3x3 convs, mixup, cosine-annealed Nesterov SGD),
TransE (a large entity table renormalised in place each step, corrupted triples, a margin
ranking loss, plain SGD), a Wave-U-Net denoiser (1-D convs over long clips, decimation,
linear upsampling, skip concatenations), BiDAF (highway layers, padded BiLSTMs whose state
holds still over the padding, a trilinear similarity, context-to-query and query-to-context
attention, span start and end), a double DQN on vectorised Catch (epsilon-greedy actions
read back each step, a replay buffer, a target network copied every few steps, a Huber
loss) and NeRF (stratified samples along rays, positional encodings, an MLP with a skip,
volume rendering by an exclusive cumulative sum).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/ninth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import CosineAnnealingLR
from imperative.models import cluster_task, conv_bn_relu, global_average
from model_sets import NEG, LSTMCell, ModelSet, bce_with_logits, mlp, stepper
from ninth_models import BatchNorm1d

# ---------------------------------------------------------------------------------------
# helpers: what a PyTorch user would have taken from torch.nn, torch.optim or torch


def _then(step, after):
    """`step`, then `after()` (a constraint applied to the parameters after the update)."""
    def run():
        loss = step()
        after()
        return loss
    return run


def _cycle(items):
    """A function that returns items[0], items[1], ... and wraps around."""
    state = {"i": -1}

    def following():
        state["i"] = (state["i"] + 1) % len(items)
        return items[state["i"]]
    return following


def _huber(pred, target, delta=1.0):
    """torch.nn.functional.huber_loss (smooth_l1_loss for delta 1), mean reduction."""
    err = F.abs(pred - target)
    quad = F.minimum(err, delta)
    return F.mean(0.5 * quad * quad + delta * (err - quad))


def _scatter_sum(values, slots):
    """torch.Tensor.index_add_ (torch_scatter's scatter_sum) by padded lists: row r of the
    result sums the rows of `values` listed in slots[r], which is padded with len(values),
    the index of a zero row appended here."""
    zero = F.zeros((1,) + values.shape[1:])
    return F.sum(F.concat([values, zero], axis=0)[slots], axis=1)


def _exclusive_cumsum(x):
    """torch.cumsum(x, -1) - x, by a product with a strictly upper triangular matrix."""
    n = x.shape[-1]
    return F.matmul(x, imp.Tensor(np.triu(np.ones((n, n), np.float32), 1)))


def _upsample_linear(x):
    """torch.nn.functional.interpolate(scale_factor=2, mode="linear") over the last axis
    (align_corners=False: 3/4 of a sample and 1/4 of its neighbour, edges repeated)."""
    left = F.concat([x[..., :1], x[..., :-1]], axis=-1)
    right = F.concat([x[..., 1:], x[..., -1:]], axis=-1)
    pairs = F.stack([0.75 * x + 0.25 * left, 0.75 * x + 0.25 * right], axis=-1)
    return F.reshape(pairs, x.shape[:-1] + (2 * x.shape[-1],))


def _conv1d(cin, cout, k, **kwargs):
    """torch.nn.Conv2d standing in for torch.nn.Conv1d, over (b, c, 1, t)."""
    return nn.Conv2d(cin, cout, (1, k), padding=(0, k // 2), **kwargs)


class Adadelta:
    """torch.optim.Adadelta (Zeiler): running means of squared gradients and of squared
    updates, tensors rebound in place by setitem each step, as the parameters are."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6):
        self.params, self.lr, self.rho, self.eps = list(params), lr, rho, eps
        self.square_avg = [F.zeros_like(p) for p in self.params]
        self.acc_delta = [F.zeros_like(p) for p in self.params]

    def step(self):
        rho = self.rho
        for p, square_avg, acc_delta in zip(self.params, self.square_avg, self.acc_delta):
            g = p.grad
            if g is None:
                continue
            square_avg[...] = rho * square_avg + (1 - rho) * g * g
            delta = F.sqrt(acc_delta + self.eps) * F.rsqrt(square_avg + self.eps) * g
            acc_delta[...] = rho * acc_delta + (1 - rho) * delta * delta
            p[...] = p - self.lr * delta

    def clear_grad(self):
        for p in self.params:
            p.grad = None


class BiLSTM(nn.Module):
    """torch.nn.LSTM(bidirectional=True, batch_first=True) over padded sequences, without
    pack_padded_sequence: at a padded step the state holds still (so that the backward
    direction starts at each sequence's last real step) and the output is zero."""

    def __init__(self, cin, hidden):
        super().__init__()
        self.fwd, self.bwd = LSTMCell(cin, hidden), LSTMCell(cin, hidden)

    def forward(self, x, mask):                         # (b, t, cin), (b, t) of 0/1
        b, t = mask.shape
        keep = F.split(mask, t, axis=1)                 # (b, 1) each
        outs = []
        for cell, order in ((self.fwd, range(t)), (self.bwd, range(t - 1, -1, -1))):
            gates = cell.project(x)
            h = c = F.zeros((b, cell.hidden))
            seq = [None] * t
            for s in order:
                h_new, c_new = cell.step(gates[s], h, c)
                h = h + keep[s] * (h_new - h)
                c = c + keep[s] * (c_new - c)
                seq[s] = h_new * keep[s]
            outs.append(F.stack(seq, axis=1))
        return F.concat(outs, axis=2)


class MaskedConv2d(nn.Conv2d):
    """PixelCNN's masked convolution: the kernel's taps right of the centre on its row and
    on every row below are zeroed, the centre too for mask "A"."""

    def __init__(self, cin, cout, kernel, mask_type):
        kh, kw = kernel
        super().__init__(cin, cout, kernel, padding=(kh // 2, kw // 2))
        mask = np.ones((cout, cin, kh, kw), np.float32)
        mask[:, :, kh // 2, kw // 2 + (mask_type == "B"):] = 0
        mask[:, :, kh // 2 + 1:] = 0
        self.mask = imp.Tensor(mask)

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, self.bias, padding=self.padding)


# ---------------------------------------------------------------------------------------
# 1. Kim's CNN for sentence classification, the multichannel variant: two channels of
#    word vectors, one frozen (a "pretrained" table, not attached) and one initialised from
#    it and tuned; filters of widths 3, 4 and 5 spanning the whole vector of both channels,
#    ReLU, a max over time; dropout 0.5 and a linear classifier whose rows are rescaled to
#    a norm of at most 3 after each update; Adadelta (rho 0.95). The filters are 1-D convs
#    over the two tables' vectors as channels (torch.nn.Conv1d's form of Kim's Conv2d with
#    2 input channels and a (k, dim) kernel: the same products; that form's conv here takes
#    100x longer). Sentences of varying length (padding 0) with a few cue words of their
#    class among Zipfian filler; eight batches cycle.
class TextCNN(nn.Module):
    def __init__(self, table, widths, maps, classes):
        super().__init__()
        self.static = imp.Tensor(table)
        self.tuned = nn.Parameter(table.copy())
        self.convs = nn.ModuleList([nn.Conv2d(2 * table.shape[1], maps, (1, k)) for k in widths])
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(len(widths) * maps, classes)

    def forward(self, tokens):
        x = F.concat([F.embedding(tokens, self.static), F.embedding(tokens, self.tuned)], axis=2)
        x = F.expand_dims(F.transpose(x, (0, 2, 1)), 2)            # (b, 2 dim, 1, t)
        pooled = [F.max(F.relu(conv(x)), axis=(2, 3)) for conv in self.convs]
        return self.fc(self.drop(F.concat(pooled, axis=1)))


def _sentences(rng, n, length, vocab, classes, cues=20):
    """(tokens (n, length), labels): Zipfian filler words, 2-4 cue words of the sentence's
    class and one of another, a length of length/3 (at least 6) to length, padded with 0."""
    first = 1 + classes * cues
    zipf = 1.0 / np.arange(1, vocab - first + 1)
    tokens = first + rng.choice(vocab - first, (n, length), p=zipf / zipf.sum())
    labels = rng.integers(0, classes, n)
    lengths = rng.integers(max(6, length // 3), length + 1, n)
    for i in range(n):
        wrong = (labels[i] + rng.integers(1, classes)) % classes
        words = [labels[i]] * rng.integers(2, 5) + [wrong]
        at = rng.choice(lengths[i], len(words), replace=False)
        tokens[i, at] = 1 + np.array(words) * cues + rng.integers(0, cues, len(words))
        tokens[i, lengths[i]:] = 0
    return tokens.astype(np.int32), labels.astype(np.int32)


def _max_norm_rows(w, limit):
    """The rows of `w` rescaled, in place, to an l2 norm of at most `limit`."""
    norm = F.sqrt(F.sum(w * w, axis=1, keepdims=True))
    w[...] = w * F.minimum(limit / (norm + 1e-7), 1.0)


def _textcnn(c):
    rng = np.random.default_rng(101)
    vocab, dim, classes = c["vocab"], c["dim"], 5
    batches = [tuple(imp.Tensor(a) for a in _sentences(rng, c["batch"], c["length"], vocab,
                                                       classes)) for _ in range(8)]
    table = (rng.standard_normal((vocab, dim)) * 0.25).astype(np.float32)
    model = TextCNN(table, (3, 4, 5), c["maps"], classes)
    params = model.parameters()
    next_batch = _cycle(batches)

    def loss_of():
        tokens, labels = next_batch()
        return F.cross_entropy(model(tokens), labels)
    step = stepper(params, Adadelta(params, rho=0.95), loss_of)
    return _then(step, lambda: _max_norm_rows(model.fc.weight, 3.0))


# ---------------------------------------------------------------------------------------
# 2. GINE (Hu et al.'s graph isomorphism network with edge features) on batches of small
#    molecule-like graphs: each layer sends along every directed edge relu(h_src + bond
#    embedding), sums the messages into each node (its incoming edges, padded lists), and
#    updates h = BN(MLP((1 + eps) h + sum)), ReLU and dropout between layers; each layer's
#    nodes are summed per graph (a (graphs x nodes) membership product) and the readouts
#    concatenated (jumping knowledge) into a linear head for 8 binary tasks, some labels
#    missing (a masked BCE). Four batches of different sizes cycle; Adam.
class GINELayer(nn.Module):
    def __init__(self, dim, bonds):
        super().__init__()
        self.bond = nn.Embedding(bonds, dim)
        self.eps = nn.Parameter(np.zeros((1,), np.float32))
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), BatchNorm1d(2 * dim), nn.ReLU(),
                                 nn.Linear(2 * dim, dim))
        self.bn = BatchNorm1d(dim)

    def forward(self, h, g):
        messages = F.relu(h[g["src"]] + self.bond(g["bond"]))
        return self.bn(self.mlp((1.0 + self.eps) * h + _scatter_sum(messages, g["incoming"])))


class GINE(nn.Module):
    def __init__(self, atoms, bonds, dim, layers, tasks):
        super().__init__()
        self.atom = nn.Embedding(atoms, dim)
        self.layers = nn.ModuleList([GINELayer(dim, bonds) for _ in range(layers)])
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(dim * (layers + 1), tasks)

    def forward(self, g):
        h = self.atom(g["atoms"])
        readouts = [F.matmul(g["pool"], h)]
        for i, layer in enumerate(self.layers):
            h = layer(h, g)
            h = self.drop(h if i == len(self.layers) - 1 else F.relu(h))
            readouts.append(F.matmul(g["pool"], h))
        return self.head(F.concat(readouts, axis=1))


def _molecule(rng, atoms, bonds):
    """One graph: (atom types, undirected edges (m, 2), bond types): a chain-like tree (each
    atom bonded to one of the four before it) closed by up to two rings."""
    n = int(rng.integers(10, 30))
    kinds = rng.choice(atoms, n, p=np.arange(atoms, 0, -1) / (atoms * (atoms + 1) / 2))
    edges = [(i, int(rng.integers(max(0, i - 4), i))) for i in range(1, n)]
    for _ in range(rng.integers(0, 3)):
        i = int(rng.integers(3, n))
        edges.append((i, int(rng.integers(0, i - 2))))
    kind = rng.choice(bonds, len(edges), p=[0.6, 0.25, 0.1, 0.05][:bonds])
    return kinds, np.array(edges), kind


def _molecule_batch(rng, graphs, atoms, bonds, patterns):
    """A batch of `graphs` molecules as flat Tensors (atoms, src, bond, incoming slots,
    pool membership), their labels for each (atom, bond, atom) pattern (seen more often
    than the pattern's median) and a mask of the labels known."""
    mols = [_molecule(rng, atoms, bonds) for _ in range(graphs)]
    sizes = np.array([len(m[0]) for m in mols])
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    kinds = np.concatenate([m[0] for m in mols])
    pairs = np.concatenate([m[1] + s for m, s in zip(mols, start)])
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    bond = np.concatenate([m[2] for m in mols] * 2)
    incoming = [np.flatnonzero(dst == v) for v in range(len(kinds))]
    slots = np.full((len(kinds), max(map(len, incoming))), len(src))
    for v, edges in enumerate(incoming):
        slots[v, :len(edges)] = edges
    member = np.repeat(np.arange(graphs), sizes)
    counts = np.zeros((graphs, len(patterns)))
    for t, (a, b, z) in enumerate(patterns):
        hit = (kinds[src] == a) & (bond == b) & (kinds[dst] == z)
        counts[:, t] = np.bincount(member[src[hit]], minlength=graphs)
    labels = (counts > np.median(counts, axis=0)).astype(np.float32)
    known = (rng.random(labels.shape) < 0.85).astype(np.float32)
    g = dict(atoms=kinds, src=src, bond=bond, incoming=slots)
    g = {k: imp.Tensor(v.astype(np.int32)) for k, v in g.items()}
    g["pool"] = imp.Tensor((member[None, :] == np.arange(graphs)[:, None]).astype(np.float32))
    return g, imp.Tensor(labels), imp.Tensor(known)


def _gine(c):
    rng = np.random.default_rng(103)
    atoms, bonds, tasks = 9, 4, 8
    patterns = [tuple(int(v) for v in rng.integers(0, [atoms, bonds, atoms])) for _ in
                range(tasks)]
    batches = [_molecule_batch(rng, c["graphs"], atoms, bonds, patterns) for _ in range(4)]
    model = GINE(atoms, bonds, c["dim"], c["layers"], tasks)
    next_batch = _cycle(batches)

    def loss_of():
        g, labels, known = next_batch()
        return F.sum(bce_with_logits(model(g), labels, reduction="none") * known) / F.sum(known)
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 3. Show, Attend and Tell (Xu et al.): a conv encoder to a (s/4 x s/4) grid of feature
#    vectors; an LSTM decoder started from their mean; at every word additive attention
#    over the grid, the context gated by sigmoid(f(h)), the LSTM fed the previous word's
#    embedding and the context, dropout, a linear layer to the vocabulary. The previous
#    word is the caption's, or, with a probability rising over training (scheduled
#    sampling), the decoder's own argmax. Loss: cross entropy plus the doubly stochastic
#    penalty, the mean over the grid of (1 - sum over words of attention)^2 (the PyTorch
#    tutorial's; the paper sums over the grid). Images are grids of
#    coloured glyphs, captions the glyphs in reading order; Adam, gradients clipped.
BOS, END = 0, 1


class ShowAttendTell(nn.Module):
    def __init__(self, ch, vocab, embed, hidden, att):
        super().__init__()
        feat = 2 * ch
        self.encoder = nn.Sequential(conv_bn_relu(3, ch), conv_bn_relu(ch, ch), nn.MaxPool2d(2),
                                     conv_bn_relu(ch, feat), conv_bn_relu(feat, feat),
                                     nn.MaxPool2d(2))
        self.init_h, self.init_c = nn.Linear(feat, hidden), nn.Linear(feat, hidden)
        self.att_feat, self.att_h = nn.Linear(feat, att), nn.Linear(hidden, att)
        self.att_v = nn.Linear(att, 1)
        self.gate = nn.Linear(hidden, feat)
        self.embed = nn.Embedding(vocab, embed)
        self.cell = LSTMCell(embed + feat, hidden)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(hidden, vocab)

    def attend(self, grid, keys, h):
        scores = F.squeeze(self.att_v(F.tanh(keys + F.expand_dims(self.att_h(h), 1))), 2)
        alpha = F.softmax(scores, axis=1)                                  # (b, cells)
        context = F.squeeze(F.matmul(F.expand_dims(alpha, 1), grid), 1)
        return F.sigmoid(self.gate(h)) * context, alpha

    def forward(self, images, words, sampled):
        """Logits (b, t, vocab) and attention (b, t, cells); words (b, t) are the caption's
        inputs, sampled (b, t) marks where the decoder's own previous word replaces them."""
        f = self.encoder(images)
        grid = F.transpose(F.reshape(f, f.shape[:2] + (-1,)), (0, 2, 1))  # (b, cells, feat)
        mean = F.mean(grid, axis=1)
        h, c = F.tanh(self.init_h(mean)), F.tanh(self.init_c(mean))
        keys = self.att_feat(grid)
        t = words.shape[1]
        logits, alphas, word = [], [], words[:, 0]
        for i in range(t):
            context, alpha = self.attend(grid, keys, h)
            h, c = self.cell(F.concat([self.embed(word), context], axis=1), h, c)
            logits.append(self.out(self.drop(h)))
            alphas.append(alpha)
            if i + 1 < t:
                word = F.where(sampled[:, i + 1], logits[-1].argmax(axis=1), words[:, i + 1])
        return F.stack(logits, axis=1), F.stack(alphas, axis=1)


def _glyph_captions(rng, n, grid, cell, glyphs):
    """(images (n, 3, grid cell, grid cell), captions (n, grid^2 + 2): BOS, the glyphs in
    reading order, END): each glyph a fixed random pattern in a colour of its own."""
    patterns = rng.random((glyphs, 1, cell, cell)) < 0.4
    colours = rng.uniform(0.3, 1.0, (glyphs, 3, 1, 1))
    looks = (patterns * colours).astype(np.float32)
    which = rng.integers(0, glyphs, (n, grid, grid))
    tiles = looks[which]                                   # (n, grid, grid, 3, cell, cell)
    images = tiles.transpose(0, 3, 1, 4, 2, 5).reshape(n, 3, grid * cell, grid * cell)
    images = images + 0.1 * rng.standard_normal(images.shape).astype(np.float32)
    words = np.concatenate([np.full((n, 1), BOS), which.reshape(n, -1) + 2,
                            np.full((n, 1), END)], axis=1)
    return imp.Tensor(images.astype(np.float32)), imp.Tensor(words.astype(np.int32))


def _showattend(c):
    rng = np.random.default_rng(107)
    b, glyphs = c["batch"], 12
    batches = [_glyph_captions(rng, b, c["grid"], c["cell"], glyphs) for _ in range(4)]
    model = ShowAttendTell(c["ch"], glyphs + 2, c["embed"], c["hidden"], c["att"])
    params = model.parameters()
    gm, opt = GradManager().attach(params), optim.Adam(params, 1e-3)
    next_batch = _cycle(batches)
    state = {"n": 0}

    def step():
        images, caption = next_batch()
        words, targets = caption[:, :-1], caption[:, 1:]
        t = words.shape[1]
        p = min(0.25, 0.01 * state["n"])
        state["n"] += 1
        with gm:
            logits, alphas = model(images, words, imp.random.uniform(size=(b, t)) < p)
            loss = F.cross_entropy(F.reshape(logits, (b * t, -1)), F.reshape(targets, (b * t,)))
            coverage = 1.0 - F.sum(alphas, axis=1)
            loss = loss + F.mean(coverage * coverage)
            gm.backward(loss)
        optim.clip_grad_norm(params, 5.0)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 4. PixelRNN's Row LSTM (van den Oord et al.) on 8-level greyscale images: a 7x7 mask-A
#    conv, then `layers` Row LSTM layers, each an input-to-state 1x3 mask-B conv of the
#    whole image and an LSTM whose recurrence runs down the rows (the state-to-state 1x3
#    conv reads the row above's state), a 1x1 conv back to the residual stream; then ReLU,
#    a 1x1 conv, ReLU and a 1x1 conv to 8 logits per pixel. Images of random rectangles and
#    stripes; four batches cycle; Adam.
class RowLSTM(nn.Module):
    def __init__(self, ch, hidden):
        super().__init__()
        self.hidden = hidden
        self.input_to_state = MaskedConv2d(ch, 4 * hidden, (1, 3), "B")
        self.state_to_state = nn.Conv2d(hidden, 4 * hidden, (1, 3), padding=(0, 1))
        self.out = nn.Conv2d(hidden, ch, 1)

    def forward(self, x):
        b, _, rows, width = x.shape
        h = c = F.zeros((b, self.hidden, 1, width))
        states = []
        for gates in F.split(self.input_to_state(x), rows, axis=2):
            i, f, o, g = F.split(gates + self.state_to_state(h), 4, axis=1)
            c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
            h = F.sigmoid(o) * F.tanh(c)
            states.append(h)
        return x + self.out(F.concat(states, axis=2))


class PixelRNN(nn.Module):
    def __init__(self, ch, hidden, layers, levels):
        super().__init__()
        self.first = MaskedConv2d(1, ch, (7, 7), "A")
        self.rows = nn.Sequential(*[RowLSTM(ch, hidden) for _ in range(layers)])
        self.head = nn.Sequential(nn.ReLU(), nn.Conv2d(ch, ch, 1), nn.ReLU(),
                                  nn.Conv2d(ch, levels, 1))

    def forward(self, x):
        return self.head(self.rows(self.first(x)))


def _shapes_images(rng, n, size, levels):
    """(n, 1, size, size) integer images in [0, levels): a background level, two to four
    filled rectangles and sometimes horizontal stripes."""
    out = np.zeros((n, 1, size, size), np.int32)
    for img in out[:, 0]:
        img[:] = rng.integers(0, levels // 2)
        for _ in range(rng.integers(2, 5)):
            top, left = rng.integers(0, size - 2, 2)
            h, w = rng.integers(2, size // 2, 2)
            img[top:top + h, left:left + w] = rng.integers(0, levels)
        if rng.random() < 0.3:
            img[::rng.integers(2, 5)] = levels - 1
    return out


def _rowlstm(c):
    rng = np.random.default_rng(109)
    b, s, levels = c["batch"], c["size"], 8
    batches = []
    for _ in range(4):
        img = _shapes_images(rng, b, s, levels)
        targets = img.transpose(0, 2, 3, 1).reshape(-1)
        batches.append((imp.Tensor(img.astype(np.float32) / (levels - 1)),
                        imp.Tensor(targets.astype(np.int32))))
    model = PixelRNN(c["ch"], c["hidden"], c["layers"], levels)
    next_batch = _cycle(batches)

    def loss_of():
        x, targets = next_batch()
        logits = F.reshape(F.transpose(model(x), (0, 2, 3, 1)), (-1, levels))
        return F.cross_entropy(logits, targets)
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 5. ResNeXt for CIFAR (Xie et al.): a 3x3 stem, then three stages of bottleneck blocks
#    (1x1 reduce to cardinality x width, a grouped 3x3 conv with `cardinality` groups, 1x1
#    expand, batch norm, projection shortcuts), global average pooling. Mixup (a Beta(1, 1)
#    weight per step, the batch mixed with a random permutation of itself, the two cross
#    entropies weighted alike); Nesterov SGD with weight decay, the learning rate
#    cosine-annealed step by step.
class ResNeXtBlock(nn.Module):
    def __init__(self, cin, cout, cardinality, width, stride):
        super().__init__()
        inner = cardinality * width
        self.body = nn.Sequential(
            nn.Conv2d(cin, inner, 1, bias=False), nn.BatchNorm2d(inner), nn.ReLU(),
            nn.Conv2d(inner, inner, 3, stride=stride, padding=1, groups=cardinality,
                      bias=False), nn.BatchNorm2d(inner), nn.ReLU(),
            nn.Conv2d(inner, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = (None if stride == 1 and cin == cout else
                      nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                    nn.BatchNorm2d(cout)))

    def forward(self, x):
        return F.relu(self.body(x) + (x if self.short is None else self.short(x)))


class ResNeXt(nn.Module):
    def __init__(self, ch, cardinality, width, blocks):
        super().__init__()
        self.stem = conv_bn_relu(3, ch)
        layers, cin = [], ch
        for stage in range(3):
            cout = 4 * ch * 2 ** stage
            for i in range(blocks):
                stride = 2 if stage > 0 and i == 0 else 1
                layers.append(ResNeXtBlock(cin, cout, cardinality, width * 2 ** stage, stride))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, 10)

    def forward(self, x):
        return self.fc(global_average(self.layers(self.stem(x))))


def _resnext(c):
    rng = np.random.default_rng(113)
    b, s = c["batch"], c["size"]
    x, labels = cluster_task(b, (3, s, s))
    model = ResNeXt(c["ch"], c["cardinality"], c["width"], c["blocks"])
    params = model.parameters()
    opt = optim.SGD(params, 0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
    schedule = CosineAnnealingLR(opt, 200)

    def loss_of():
        lam = float(rng.beta(1.0, 1.0))
        perm = imp.random.permutation(b)
        logits = model(lam * x + (1.0 - lam) * x[perm])
        return (lam * F.cross_entropy(logits, labels)
                + (1.0 - lam) * F.cross_entropy(logits, labels[perm]))
    return _then(stepper(params, opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 6. TransE (Bordes et al.): entities and relations embedded in one space, a triple (h, r,
#    t) scored by the L1 distance |e_h + e_r - e_t|. The entity table is renormalised to
#    unit rows (in place) before every batch, as the paper's algorithm does; a batch of
#    training triples (cycling through a made-up knowledge graph: typed entities, each
#    relation a fixed map from one type to another with some noise) meets `negatives`
#    corruptions each, head or tail replaced by a random entity; the margin ranking loss
#    relu(1 + d(pos) - d(neg)), summed; plain SGD.
def _knowledge_graph(rng, entities, relations, triples):
    """(triples, 3) int32 rows (head, relation, tail)."""
    types = 16
    per_type = entities // types
    source = rng.integers(0, types, relations)
    target = rng.integers(0, types, relations)
    shift = rng.integers(0, per_type, relations)
    r = rng.integers(0, relations, triples)
    head = source[r] * per_type + rng.integers(0, per_type, triples)
    tail = target[r] * per_type + (head % per_type + shift[r]) % per_type
    noisy = rng.random(triples) < 0.1
    tail[noisy] = rng.integers(0, entities, noisy.sum())
    return np.stack([head, r, tail], axis=1).astype(np.int32)


def _transe(c):
    rng = np.random.default_rng(127)
    n_ent, n_rel, dim, b, k = c["entities"], c["relations"], c["dim"], c["batch"], c["negatives"]
    kg = _knowledge_graph(rng, n_ent, n_rel, 8 * b)
    batches = [tuple(imp.Tensor(kg[i:i + b, j].copy()) for j in range(3))
               for i in range(0, len(kg), b)]
    bound = 6.0 / math.sqrt(dim)
    ent = nn.Parameter(imp.random.uniform(-bound, bound, (n_ent, dim)))
    rel = nn.Parameter(imp.random.uniform(-bound, bound, (n_rel, dim)))
    rel[...] = rel * F.rsqrt(F.sum(rel * rel, axis=1, keepdims=True))
    next_batch = _cycle(batches)

    def renormalise():
        ent[...] = ent * F.rsqrt(F.sum(ent * ent, axis=1, keepdims=True))

    def distance(h, r, t):
        return F.sum(F.abs(F.embedding(h, ent) + F.embedding(r, rel) - F.embedding(t, ent)),
                     axis=-1)

    def loss_of():
        h, r, t = next_batch()
        h, r, t = F.expand_dims(h, 1), F.expand_dims(r, 1), F.expand_dims(t, 1)
        random = imp.random.randint(0, n_ent, size=(b, k))
        corrupt_head = imp.random.uniform(size=(b, k)) < 0.5
        h_neg, t_neg = F.where(corrupt_head, random, h), F.where(corrupt_head, t, random)
        return F.sum(F.relu(1.0 + distance(h, r, t) - distance(h_neg, r, t_neg)))
    renormalise()
    return _then(stepper([ent, rel], optim.SGD([ent, rel], c["lr"]), loss_of), renormalise)


# ---------------------------------------------------------------------------------------
# 7. Wave-U-Net (Stoller et al.) denoising clips: `levels` downsampling blocks (a 1-D conv
#    of 15 taps, leaky ReLU, its output kept for the skip, then every other sample kept), a
#    bottleneck conv, then upsampling blocks (linear interpolation by 2, the skip
#    concatenated, a conv of 5 taps, leaky ReLU), the input concatenated at the end and a
#    1x1 conv with tanh. Clean clips are sums of a few enveloped sinusoids; each step adds
#    fresh white noise and a hum; MSE on the clean clip; Adam.
class WaveUNet(nn.Module):
    def __init__(self, ch, levels):
        super().__init__()
        widths = [ch * (i + 1) for i in range(levels + 1)]
        self.down = nn.ModuleList([_conv1d(1 if i == 0 else widths[i - 1], widths[i], 15)
                                   for i in range(levels)])
        self.bottom = _conv1d(widths[levels - 1], widths[levels], 15)
        self.up = nn.ModuleList([_conv1d(widths[i + 1] + widths[i], widths[i], 5)
                                 for i in reversed(range(levels))])
        self.out = nn.Conv2d(widths[0] + 1, 1, 1)

    def forward(self, x):                                       # (b, 1, 1, t)
        skips, h = [], x
        for conv in self.down:
            skips.append(F.leaky_relu(conv(h), 0.2))
            h = skips[-1][..., ::2]
        h = F.leaky_relu(self.bottom(h), 0.2)
        for conv, skip in zip(self.up, reversed(skips)):
            h = F.leaky_relu(conv(F.concat([_upsample_linear(h), skip], axis=1)), 0.2)
        return F.tanh(self.out(F.concat([h, x], axis=1)))


def _clean_clips(rng, n, length):
    """(n, 1, 1, length) float32 clips: three to six sinusoids, each under a Hann-shaped
    envelope of its own, scaled to a peak of 0.6."""
    t = np.arange(length) / length
    clips = np.zeros((n, length))
    for clip in clips:
        for _ in range(rng.integers(3, 7)):
            centre, width = rng.random(), rng.uniform(0.1, 0.5)
            envelope = np.clip(np.cos((t - centre) / width * np.pi / 2), 0, None) ** 2
            clip += envelope * np.sin(2 * np.pi * rng.uniform(20, 600) * t + rng.random() * 6)
    clips *= 0.6 / np.abs(clips).max(axis=1, keepdims=True)
    return clips.astype(np.float32).reshape(n, 1, 1, length)


def _waveunet(c):
    rng = np.random.default_rng(131)
    b, length = c["batch"], c["length"]
    clean = imp.Tensor(_clean_clips(rng, b, length))
    hum = imp.Tensor((0.1 * np.sin(2 * np.pi * 50 * np.arange(length) / 8000))
                     .astype(np.float32))
    model = WaveUNet(c["ch"], c["levels"])

    def loss_of():
        noisy = clean + 0.1 * imp.random.normal(size=clean.shape) + hum
        return F.mse_loss(model(noisy), clean)
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 8. BiDAF (Seo et al.) on a made-up reading task: the question holds a key word, which
#    occurs once in the context, and a length word; the answer is the span of that length
#    right after the key. Frozen word vectors, a two-layer highway network, a shared
#    contextual BiLSTM, the trilinear similarity w . [c; q; c * q] (as three products),
#    context-to-query attention and query-to-context attention (a softmax over the
#    context of each word's best match), G = [c; c2q; c * c2q; c * q2c], a modelling
#    BiLSTM, a start and (after one more BiLSTM) an end pointer over the context, both
#    masked at the padding; Adam (the paper's Adadelta learns too slowly for a test).
class Highway(nn.Module):
    def __init__(self, dim, layers):
        super().__init__()
        self.transforms = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])
        self.gates = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])

    def forward(self, x):
        for transform, gate in zip(self.transforms, self.gates):
            g = F.sigmoid(gate(x))
            x = g * F.relu(transform(x)) + (1.0 - g) * x
        return x


class BiDAF(nn.Module):
    def __init__(self, table, hidden):
        super().__init__()
        d = 2 * hidden
        self.words = imp.Tensor(table)
        self.highway = Highway(table.shape[1], 2)
        self.context = BiLSTM(table.shape[1], hidden)
        self.w_c, self.w_q = nn.Linear(d, 1), nn.Linear(d, 1, bias=False)
        self.w_cq = nn.Parameter(np.full((d,), 1.0 / d, np.float32))
        self.modelling = BiLSTM(4 * d, hidden)
        self.ending = BiLSTM(d, hidden)
        self.start, self.end = nn.Linear(5 * d, 1), nn.Linear(5 * d, 1)

    def encode(self, tokens, mask):
        return self.context(self.highway(F.embedding(tokens, self.words)), mask)

    def forward(self, context, c_mask, question, q_mask):
        c, q = self.encode(context, c_mask), self.encode(question, q_mask)
        sim = (self.w_c(c) + F.transpose(self.w_q(q), (0, 2, 1))
               + F.matmul(c * self.w_cq, q, transpose_b=True))            # (b, T, J)
        sim = sim + (1.0 - F.expand_dims(q_mask, 1)) * NEG
        c2q = F.matmul(F.softmax(sim, axis=2), q)
        best = F.max(sim, axis=2) + (1.0 - c_mask) * NEG
        q2c = F.matmul(F.expand_dims(F.softmax(best, axis=1), 1), c)     # (b, 1, d)
        g = F.concat([c, c2q, c * c2q, c * q2c], axis=2)
        m = self.modelling(g, c_mask)
        m2 = self.ending(m, c_mask)
        pad = (1.0 - c_mask) * NEG
        return (F.squeeze(self.start(F.concat([g, m], axis=2)), 2) + pad,
                F.squeeze(self.end(F.concat([g, m2], axis=2)), 2) + pad)


def _reading_task(rng, n, length, qlength, vocab):
    """Tensors (context, context mask, question, question mask, start, end)."""
    specials = 4                                   # 0: padding, 1-3: answer lengths
    context = rng.integers(specials, vocab, (n, length))
    question = rng.integers(specials, vocab, (n, qlength))
    c_len = rng.integers(length // 2, length + 1, n)
    q_len = rng.integers(qlength // 2, qlength + 1, n)
    span = rng.integers(1, 4, n)
    start = np.array([rng.integers(1, c_len[i] - span[i] + 1) for i in range(n)])
    for i in range(n):
        key = context[i, start[i] - 1]
        context[i][context[i] == key] = specials + (key - specials + 1) % (vocab - specials)
        context[i, start[i] - 1] = key
        at = rng.choice(q_len[i], 2, replace=False)
        question[i, at] = key, span[i]
    c_mask = np.arange(length)[None, :] < c_len[:, None]
    q_mask = np.arange(qlength)[None, :] < q_len[:, None]
    context, question = context * c_mask, question * q_mask
    arrays = (context.astype(np.int32), c_mask.astype(np.float32),
              question.astype(np.int32), q_mask.astype(np.float32),
              start.astype(np.int32), (start + span - 1).astype(np.int32))
    return tuple(imp.Tensor(a) for a in arrays)


def _bidaf(c):
    rng = np.random.default_rng(137)
    vocab, dim = c["vocab"], c["dim"]
    batches = [_reading_task(rng, c["batch"], c["length"], c["qlength"], vocab)
               for _ in range(4)]
    table = (rng.standard_normal((vocab, dim)) * 0.5).astype(np.float32)
    model = BiDAF(table, c["hidden"])
    next_batch = _cycle(batches)

    def loss_of():
        context, c_mask, question, q_mask, start, end = next_batch()
        p_start, p_end = model(context, c_mask, question, q_mask)
        return F.cross_entropy(p_start, start) + F.cross_entropy(p_end, end)
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 9. Double DQN (van Hasselt et al., on Mnih et al.'s DQN) on `envs` copies of Catch at
#    once: each step the online network picks epsilon-greedy actions (its Q-values read
#    back), the games advance, the transitions go into a replay buffer (pre-filled by a
#    random policy), and a sampled minibatch trains the online network on the Huber loss
#    to r + gamma max' Q_target(s', argmax Q_online(s')), the targets computed outside the
#    recording; the target network is a copy of the online one every 8 steps; Adam,
#    gradients clipped.
class Catch:
    """`n` games of Catch on a (rows, cols) board, each observation the last two frames: a
    ball falls a row a step from the top, drifting sideways at a speed of its own; the
    paddle (3 wide) on the bottom row moves left, stays or moves right; +1 for a catch, -1
    for a miss, and that game starts again."""

    def __init__(self, rng, n, rows, cols):
        self.rng, self.n, self.rows, self.cols = rng, n, rows, cols
        self.ball = np.zeros((n, 2), np.int64)
        self.drift = np.zeros(n, np.int64)
        self.paddle = np.full(n, cols // 2)
        self.restart(np.ones(n, bool))
        self.frames = np.repeat(self.render()[:, None], 2, axis=1)

    def restart(self, which):
        k = int(which.sum())
        self.ball[which] = np.stack([np.zeros(k, np.int64), self.rng.integers(0, self.cols, k)], 1)
        self.drift[which] = self.rng.integers(-1, 2, k)

    def render(self):
        board = np.zeros((self.n, self.rows, self.cols), np.float32)
        board[np.arange(self.n), self.ball[:, 0], self.ball[:, 1]] = 1.0
        for dx in (-1, 0, 1):
            board[np.arange(self.n), -1, np.clip(self.paddle + dx, 0, self.cols - 1)] = 1.0
        return board

    def step(self, actions):
        """(observations before, rewards, done) after `actions` in {0, 1, 2}."""
        before = self.frames.copy()
        self.paddle = np.clip(self.paddle + actions - 1, 0, self.cols - 1)
        self.ball[:, 0] += 1
        col = self.ball[:, 1] + self.drift
        self.drift = np.where((col < 0) | (col >= self.cols), -self.drift, self.drift)
        self.ball[:, 1] = np.clip(col, 0, self.cols - 1)
        done = self.ball[:, 0] == self.rows - 1
        caught = np.abs(self.ball[:, 1] - self.paddle) <= 1
        reward = np.where(done, np.where(caught, 1.0, -1.0), 0.0).astype(np.float32)
        self.frames = np.stack([self.frames[:, 1], self.render()], axis=1)
        self.restart(done)
        fresh = self.render()
        self.frames[done] = np.stack([fresh[done], fresh[done]], axis=1)
        return before, reward, done


class Replay:
    """A ring buffer of transitions (s, a, r, s', done) in numpy arrays."""

    def __init__(self, capacity, shape):
        self.s = np.zeros((capacity,) + shape, np.float32)
        self.s2 = np.zeros((capacity,) + shape, np.float32)
        self.a = np.zeros(capacity, np.int32)
        self.r = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.size, self.at = 0, 0

    def add(self, s, a, r, s2, done):
        idx = (self.at + np.arange(len(a))) % len(self.a)
        self.s[idx], self.a[idx], self.r[idx], self.s2[idx], self.done[idx] = s, a, r, s2, done
        self.at = (self.at + len(a)) % len(self.a)
        self.size = min(self.size + len(a), len(self.a))

    def sample(self, rng, batch):
        idx = rng.integers(0, self.size, batch)
        return tuple(imp.Tensor(v[idx]) for v in (self.s, self.a, self.r, self.s2, self.done))


def _q_network(rows, cols, ch, hidden):
    flat = 2 * ch * ((rows + 3) // 4) * ((cols + 3) // 4)
    return nn.Sequential(nn.Conv2d(2, ch, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Conv2d(2 * ch, 2 * ch, 3, stride=2, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(flat, hidden), nn.ReLU(),
                         nn.Linear(hidden, 3))


def _act_and_store(rng, env, replay, online, epsilon):
    """One epsilon-greedy move in every game, its transitions into `replay`."""
    greedy = online(imp.Tensor(env.frames)).argmax(axis=1).numpy()
    explore = rng.random(env.n) < epsilon
    actions = np.where(explore, rng.integers(0, 3, env.n), greedy)
    before, reward, done = env.step(actions)
    replay.add(before, actions, reward, env.frames, done)


def _dqn(c):
    rng = np.random.default_rng(139)
    rows, cols, b, gamma = c["rows"], c["cols"], c["batch"], 0.95
    env, replay = Catch(rng, c["envs"], rows, cols), Replay(c["capacity"], (2, rows, cols))
    while replay.size < replay.s.shape[0] // 2:
        actions = rng.integers(0, 3, env.n)
        before, reward, done = env.step(actions)
        replay.add(before, actions, reward, env.frames, done)
    online = _q_network(rows, cols, c["ch"], c["hidden"])
    target = _q_network(rows, cols, c["ch"], c["hidden"])
    target.load_state_dict(online.state_dict())
    params = online.parameters()
    gm, opt = GradManager().attach(params), optim.Adam(params, 5e-4)
    state = {"n": 0}

    def step():
        n = state["n"]
        _act_and_store(rng, env, replay, online, max(0.05, 0.5 - 0.01 * n))
        s, a, r, s2, done = replay.sample(rng, b)
        best = F.one_hot(online(s2).argmax(axis=1), 3)
        y = r + gamma * (1.0 - done) * F.sum(target(s2) * best, axis=1)
        with gm:
            q = F.sum(online(s) * F.one_hot(a, 3), axis=1)
            loss = _huber(q, y)
            gm.backward(loss)
        optim.clip_grad_norm(params, 10.0)
        opt.step()
        opt.clear_grad()
        state["n"] = n + 1
        if state["n"] % 8 == 0:
            target.load_state_dict(online.state_dict())
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 10. NeRF (Mildenhall et al.), the coarse network only: rays from cameras around a scene
#     of three shaded spheres (their colours computed exactly), `rays` of them drawn each
#     step; `samples` stratified depths per ray (a uniform jitter in each bin), the points
#     and the ray's direction positionally encoded (10 and 4 frequencies), an MLP of
#     `depth` ReLU layers with the encoding concatenated again halfway, a density head and
#     a colour head that also reads the direction (the density through softplus(x - 1), as
#     in mip-NeRF: a ReLU's can die at the start); alpha compositing (transmittance the
#     exp of an exclusive cumulative sum) over a white background; MSE; Adam.
class NeRF(nn.Module):
    def __init__(self, width, depth, pos_freqs, dir_freqs):
        super().__init__()
        self.pos_freqs, self.dir_freqs = pos_freqs, dir_freqs
        pos, view = 3 + 6 * pos_freqs, 3 + 6 * dir_freqs
        self.skip = depth // 2
        self.trunk = nn.ModuleList([nn.Linear(pos if i == 0 else width + pos * (i == self.skip),
                                              width) for i in range(depth)])
        self.sigma = nn.Linear(width, 1)
        self.feature = nn.Linear(width, width)
        self.colour = mlp([width + view, width // 2, 3])

    def forward(self, points, directions):          # (p, 3) each
        enc = _positional(points, self.pos_freqs)
        h = enc
        for i, layer in enumerate(self.trunk):
            h = F.relu(layer(F.concat([h, enc], axis=1) if i == self.skip else h))
        rgb = self.colour(F.concat([self.feature(h), _positional(directions, self.dir_freqs)],
                                   axis=1))
        return F.softplus(F.squeeze(self.sigma(h), 1) - 1.0), F.sigmoid(rgb)


def _positional(x, freqs):
    """NeRF's encoding: x, sin(2^k pi x), cos(2^k pi x) for k < freqs, (p, 3 + 6 freqs)."""
    scaled = F.expand_dims(x, 2) * imp.Tensor((np.pi * 2.0 ** np.arange(freqs))
                                              .astype(np.float32))
    p = x.shape[0]
    return F.concat([x, F.reshape(F.sin(scaled), (p, -1)), F.reshape(F.cos(scaled), (p, -1))],
                    axis=1)


def _sphere_scene_rays(rng, views, size):
    """(origins, directions, colours), (views size^2, 3) each: pinhole cameras at distance 4
    looking at the origin; the colour of the nearest of three spheres hit (Lambertian
    shading, some ambient light), white where none is."""
    centres = np.array([[0.5, 0, 0], [-0.5, 0.3, 0.2], [0, -0.4, -0.4]])
    radii, albedo = np.array([0.5, 0.4, 0.35]), rng.uniform(0.2, 1.0, (3, 3))
    light = np.array([1.0, 1.0, 0.5]) / 1.5
    origins, directions, colours = [], [], []
    for _ in range(views):
        eye = rng.standard_normal(3)
        eye = 4.0 * eye / np.linalg.norm(eye)
        forward = -eye / 4.0
        right = np.cross(forward, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        up = np.cross(right, forward)
        u, v = np.meshgrid(np.linspace(-0.4, 0.4, size), np.linspace(-0.4, 0.4, size))
        d = forward + u.reshape(-1, 1) * right + v.reshape(-1, 1) * up
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        origins.append(np.broadcast_to(eye, d.shape))
        directions.append(d)
        colours.append(_shade(eye, d, centres, radii, albedo, light))
    return tuple(np.concatenate(a).astype(np.float32) for a in (origins, directions, colours))


def _shade(eye, d, centres, radii, albedo, light):
    oc = eye - centres                                            # (3, 3)
    half_b = d @ oc.T                                             # (rays, spheres)
    disc = half_b ** 2 - ((oc ** 2).sum(1) - radii ** 2)
    depth = np.where(disc > 0, -half_b - np.sqrt(np.maximum(disc, 0)), np.inf)
    nearest = depth.argmin(axis=1)
    hit = np.isfinite(depth.min(axis=1))
    point = eye + d * np.where(hit, depth.min(axis=1), 0)[:, None]
    normal = (point - centres[nearest]) / radii[nearest, None]
    lit = 0.3 + 0.7 * np.clip(normal @ light, 0, None)
    return np.where(hit[:, None], albedo[nearest] * lit[:, None], 1.0)


def _render(model, origins, directions, near, far, samples):
    """Colours (r, 3) of rays (r, 3) by stratified samples and alpha compositing."""
    r = origins.shape[0]
    bins = imp.Tensor((np.arange(samples) / samples).astype(np.float32))
    z = near + (far - near) * (bins + imp.random.uniform(size=(r, samples)) / samples)
    points = F.expand_dims(origins, 1) + F.expand_dims(directions, 1) * F.expand_dims(z, 2)
    views = F.broadcast_to(F.expand_dims(directions, 1), (r, samples, 3))
    sigma, rgb = model(F.reshape(points, (-1, 3)), F.reshape(views, (-1, 3)))
    gaps = F.concat([z[:, 1:] - z[:, :-1], F.full((r, 1), 1e3)], axis=1)
    optical = F.reshape(sigma, (r, samples)) * gaps
    weights = F.exp(-_exclusive_cumsum(optical)) * (1.0 - F.exp(-optical))
    colour = F.sum(F.expand_dims(weights, 2) * F.reshape(rgb, (r, samples, 3)), axis=1)
    return colour + (1.0 - F.sum(weights, axis=1, keepdims=True))


def _nerf(c):
    rng = np.random.default_rng(149)
    origins, directions, colours = (imp.Tensor(a) for a in
                                    _sphere_scene_rays(rng, c["views"], c["image"]))
    model = NeRF(c["width"], c["depth"], 10, 4)
    rays, total = c["rays"], origins.shape[0]

    def loss_of():
        pick = imp.random.randint(0, total, size=(rays,))
        got = _render(model, origins[pick], directions[pick], 2.0, 6.0, c["samples"])
        return F.mse_loss(got, colours[pick])
    return stepper(model.parameters(), optim.Adam(model.parameters(), 5e-4), loss_of)


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "textcnn": dict(vocab=8000, dim=64, maps=64, length=56, batch=64),
    "gine": dict(graphs=56, dim=80, layers=5),
    "showattend": dict(grid=4, cell=8, ch=24, embed=32, hidden=128, att=64, batch=24),
    "rowlstm": dict(ch=16, hidden=32, layers=2, size=24, batch=14),
    "resnext": dict(ch=12, cardinality=8, width=4, blocks=2, size=32, batch=10),
    "transe": dict(entities=40000, relations=200, dim=64, negatives=12, batch=2048, lr=0.01),
    "waveunet": dict(ch=8, levels=6, length=8192, batch=4),
    "bidaf": dict(vocab=3000, dim=64, hidden=48, length=24, qlength=8, batch=40),
    "dqn": dict(rows=28, cols=20, ch=16, hidden=128, envs=16, capacity=4096, batch=192),
    "nerf": dict(views=16, image=32, width=128, depth=6, rays=192, samples=32),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "textcnn": dict(vocab=120, dim=8, maps=4, length=12, batch=6),
    "gine": dict(graphs=4, dim=8, layers=2),
    "showattend": dict(grid=2, cell=4, ch=4, embed=8, hidden=16, att=8, batch=4),
    "rowlstm": dict(ch=4, hidden=4, layers=2, size=6, batch=3),
    "resnext": dict(ch=4, cardinality=2, width=2, blocks=1, size=8, batch=4),
    "transe": dict(entities=160, relations=6, dim=8, negatives=3, batch=16, lr=0.01),
    "waveunet": dict(ch=4, levels=3, length=64, batch=2),
    "bidaf": dict(vocab=40, dim=8, hidden=6, length=10, qlength=5, batch=4),
    "dqn": dict(rows=6, cols=5, ch=4, hidden=16, envs=4, capacity=64, batch=8),
    "nerf": dict(views=2, image=6, width=16, depth=4, rays=16, samples=6),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "textcnn": _textcnn,
    "gine": _gine,
    "showattend": _showattend,
    "rowlstm": _rowlstm,
    "resnext": _resnext,
    "transe": _transe,
    "waveunet": _waveunet,
    "bidaf": _bidaf,
    "dqn": _dqn,
    "nerf": _nerf,
}


MODEL_SET = ModelSet(__name__, "tests/tenth_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
