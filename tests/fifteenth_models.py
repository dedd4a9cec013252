"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout,sixth,seventh,eighth,ninth,tenth,eleventh,twelfth,
thirteenth,fourteenth}_models.py; written after session 57 by a helper that had not read the
memory manager, picked for graph shapes the other sets lack: a learned optimizer
(Andrychowicz et al.: a two-layer coordinatewise LSTM maps each gradient of a small MLP
classifier to its update, unrolled through twenty inner steps whose gradients come from a
nested GradManager and are detached, the meta-loss averaged over the unroll and
differentiated through every LSTM step and update), a differentiable mass-spring rollout (a
batch of spring-lattice bodies pushed by a controller MLP's thrusters, spring forces by
index_select over the springs' ends and index_add back onto the masses, 36 semi-implicit
Euler steps at the bench's size, a loss on the final state only; SGD with momentum,
clipped), a Reformer language model (shared-QK LSH attention: buckets by the argmax of
randomly rotated keys drawn each step, an argsort by bucket and position, gathers into
sorted order, attention within a chunk and the chunk before it, an inverse argsort to gather
back, two hashing rounds mixed by their logsumexps; a chunked feed-forward; AdamW), an
end-to-end memory network (MemN2N: three hops over a memory of position-encoded sentence
embeddings with temporal encodings and adjacent weight tying, the nil word's rows zeroed in
place after each plain SGD step), an RNN transducer (an LSTM encoder, a GRU prediction
network, the joint network's (batch, T, U+1, vocab) log-probabilities, and the transducer
loss by a dynamic program over the lattice, one row of it a step as a masked logsumexp over
a (batch, U+1, U+1) matrix), NeuralSort (a CNN scores the images of a set, the relaxed
sorting permutation matrix from the pairwise absolute differences of the scores, cross
entropy against the true order; RMSprop), an RWKV language model (token shift, the WKV
time-mix recurrence run step by step with its running maximum for stability, a squared-ReLU
channel mix; AdamW, cosine schedule), a Tacotron decoder (a conv and bidirectional GRU
encoder over characters, a prenet with dropout always on, an attention LSTM,
location-sensitive attention whose previous and cumulative weights are fed back through a
Conv1d, a decoder LSTM emitting two mel frames and stop logits a step under teacher forcing,
a convolutional postnet), DiffPool (dense graph convolutions over adjacency matrices, soft
cluster assignments that pool nodes and coarsen the adjacency by S^T A S twice,
link-prediction and entropy losses; Adagrad) and a Fourier neural operator (1-D Burgers'
equation solved in numpy, spectral convolutions as products with truncated DFT matrices and
a batched complex product per mode, pointwise linear paths, GELU; StepLR).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/fourteenth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import CosineAnnealingLR, StepLR
from model_sets import NEG, ModelSet, l2_normalize, mlp, stepper
from tenth_models import _cycle, _then


def _step_with_clip(params, opt, loss_of, max_norm):
    """A training step like model_sets.stepper's, the gradients clipped to `max_norm`
    before the update."""
    gm = GradManager().attach(params)

    def step():
        with gm:
            loss = loss_of()
            gm.backward(loss)
        optim.clip_grad_norm(params, max_norm)
        opt.step()
        opt.clear_grad()
        return loss
    return step


def _clusters(rng, n, dim, classes, spread=1.0):
    """(x (n, dim), labels (n,)) as numpy: Gaussian blobs around random centres."""
    centres = rng.standard_normal((classes, dim)) * spread
    labels = rng.integers(0, classes, n)
    x = centres[labels] + 0.7 * rng.standard_normal((n, dim))
    return x.astype(np.float32), labels.astype(np.int32)


# ---------------------------------------------------------------------------------------
# 1. A learned optimizer (Andrychowicz et al., "Learning to learn by gradient descent by
#    gradient descent"): the optimizee a one-hidden-layer MLP classifier held as one flat
#    vector of weights; the optimizer two LSTMCells shared by every coordinate (each
#    coordinate a row of their batch), fed the paper's preprocessed gradient (log magnitude
#    and sign) and giving 0.1 x a linear read-out as the update. A meta step unrolls
#    `unroll` inner steps from a fresh optimizee (its gradient by a GradManager nested in
#    the meta recording, detached: the paper's first-order assumption), the meta-loss the
#    mean of the optimizee's losses along the way and after; Adam on the LSTM. Four tasks
#    (blobs, an initial optimizee, a minibatch per inner step) cycle.
class CoordinateLSTM(nn.Module):
    def __init__(self, hidden, scale=0.1):
        super().__init__()
        self.hidden, self.scale = hidden, scale
        self.cell1, self.cell2 = nn.LSTMCell(2, hidden), nn.LSTMCell(hidden, hidden)
        self.out = nn.Linear(hidden, 1)

    def initial(self, n):
        return tuple(F.zeros((n, self.hidden)) for _ in range(4))

    def forward(self, grad, state, p=10.0):
        small = F.abs(grad) < math.exp(-p)
        first = F.where(small, F.full_like(grad, -1.0), F.log(F.abs(grad) + 1e-30) / p)
        second = F.where(small, math.exp(p) * grad, F.sign(grad))
        h1, c1 = self.cell1(F.stack([first, second], axis=1), (state[0], state[1]))
        h2, c2 = self.cell2(h1, (state[2], state[3]))
        return self.scale * F.squeeze(self.out(h2), 1), (h1, c1, h2, c2)


def _optimizee_loss(theta, shapes, x, y):
    """The MLP classifier whose weights are the slices of the flat `theta`."""
    weights, at = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        weights.append(F.reshape(theta[at:at + size], shape))
        at += size
    w1, b1, w2, b2 = weights
    return F.cross_entropy(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), y)


def _learned_opt(c):
    rng = np.random.default_rng(601)
    dim, hidden, classes, unroll, b = c["dim"], c["hidden"], c["classes"], c["unroll"], c["batch"]
    shapes = [(hidden, dim), (hidden,), (classes, hidden), (classes,)]

    def task():
        x, y = _clusters(rng, unroll * b, dim, classes, spread=0.6)
        theta = np.concatenate([rng.standard_normal(int(np.prod(s))) / math.sqrt(s[-1])
                                for s in shapes]).astype(np.float32)
        return imp.Tensor(theta), [(imp.Tensor(x[i * b:(i + 1) * b]),
                                    imp.Tensor(y[i * b:(i + 1) * b])) for i in range(unroll)]

    next_task = _cycle([task() for _ in range(4)])
    net = CoordinateLSTM(c["lstm"])
    gm, opt = GradManager().attach(net.parameters()), optim.Adam(net.parameters(), 1e-2)

    def step():
        theta, batches = next_task()
        with gm:
            state, total = net.initial(theta.shape[0]), 0
            for x, y in batches:
                gm_in = GradManager().attach([theta])
                with gm_in:
                    loss_t = _optimizee_loss(theta, shapes, x, y)
                    gm_in.backward(loss_t)
                grad = theta.grad.detach()
                theta.grad = None
                total = total + loss_t
                update, state = net(grad, state)
                theta = theta + update
            total = total + _optimizee_loss(theta, shapes, *batches[0])
            loss = total / (len(batches) + 1)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 2. A differentiable mass-spring rollout: each body a rows x cols lattice of unit masses
#    joined by damped springs (edges and both diagonals of every cell), in free space; a
#    controller MLP (tanh) reads the masses' positions about the centre of mass, their
#    velocities, the target's offset and a clock, and gives every mass a bounded thrust.
#    Spring forces: both ends' positions and velocities by index_select, the tensions along
#    the springs, added back onto the masses by index_add; semi-implicit Euler with a
#    little drag for `steps` steps; the loss on the final state only (the centre of mass's
#    squared distance to the target, plus the kinetic energy left). SGD with momentum, the
#    gradient clipped. Four batches of starting offsets and targets cycle.
def _spring_lattice(rows, cols, spacing=0.2):
    """(positions (n, 2), spring ends i, j (s,), rest lengths (s,)) of a lattice body."""
    pos = np.array([(cc * spacing, r * spacing) for r in range(rows) for cc in range(cols)])
    ends = []
    for r in range(rows):
        for cc in range(cols):
            k = r * cols + cc
            if cc + 1 < cols:
                ends.append((k, k + 1))
            if r + 1 < rows:
                ends.append((k, k + cols))
                if cc + 1 < cols:
                    ends += [(k, k + cols + 1), (k + 1, k + cols)]
    i, j = np.array(ends).T
    return pos, i, j, np.linalg.norm(pos[j] - pos[i], axis=1)


def _rollout(controller, body, start, target, c):
    i, j, rest = body
    b, n = start.shape[0], start.shape[1]
    dt, stiffness, damping = c["dt"], 60.0, 1.0
    pos, vel = start, F.zeros(start.shape)
    for t in range(c["steps"]):
        com = F.mean(pos, axis=1, keepdims=True)
        clock = imp.Tensor(np.array([[math.sin(0.3 * t), math.cos(0.3 * t)]], np.float32))
        feats = F.concat([F.reshape(pos - com, (b, 2 * n)), F.reshape(vel, (b, 2 * n)),
                          target - F.squeeze(com, 1), F.broadcast_to(clock, (b, 2))], axis=1)
        thrust = 2.0 * F.reshape(F.tanh(controller(feats)), (b, n, 2))
        d = F.index_select(pos, 1, j) - F.index_select(pos, 1, i)                  # (b, s, 2)
        length = F.sqrt(F.sum(d * d, axis=2, keepdims=True) + 1e-8)
        unit = d / length
        closing = F.sum((F.index_select(vel, 1, j) - F.index_select(vel, 1, i)) * unit,
                        axis=2, keepdims=True)
        pull = (stiffness * (length - rest) + damping * closing) * unit
        force = F.index_add(F.index_add(thrust, 1, i, pull), 1, j, -pull)
        vel = (vel + dt * force) * (1.0 - 0.2 * dt)
        pos = pos + dt * vel
    miss = F.mean(pos, axis=1) - target
    return F.mean(F.sum(miss * miss, axis=1)) + 0.1 * F.mean(F.sum(vel * vel, axis=2))


def _mass_spring(c):
    rng = np.random.default_rng(603)
    shape, i, j, rest = _spring_lattice(c["rows"], c["cols"])
    n, b = len(shape), c["batch"]
    body = (imp.Tensor(i.astype(np.int32)), imp.Tensor(j.astype(np.int32)),
            imp.Tensor(rest.astype(np.float32)[:, None]))

    def episode():
        start = shape[None] + rng.uniform(-0.3, 0.3, (b, 1, 2))
        angle, dist = rng.uniform(0, 2 * np.pi, b), rng.uniform(0.4, 1.0, b)
        target = (start.mean(axis=1) + dist[:, None]
                  * np.stack([np.cos(angle), np.sin(angle)], axis=1))
        return imp.Tensor(start.astype(np.float32)), imp.Tensor(target.astype(np.float32))

    next_episode = _cycle([episode() for _ in range(4)])
    controller = mlp([4 * n + 4, c["hidden"], c["hidden"], 2 * n], nn.Tanh)
    params = controller.parameters()
    opt = optim.SGD(params, 0.1, momentum=0.9)
    return _step_with_clip(params, opt,
                           lambda: _rollout(controller, body, *next_episode(), c), 1.0)


# ---------------------------------------------------------------------------------------
# 3. A Reformer (Kitaev et al.) language model on the paper's duplication task (0 w 0 w,
#    the loss on the copy): learned positions, pre-norm layers of shared-QK LSH attention
#    (per round a random rotation drawn each step, buckets by the argmax over [xR, -xR] of
#    the unit keys, an argsort by bucket then position, queries, keys, values and
#    positions gathered into that order, chunks attending to themselves and the chunk
#    before, causal by position, a token's own key only as a last resort; the outputs
#    gathered back by the inverse permutation, an argsort of the argsort; the rounds mixed
#    by softmax over their logsumexps) and a feed-forward run chunk by chunk over the
#    sequence; AdamW. Four batches cycle.
def _lsh_attention(qk, v, buckets, chunk, rounds):
    """Causal shared-QK LSH attention over (b, h, s, e) queries/keys and values."""
    b, h, s, e = qk.shape
    keys = l2_normalize(qk, axis=3)
    pos = F.broadcast_to(F.arange(s, dtype="int32"), (b, h, s))
    n = s // chunk
    outs, lses = [], []
    for _ in range(rounds):
        rotated = F.matmul(keys.detach(), imp.random.normal(size=(e, buckets // 2)))
        bucket = F.argmax(F.concat([rotated, -rotated], axis=3), axis=3)        # (b, h, s)
        order = F.argsort(bucket * s + pos, axis=2)
        undo = F.argsort(order, axis=2)
        wide = F.broadcast_to(F.expand_dims(order, 3), (b, h, s, e))
        sq, sk, sv = (F.reshape(F.gather(t, 2, wide), (b, h, n, chunk, e))
                      for t in (qk, keys, v))
        sp = F.reshape(F.gather(pos, 2, order), (b, h, n, chunk))
        sk, sv, kp = (F.concat([t, F.roll(t, 1, axis=2)], axis=3) for t in (sk, sv, sp))
        scores = F.matmul(sq, sk, transpose_b=True) * (1.0 / math.sqrt(e))   # (b,h,n,c,2c)
        qpos, kpos = F.expand_dims(sp, 4), F.expand_dims(kp, 3)
        scores = F.where(kpos == qpos, F.full_like(scores, -1e5), scores)
        scores = F.where(kpos > qpos, F.full_like(scores, NEG), scores)
        lse = F.logsumexp(scores, axis=4, keepdims=True)
        out = F.reshape(F.matmul(F.exp(scores - lse), sv), (b, h, s, e))
        outs.append(F.gather(out, 2, F.broadcast_to(F.expand_dims(undo, 3), (b, h, s, e))))
        lses.append(F.gather(F.reshape(lse, (b, h, s, 1)), 2, F.expand_dims(undo, 3)))
    weights = F.softmax(F.stack(lses, axis=0), axis=0)
    return F.sum(weights * F.stack(outs, axis=0), axis=0)


class ReformerLayer(nn.Module):
    def __init__(self, dim, heads, c):
        super().__init__()
        self.heads, self.c = heads, c
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qk, self.v, self.o = (nn.Linear(dim, dim) for _ in range(3))
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, s, d = x.shape
        y = self.norm1(x)
        split = [F.transpose(F.reshape(t, (b, s, self.heads, d // self.heads)), (0, 2, 1, 3))
                 for t in (self.qk(y), self.v(y))]
        att = _lsh_attention(*split, self.c["buckets"], self.c["chunk"], self.c["rounds"])
        x = x + self.o(F.reshape(F.transpose(att, (0, 2, 1, 3)), (b, s, d)))
        pieces = F.split(self.norm2(x), self.c["ff_chunks"], axis=1)
        return x + F.concat([self.ff(p) for p in pieces], axis=1)


class Reformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = c["dim"]
        self.embed, self.pos = nn.Embedding(c["vocab"], dim), nn.Embedding(c["length"], dim)
        self.layers = nn.ModuleList([ReformerLayer(dim, c["heads"], c)
                                     for _ in range(c["layers"])])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, c["vocab"])

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos(F.arange(tokens.shape[1], dtype="int32"))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def _duplication(rng, n, length, vocab):
    half = length // 2
    w = rng.integers(1, vocab, (n, half - 1))
    zero = np.zeros((n, 1), np.int64)
    seq = np.concatenate([zero, w, zero, w, zero], axis=1).astype(np.int32)    # length + 1
    return imp.Tensor(seq[:, :length]), imp.Tensor(seq[:, half + 1:length + 1])


def _reformer(c):
    rng = np.random.default_rng(605)
    length = c["length"]
    batches = [_duplication(rng, c["batch"], length, c["vocab"]) for _ in range(4)]
    model = Reformer(c)
    opt = optim.AdamW(model.parameters(), 1e-3, weight_decay=0.01)
    next_batch = _cycle(batches)

    def loss_of():
        tokens, copy = next_batch()
        return F.cross_entropy(model(tokens)[:, length // 2:], copy)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 4. An end-to-end memory network (Sukhbaatar et al., MemN2N) on a bAbI-like "where is"
#    task: stories of `memory` sentences ("<person> <verb> to <place>"), a question
#    ("where is <person>"), the answer the person's last place. Sentences embedded with the
#    position encoding and summed over words, plus temporal encodings; three hops with
#    adjacent weight tying (hop k's output embedding is hop k+1's input embedding, the
#    question's embedding the first's, the answer's weights the last output embedding);
#    plain SGD on the summed loss, the gradient clipped to 40, the rate halved every 25
#    steps; the nil word's embedding rows zeroed in place after each update. Four batches
#    cycle.
class MemN2N(nn.Module):
    def __init__(self, vocab, dim, hops, memory, words):
        super().__init__()
        self.hops = hops
        self.embeds = nn.ModuleList([nn.Embedding(vocab, dim) for _ in range(hops + 1)])
        for e in self.embeds:
            e.weight[...] = 0.1 * imp.random.normal(size=e.weight.shape)
        self.temporal = imp.Parameter(0.1 * imp.random.normal(size=(hops + 1, memory, dim)))
        j, k = np.arange(1, words + 1)[:, None], np.arange(1, dim + 1)[None]
        self.encoding = imp.Tensor(((1 - j / words) - (k / dim) * (1 - 2 * j / words))
                                   .astype(np.float32))                          # (words, dim)

    def forward(self, story, query):
        u = F.sum(self.embeds[0](query) * self.encoding, axis=1)                  # (b, dim)
        memories = [F.sum(e(story) * self.encoding, axis=2) + self.temporal[k]
                    for k, e in enumerate(self.embeds)]                          # (b, m, dim)
        for k in range(self.hops):
            attn = F.softmax(F.squeeze(F.matmul(memories[k], F.expand_dims(u, 2)), 2), axis=1)
            u = u + F.squeeze(F.matmul(F.expand_dims(attn, 1), memories[k + 1]), 1)
        return F.matmul(u, self.embeds[-1].weight, transpose_b=True)

    def zero_nil(self):
        for e in self.embeds:
            e.weight[0] = 0.0


def _where_is(rng, n, memory, people, places):
    """Stories (n, memory, 4), questions (n, 4) and answers (n,) of word ids: 0 nil,
    people, four verbs, "to", places, "where", "is"."""
    verbs = 1 + people
    to, place0 = verbs + 4, verbs + 5
    where, is_ = place0 + places, place0 + places + 1
    story = np.zeros((n, memory, 4), np.int32)
    query = np.zeros((n, 4), np.int32)
    answer = np.zeros(n, np.int32)
    for s in range(n):
        who = rng.integers(1, 1 + people, memory)
        at = rng.integers(place0, place0 + places, memory)
        story[s] = np.stack([who, rng.integers(verbs, verbs + 4, memory),
                             np.full(memory, to), at], axis=1)
        asked = who[rng.integers(memory)]
        answer[s] = at[np.nonzero(who == asked)[0][-1]]
        query[s, :3] = where, is_, asked
    return imp.Tensor(story), imp.Tensor(query), imp.Tensor(answer), is_ + 1


def _memn2n(c):
    rng = np.random.default_rng(607)
    batches = [_where_is(rng, c["batch"], c["memory"], c["people"], c["places"])
               for _ in range(4)]
    vocab = batches[0][3]
    model = MemN2N(vocab, c["dim"], c["hops"], c["memory"], 4)
    model.zero_nil()
    opt = optim.SGD(model.parameters(), 0.01)
    schedule = StepLR(opt, 25, gamma=0.5)
    next_batch = _cycle(batches)

    def loss_of():
        story, query, answer, _ = next_batch()
        return F.cross_entropy(model(story, query), answer, reduction="sum")

    def after():
        model.zero_nil()
        schedule.step()
    return _then(_step_with_clip(model.parameters(), opt, loss_of, 40.0), after)


# ---------------------------------------------------------------------------------------
# 5. An RNN transducer (Graves): frames of made-up "speech" (each label a noisy prototype
#    frame held 2-4 frames, silences between) through a linear layer and an nn.LSTM; the
#    labels, blank first, through an embedding and an nn.GRU; the joint network tanh of
#    their sum over every (t, u) then a linear layer, log-softmax over blank and the
#    labels, (b, T, U + 1, V + 1). The loss, -log P(y | x), by the forward variable over
#    the lattice one row of t at a time: alpha(t, u) = C_t(u) + logsumexp over k <= u of
#    (alpha(t - 1, k) + blank(t - 1, k) - C_t(k)), C_t the cumulative emission
#    log-probabilities along u, the k > u terms masked; Adam. Four batches cycle.
class Transducer(nn.Module):
    def __init__(self, feats, labels, hidden, joint):
        super().__init__()
        self.inp = nn.Linear(feats, hidden)
        self.encoder = nn.LSTM(hidden, hidden, batch_first=True)
        self.embed = nn.Embedding(labels + 1, hidden)
        self.predictor = nn.GRU(hidden, hidden, batch_first=True)
        self.enc_out, self.pred_out = nn.Linear(hidden, joint), nn.Linear(hidden, joint)
        self.out = nn.Linear(joint, labels + 1)

    def forward(self, frames, labels):
        enc, _ = self.encoder(F.relu(self.inp(frames)))
        start = F.zeros((labels.shape[0], 1), dtype="int32")
        pred, _ = self.predictor(self.embed(F.concat([start, labels], axis=1)))
        joint = F.tanh(F.expand_dims(self.enc_out(enc), 2) + F.expand_dims(self.pred_out(pred), 1))
        return F.log_softmax(self.out(joint), axis=3)                     # (b, T, U + 1, V + 1)


def _transducer_loss(logp, labels):
    b, t_len, u1, _ = logp.shape
    u = u1 - 1
    blank = F.split(logp[..., 0], t_len, axis=1)                          # T x (b, 1, U + 1)
    index = F.broadcast_to(F.reshape(labels, (b, 1, u, 1)), (b, t_len, u, 1))
    emit = F.split(F.squeeze(F.gather(logp[:, :, :u], 3, index), 3), t_len, axis=1)
    later = np.triu(np.ones((u1, u1), bool), 1)                                 # k > u
    mask = imp.Tensor(np.where(later, NEG, 0.0).astype(np.float32))
    zero = F.zeros((b, 1))

    def cumulative(e):                                      # (b, 1, U) -> (b, U + 1)
        return F.concat([zero, F.cumsum(F.squeeze(e, 1), axis=1)], axis=1)

    alpha = cumulative(emit[0])
    for t in range(1, t_len):
        cum = cumulative(emit[t])
        base = alpha + F.squeeze(blank[t - 1], 1) - cum
        alpha = cum + F.logsumexp(F.expand_dims(base, 1) + mask, axis=2)
    return -F.mean(alpha[:, u] + F.squeeze(blank[-1], 1)[:, u]) / u


def _utterances(rng, n, length, labels_per, vocab, feats, prototypes):
    frames = 0.5 * rng.standard_normal((n, length, feats))
    labels = rng.integers(1, vocab + 1, (n, labels_per))
    for s in range(n):
        t = rng.integers(0, 3)
        for y in labels[s]:
            hold = rng.integers(2, 5)
            frames[s, t:t + hold] += prototypes[y]
            t += hold + rng.integers(0, 2)
    return imp.Tensor(frames.astype(np.float32)), imp.Tensor(labels.astype(np.int32))


def _rnnt(c):
    rng = np.random.default_rng(609)
    vocab, feats, u = c["vocab"], c["feats"], c["labels"]
    length = 6 * u + 3                                        # room for the longest utterance
    prototypes = 1.5 * rng.standard_normal((vocab + 1, feats))
    batches = [_utterances(rng, c["batch"], length, u, vocab, feats, prototypes)
               for _ in range(4)]
    model = Transducer(feats, vocab, c["hidden"], c["joint"])
    opt = optim.Adam(model.parameters(), 2e-3)
    next_batch = _cycle(batches)

    def loss_of():
        frames, labels = next_batch()
        return _transducer_loss(model(frames, labels), labels)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 6. NeuralSort (Grover et al.): sets of `items` images, each showing a bar whose length
#    encodes a hidden value among clutter and noise; a small CNN scores every image, the
#    relaxed sorting matrix P = softmax(((n + 1 - 2i) s - A_s 1) / tau) with A_s the
#    pairwise absolute differences of a set's scores, and the loss the cross entropy of
#    each row of P against the true rank's position (descending); RMSprop. Four batches of
#    sets cycle.
class ScoreCNN(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, ch, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(ch, 2 * ch, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * ch, 2 * ch, 3, 1, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(2 * ch, 1))

    def forward(self, x):
        return F.squeeze(self.body(x), 1)


def _neural_sort_logits(scores, tau):
    """(b, n) scores -> (b, n, n) logits of the relaxed permutation matrix, row i the
    position of the i-th largest."""
    n = scores.shape[1]
    pairwise = F.abs(F.expand_dims(scores, 2) - F.expand_dims(scores, 1))
    spread = F.sum(pairwise, axis=2)                                          # A_s 1: (b, n)
    ranks = imp.Tensor((n + 1 - 2 * np.arange(1, n + 1)).astype(np.float32)[:, None])
    return (ranks * F.expand_dims(scores, 1) - F.expand_dims(spread, 1)) / tau


def _bar_sets(rng, sets, items, size):
    values = rng.uniform(0, 1, (sets, items))
    imgs = 0.2 * rng.standard_normal((sets, items, 1, size, size))
    for s in range(sets):
        for k in range(items):
            row = rng.integers(1, size - 3)
            imgs[s, k, 0, row:row + 2, 1:1 + max(1, int(round(values[s, k] * (size - 2))))] += 1
            for _ in range(2):
                y, x = rng.integers(0, size - 2, 2)
                imgs[s, k, 0, y:y + 2, x:x + 2] += 0.6
    order = np.argsort(-values, axis=1, kind="stable").astype(np.int32)
    return (imp.Tensor(imgs.reshape(sets * items, 1, size, size).astype(np.float32)),
            imp.Tensor(order))


def _neuralsort(c):
    rng = np.random.default_rng(611)
    sets, items = c["sets"], c["items"]
    batches = [_bar_sets(rng, sets, items, c["size"]) for _ in range(4)]
    model = ScoreCNN(c["ch"])
    opt = optim.RMSprop(model.parameters(), 1e-3)
    next_batch = _cycle(batches)

    def loss_of():
        imgs, order = next_batch()
        scores = F.reshape(model(imgs), (sets, items))
        return F.cross_entropy(_neural_sort_logits(scores, c["tau"]), order)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 7. An RWKV language model (Peng et al., RWKV-4): embeddings, then blocks of a time mix
#    (token shift: each input mixed with the one before by learned ratios; receptance, key
#    and value projections; the WKV recurrence over time with a per-channel decay and a
#    bonus for the current token, carried as numerator, denominator and their running
#    maximum exponent, step by step) and a channel mix (token shift, squared ReLU,
#    a sigmoid receptance gate), pre-norm residuals; AdamW with a cosine schedule. Text: a
#    sparse random Markov chain; four batches cycle.
class RWKVBlock(nn.Module):
    def __init__(self, dim, k):
        super().__init__()
        ratio = np.linspace(0, 1, dim, dtype=np.float32)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mix_k, self.mix_v, self.mix_r = (imp.Parameter(ratio ** p) for p in (1.0, 0.7, 0.5))
        self.decay = imp.Parameter(np.linspace(-5, 1, dim, dtype=np.float32))
        self.bonus = imp.Parameter(np.full(dim, math.log(0.3), np.float32) + 0.5 * ratio)
        self.key, self.value, self.receptance, self.output = (
            nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.cmix_k, self.cmix_r = imp.Parameter(ratio), imp.Parameter(ratio)
        self.ckey = nn.Linear(dim, k * dim, bias=False)
        self.cvalue = nn.Linear(k * dim, dim, bias=False)
        self.creceptance = nn.Linear(dim, dim, bias=False)

    @staticmethod
    def _shifted(x):
        return F.concat([F.zeros((x.shape[0], 1, x.shape[2])), x[:, :-1]], axis=1)

    def _wkv(self, k, v):
        b, s, d = k.shape
        w, u = -F.exp(self.decay), self.bonus
        num, den, top = F.zeros((b, d)), F.zeros((b, d)), F.full((b, d), -1e30)
        out = []
        for kt, vt in zip(F.split(k, s, axis=1), F.split(v, s, axis=1)):
            kt, vt = F.squeeze(kt, 1), F.squeeze(vt, 1)
            now = u + kt
            q = F.maximum(top, now)
            e1, e2 = F.exp(top - q), F.exp(now - q)
            out.append((e1 * num + e2 * vt) / (e1 * den + e2))
            decayed = top + w
            q = F.maximum(decayed, kt)
            e1, e2 = F.exp(decayed - q), F.exp(kt - q)
            num, den, top = e1 * num + e2 * vt, e1 * den + e2, q
        return F.stack(out, axis=1)

    def forward(self, x):
        y = self.norm1(x)
        prev = self._shifted(y)
        mixed = [y * m + prev * (1 - m) for m in (self.mix_k, self.mix_v, self.mix_r)]
        wkv = self._wkv(self.key(mixed[0]), self.value(mixed[1]))
        x = x + self.output(F.sigmoid(self.receptance(mixed[2])) * wkv)
        y = self.norm2(x)
        prev = self._shifted(y)
        k = F.relu(self.ckey(y * self.cmix_k + prev * (1 - self.cmix_k)))
        r = F.sigmoid(self.creceptance(y * self.cmix_r + prev * (1 - self.cmix_r)))
        return x + r * self.cvalue(k * k)


class RWKV(nn.Module):
    def __init__(self, vocab, dim, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm0, self.norm = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.blocks = nn.ModuleList([RWKVBlock(dim, 4) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.norm0(self.embed(tokens))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def _markov_text(rng, chain, n, length):
    """(inputs, targets) (n, length) of token ids walked along `chain`, a pair of
    (successors (vocab, k), their probabilities (vocab, k))."""
    nexts, probs = chain
    vocab, successors = nexts.shape
    seq = np.zeros((n, length + 1), np.int64)
    seq[:, 0] = rng.integers(0, vocab, n)
    for t in range(length):
        pick = (rng.uniform(0, 1, (n, 1)) > np.cumsum(probs[seq[:, t]], axis=1)).sum(axis=1)
        seq[:, t + 1] = nexts[seq[:, t], np.minimum(pick, successors - 1)]
    seq = seq.astype(np.int32)
    return imp.Tensor(seq[:, :-1]), imp.Tensor(seq[:, 1:])


def _rwkv(c):
    rng = np.random.default_rng(613)
    vocab = c["vocab"]
    chain = rng.integers(0, vocab, (vocab, 3)), rng.dirichlet(np.ones(3), vocab)
    batches = [_markov_text(rng, chain, c["batch"], c["length"]) for _ in range(4)]
    model = RWKV(c["vocab"], c["dim"], c["layers"])
    opt = optim.AdamW(model.parameters(), 2e-3, weight_decay=0.01)
    schedule = CosineAnnealingLR(opt, 400, warmup_steps=2)
    next_batch = _cycle(batches)

    def loss_of():
        tokens, targets = next_batch()
        return F.cross_entropy(model(tokens), targets)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 8. A Tacotron-style decoder (Shen et al., Tacotron 2): characters through an embedding,
#    two Conv1d + BatchNorm1d + ReLU layers and a bidirectional nn.GRU; per decoder step a
#    prenet (two linear layers with dropout on in training and inference alike) of the
#    previous ground-truth frame, an attention LSTMCell, location-sensitive attention (the
#    previous and cumulative attention weights through a Conv1d into the energies, beside
#    the query and the processed memory), the context, a decoder LSTMCell, and a linear
#    projection to `r` mel frames and `r` stop logits; a residual postnet of Conv1d and
#    tanh. MSE before and after the postnet plus BCE on the stop logits; Adam, clipped.
#    Made-up speech: each character a spectral template held 1-3 frames, then silence.
class Tacotron(nn.Module):
    def __init__(self, vocab, mels, c):
        super().__init__()
        emb, att, rnn, pre, self.r = c["emb"], c["att"], c["rnn"], c["prenet"], c["r"]
        self.mels = mels
        self.embed = nn.Embedding(vocab, emb)
        self.convs = nn.Sequential(*[m for _ in range(2) for m in (
            nn.Conv1d(emb, emb, 5, padding=2), nn.BatchNorm1d(emb), nn.ReLU())])
        self.encoder = nn.GRU(emb, emb // 2, batch_first=True, bidirectional=True)
        self.pre1, self.pre2 = nn.Linear(mels, pre), nn.Linear(pre, pre)
        self.att_rnn = nn.LSTMCell(pre + emb, rnn)
        self.query, self.keys = nn.Linear(rnn, att, bias=False), nn.Linear(emb, att)
        self.location_conv = nn.Conv1d(2, 16, 15, padding=7, bias=False)
        self.location = nn.Linear(16, att, bias=False)
        self.energy = nn.Linear(att, 1, bias=False)
        self.dec_rnn = nn.LSTMCell(rnn + emb, rnn)
        self.frame = nn.Linear(rnn + emb, mels * self.r)
        self.stop = nn.Linear(rnn + emb, self.r)
        self.postnet = nn.Sequential(
            nn.Conv1d(mels, 2 * mels, 5, padding=2), nn.Tanh(),
            nn.Conv1d(2 * mels, mels, 5, padding=2))

    def _prenet(self, x):
        return F.dropout(F.relu(self.pre2(F.dropout(F.relu(self.pre1(x)), 0.5))), 0.5)

    def forward(self, text, frames):
        b, length = frames.shape[0], frames.shape[1]
        steps = length // self.r
        memory, _ = self.encoder(F.transpose(
            self.convs(F.transpose(self.embed(text), (0, 2, 1))), (0, 2, 1)))     # (b, n, emb)
        keys, n = self.keys(memory), memory.shape[1]
        last = F.reshape(frames, (b, steps, self.r, self.mels))[:, :, self.r - 1]
        inputs = F.split(F.concat([F.zeros((b, 1, self.mels)), last[:, :-1]], axis=1),
                         steps, axis=1)
        align, total = F.zeros((b, n)), F.zeros((b, n))
        context = F.zeros((b, memory.shape[2]))
        att_state = dec_state = None
        outs, stops = [], []
        for prev in inputs:
            att_state = self.att_rnn(F.concat([self._prenet(F.squeeze(prev, 1)), context],
                                              axis=1), att_state)
            where = self.location(F.transpose(
                self.location_conv(F.stack([align, total], axis=1)), (0, 2, 1)))  # (b, n, att)
            energy = self.energy(F.tanh(F.expand_dims(self.query(att_state[0]), 1)
                                        + keys + where))
            align = F.softmax(F.squeeze(energy, 2), axis=1)
            total = total + align
            context = F.squeeze(F.matmul(F.expand_dims(align, 1), memory), 1)
            dec_state = self.dec_rnn(F.concat([att_state[0], context], axis=1), dec_state)
            hc = F.concat([dec_state[0], context], axis=1)
            outs.append(self.frame(hc))
            stops.append(self.stop(hc))
        mel = F.reshape(F.stack(outs, axis=1), (b, length, self.mels))
        post = mel + F.transpose(self.postnet(F.transpose(mel, (0, 2, 1))), (0, 2, 1))
        return mel, post, F.reshape(F.stack(stops, axis=1), (b, length))


def _speech_frames(rng, n, chars, vocab, mels, length, templates):
    text = rng.integers(0, vocab, (n, chars))
    frames = np.zeros((n, length, mels))
    stop = np.ones((n, length))
    for s in range(n):
        t = 0
        for ch in text[s]:
            hold = rng.integers(1, 4)
            frames[s, t:t + hold] = templates[ch]
            t += hold
        stop[s, :t] = 0
    frames += 0.05 * rng.standard_normal(frames.shape)
    return (imp.Tensor(text.astype(np.int32)), imp.Tensor(frames.astype(np.float32)),
            imp.Tensor(stop.astype(np.float32)))


def _tacotron(c):
    rng = np.random.default_rng(615)
    vocab, mels, chars, r = c["vocab"], c["mels"], c["chars"], c["r"]
    length = -(-(3 * chars + 2) // r) * r
    grid = np.linspace(0, 1, mels)
    templates = np.stack([np.exp(-((grid - m) / 0.15) ** 2) + 0.3 * np.cos(8 * grid + m * 9)
                          for m in rng.uniform(0, 1, vocab)])
    batches = [_speech_frames(rng, c["batch"], chars, vocab, mels, length, templates)
               for _ in range(4)]
    model = Tacotron(vocab, mels, c)
    opt = optim.Adam(model.parameters(), 1e-3)
    next_batch = _cycle(batches)

    def loss_of():
        text, frames, stop = next_batch()
        mel, post, stop_logits = model(text, frames)
        return (F.mse_loss(mel, frames) + F.mse_loss(post, frames)
                + F.binary_cross_entropy_with_logits(stop_logits, stop))
    return _step_with_clip(model.parameters(), opt, loss_of, 1.0)


# ---------------------------------------------------------------------------------------
# 9. DiffPool (Ying et al.) graph classification on dense adjacency matrices: graphs of
#    two or four planted communities or Erdos-Renyi graphs of the same density (node
#    features their degree, clustering coefficient and noise); GraphSAGE-style dense
#    convolutions over the row-normalised adjacency with self loops; two DiffPool levels
#    (an embedding GNN and an assignment GNN, S = softmax of the latter over clusters,
#    X' = S^T Z, A' = S^T A S), a last convolution, max and mean readouts, an MLP; the
#    auxiliary link-prediction loss |A - S S^T|_F / |A| and the assignments' entropy added;
#    Adagrad. Four batches cycle.
class DenseSAGE(nn.Module):
    def __init__(self, cin, cout, last=False):
        super().__init__()
        self.lin, self.last = nn.Linear(2 * cin, cout), last

    def forward(self, x, adj):
        deg = F.sum(adj, axis=2, keepdims=True)
        h = self.lin(F.concat([x, F.matmul(adj, x) / F.maximum(deg, 1.0)], axis=2))
        return h if self.last else F.relu(l2_normalize(h, axis=2))


class DiffPoolLevel(nn.Module):
    def __init__(self, cin, hidden, clusters):
        super().__init__()
        self.embed = nn.ModuleList([DenseSAGE(cin, hidden), DenseSAGE(hidden, hidden)])
        self.assign = nn.ModuleList([DenseSAGE(cin, hidden),
                                     DenseSAGE(hidden, clusters, last=True)])

    def forward(self, x, adj):
        z, s = x, x
        for embed, assign in zip(self.embed, self.assign):
            z, s = embed(z, adj), assign(s, adj)
        s = F.softmax(s, axis=2)                                            # (b, n, clusters)
        pooled = F.matmul(s, z, transpose_a=True)
        coarse = F.matmul(F.matmul(s, adj, transpose_a=True), s)
        gap = adj - F.matmul(s, s, transpose_b=True)
        link = F.sqrt(F.sum(gap * gap)) / gap.size                  # (PyG's dense_diff_pool)
        entropy = F.mean(F.sum(-s * F.log(s + 1e-8), axis=2))
        return pooled, coarse, link + 0.1 * entropy


class DiffPool(nn.Module):
    def __init__(self, feats, hidden, nodes, classes):
        super().__init__()
        self.level1 = DiffPoolLevel(feats, hidden, max(2, nodes // 4))
        self.level2 = DiffPoolLevel(hidden, hidden, max(2, nodes // 16))
        self.last = DenseSAGE(hidden, hidden)
        self.head = mlp([2 * hidden, hidden, classes])

    def forward(self, x, adj):
        x, adj, aux1 = self.level1(x, adj)
        x, adj, aux2 = self.level2(x, adj)
        x = self.last(x, adj)
        return self.head(F.concat([F.max(x, axis=1), F.mean(x, axis=1)], axis=1)), aux1 + aux2


def _community_graphs(rng, n, nodes, feats):
    adj = np.zeros((n, nodes, nodes), np.float32)
    labels = rng.integers(0, 3, n)
    for s, kind in enumerate(labels):
        if kind < 2:
            groups = rng.integers(0, 2 if kind == 0 else 4, nodes)
            p = np.where(groups[:, None] == groups[None], 0.5 if kind == 0 else 0.7, 0.03)
        else:
            p = np.full((nodes, nodes), 0.2)
        a = np.triu(rng.uniform(0, 1, (nodes, nodes)) < p, 1)
        adj[s] = a + a.T
    deg = adj.sum(axis=2)
    triangles = np.einsum("bij,bjk,bki->bi", adj, adj, adj) / 2
    clustering = triangles / np.maximum(deg * (deg - 1) / 2, 1)
    x = np.concatenate([deg[..., None] / nodes, clustering[..., None],
                        rng.standard_normal((n, nodes, feats - 2))], axis=2)
    adj += np.eye(nodes, dtype=np.float32)
    return (imp.Tensor(x.astype(np.float32)), imp.Tensor(adj),
            imp.Tensor(labels.astype(np.int32)))


def _diffpool(c):
    rng = np.random.default_rng(617)
    batches = [_community_graphs(rng, c["batch"], c["nodes"], c["feats"]) for _ in range(4)]
    model = DiffPool(c["feats"], c["hidden"], c["nodes"], 3)
    opt = optim.Adagrad(model.parameters(), 0.05)
    next_batch = _cycle(batches)

    def loss_of():
        x, adj, labels = next_batch()
        logits, aux = model(x, adj)
        return F.cross_entropy(logits, labels) + aux
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 10. A Fourier neural operator (Li et al.) for 1-D viscous Burgers' equation: initial
#     conditions (random Fourier series) and the solutions at t = 0.2 by a pseudo-spectral
#     solver in numpy; the input (u0, x) lifted to `width` channels, four Fourier layers
#     (the lowest `modes` Fourier coefficients by products with cosine and sine matrices,
#     a complex product with learned weights per mode as batched matmuls over the modes,
#     back by the inverse DFT's matrices; plus a pointwise linear path; GELU between), a
#     two-layer projection; the relative L2 error; Adam, the rate halved every 50 steps.
class SpectralConv1d(nn.Module):
    def __init__(self, width, modes, points):
        super().__init__()
        scale = 1.0 / (width * width)
        self.w_re = imp.Parameter(scale * imp.random.uniform(size=(modes, width, width)))
        self.w_im = imp.Parameter(scale * imp.random.uniform(size=(modes, width, width)))
        angle = 2 * np.pi * np.outer(np.arange(modes), np.arange(points)) / points  # (m, n)
        weight = np.where(np.arange(modes) == 0, 1.0, 2.0)[:, None] / points
        self.fwd_cos = imp.Tensor(np.cos(angle).astype(np.float32))
        self.fwd_sin = imp.Tensor(-np.sin(angle).astype(np.float32))
        self.inv_cos = imp.Tensor((weight * np.cos(angle)).T.astype(np.float32))    # (n, m)
        self.inv_sin = imp.Tensor((-weight * np.sin(angle)).T.astype(np.float32))

    def forward(self, x):                                                     # (b, n, w)
        re = F.transpose(F.matmul(self.fwd_cos, x), (1, 0, 2))                # (m, b, w)
        im = F.transpose(F.matmul(self.fwd_sin, x), (1, 0, 2))
        out_re = F.matmul(re, self.w_re) - F.matmul(im, self.w_im)
        out_im = F.matmul(re, self.w_im) + F.matmul(im, self.w_re)
        return (F.matmul(self.inv_cos, F.transpose(out_re, (1, 0, 2)))
                + F.matmul(self.inv_sin, F.transpose(out_im, (1, 0, 2))))


class FNO1d(nn.Module):
    def __init__(self, width, modes, points, layers=4):
        super().__init__()
        self.lift = nn.Linear(2, width)
        self.spectral = nn.ModuleList([SpectralConv1d(width, modes, points)
                                       for _ in range(layers)])
        self.pointwise = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])
        self.project = mlp([width, 2 * width, 1], nn.GELU)

    def forward(self, u0, grid):
        x = self.lift(F.stack([u0, F.broadcast_to(grid, u0.shape)], axis=2))
        for i, (spec, point) in enumerate(zip(self.spectral, self.pointwise)):
            x = spec(x) + point(x)
            if i + 1 < len(self.spectral):
                x = F.gelu(x)
        return F.squeeze(self.project(x), 2)


def _burgers(rng, n, points, nu=0.01, t_end=0.2, dt=5e-4):
    x = np.arange(points) / points
    k = np.arange(1, 9)
    amp = rng.standard_normal((n, 8)) / k ** 1.5
    phase = rng.uniform(0, 2 * np.pi, (n, 8))
    u0 = (amp[:, :, None] * np.sin(2 * np.pi * k[None, :, None] * x + phase[:, :, None])).sum(1)
    wave = 2j * np.pi * np.fft.rfftfreq(points, 1.0 / points)
    keep = np.abs(np.fft.rfftfreq(points, 1.0 / points)) < points / 3          # dealiasing
    u_hat = np.fft.rfft(u0)
    for _ in range(int(round(t_end / dt))):
        u = np.fft.irfft(u_hat, points)
        nonlinear = -0.5 * wave * np.fft.rfft(u * u) * keep
        u_hat = (u_hat + dt * nonlinear) / (1 - dt * nu * wave ** 2)           # semi-implicit
    u_end = np.fft.irfft(u_hat, points)
    return imp.Tensor(u0.astype(np.float32)), imp.Tensor(u_end.astype(np.float32))


def _fno(c):
    rng = np.random.default_rng(619)
    points = c["points"]
    batches = [_burgers(rng, c["batch"], points) for _ in range(4)]
    grid = imp.Tensor((np.arange(points) / points).astype(np.float32))
    model = FNO1d(c["width"], c["modes"], points)
    opt = optim.Adam(model.parameters(), 2e-3)
    schedule = StepLR(opt, 50, gamma=0.5)
    next_batch = _cycle(batches)

    def loss_of():
        u0, target = next_batch()
        err = F.sqrt(F.sum((model(u0, grid) - target) ** 2, axis=1))
        return F.mean(err / F.sqrt(F.sum(target * target, axis=1)))
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "learned_opt": dict(dim=16, hidden=48, classes=4, unroll=20, lstm=20, batch=64),
    "mass_spring": dict(rows=3, cols=4, hidden=64, steps=30, dt=0.035, batch=256),
    "reformer": dict(vocab=32, length=256, dim=64, heads=4, layers=2, buckets=8, chunk=32,
                     rounds=2, ff_chunks=4, batch=8),
    "memn2n": dict(dim=64, hops=3, memory=50, people=10, places=10, batch=256),
    "rnnt": dict(vocab=12, feats=24, labels=10, hidden=64, joint=64, batch=16),
    "neuralsort": dict(ch=16, items=8, size=24, tau=1.0, sets=32),
    "rwkv": dict(vocab=64, length=48, dim=128, layers=2, batch=16),
    "tacotron": dict(vocab=24, mels=40, chars=16, r=2, emb=64, att=64, rnn=128, prenet=64,
                     batch=16),
    "diffpool": dict(feats=10, hidden=64, nodes=96, batch=64),
    "fno": dict(width=48, modes=16, points=256, batch=32),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "learned_opt": dict(dim=6, hidden=12, classes=3, unroll=5, lstm=8, batch=16),
    "mass_spring": dict(rows=2, cols=3, hidden=16, steps=12, dt=0.05, batch=8),
    "reformer": dict(vocab=12, length=32, dim=16, heads=2, layers=1, buckets=4, chunk=8,
                     rounds=2, ff_chunks=2, batch=4),
    "memn2n": dict(dim=16, hops=3, memory=10, people=4, places=4, batch=16),
    "rnnt": dict(vocab=5, feats=8, labels=4, hidden=16, joint=16, batch=4),
    "neuralsort": dict(ch=4, items=5, size=12, tau=1.0, sets=4),
    "rwkv": dict(vocab=16, length=12, dim=16, layers=1, batch=4),
    "tacotron": dict(vocab=8, mels=8, chars=5, r=2, emb=16, att=16, rnn=16, prenet=16,
                     batch=2),
    "diffpool": dict(feats=6, hidden=16, nodes=16, batch=4),
    "fno": dict(width=12, modes=6, points=32, batch=4),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps:
# none here (every model has its own data and step)
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "learned_opt": _learned_opt,
    "mass_spring": _mass_spring,
    "reformer": _reformer,
    "memn2n": _memn2n,
    "rnnt": _rnnt,
    "neuralsort": _neuralsort,
    "rwkv": _rwkv,
    "tacotron": _tacotron,
    "diffpool": _diffpool,
    "fno": _fno,
}


MODEL_SET = ModelSet(__name__, "tests/fifteenth_models.py", CONFIGS, BENCH_SIZES, BUILDERS,
                     STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
