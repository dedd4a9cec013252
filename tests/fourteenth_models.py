"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout,sixth,seventh,eighth,ninth,tenth,eleventh,twelfth,
thirteenth}_models.py; written after session 53 by a helper that had not read the memory
manager, picked for graph shapes the other sets lack: a WGAN-GP (the critic's gradient with
respect to interpolated images taken by a nested GradManager inside the critic's recording,
a penalty on its norm and a backward pass through that backward pass; two critic updates
and one generator update a step), MAML (a conv-4 few-shot learner run on fast weights, two
inner SGD steps per task whose gradients are recorded by the outer manager, the query
losses of several tasks summed and differentiated through the inner updates: second order),
an energy-based model sampled by Langevin dynamics (a backward pass with respect to the
images, none to the weights, at every Langevin step, from a replay buffer read back and
rewritten in numpy, then a contrastive divergence step), Slot Attention (a conv encoder,
slots drawn each step and refined by three rounds of attention normalised over the slots, a
GRUCell and an MLP; a spatial broadcast decoder run once per slot, masks mixed by a softmax
over the slots), a masked autoencoder (75% of the patches hidden by an argsort of noise
drawn each step, the visible ones gathered for a pre-norm transformer encoder, mask tokens
appended and the order restored by a second gather for the decoder, a loss on the hidden
patches only), a Switch Transformer language model (top-1 routing with a capacity: each
token's slot by a cumulative sum of the one-hot routes, tokens scattered into the experts'
buffers by index_add, the experts a batched matmul, outputs gathered back by index_select
and scaled by the gate; a load-balancing loss), an E(n)-equivariant graph network (messages
over an edge list gathered by index_select and summed by index_add, coordinates moved by
the messages, energies of made-up molecules read out by index_add per graph), a point-cloud
generator trained by an unrolled log-domain Sinkhorn loss (twenty iterations of logsumexp
over a (batch, n, m) cost, differentiated through every one, the generated cloud against
the target and against itself), PonderNet on parity (a GRUCell run until the probability of
not having halted falls below 1% in every sample, read back each step: a graph whose length
follows the values; the expected loss under the halting distribution and a KL to a
geometric prior) and contrastive predictive coding on raw waveforms (a strided Conv1d
encoder, an nn.GRU context, six step-ahead predictors each scored against every frame of
its sequence by InfoNCE).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/thirteenth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import CosineAnnealingLR
from eleventh_models import _scenes
from model_sets import NEG, ModelSet, attention, stepper
from tenth_models import _cycle, _then


def _sum_rows(x):
    """The sum of x over every axis but the first: (b, ...) -> (b,)."""
    return F.sum(F.reshape(x, (x.shape[0], -1)), axis=1)


def _grid(h, w):
    """(h * w, 4): each position's y, x, 1 - y and 1 - x in [0, 1], row by row (Slot
    Attention's soft position embedding reads it through a linear layer)."""
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    grid = np.stack([yy, xx, 1 - yy, 1 - xx], axis=-1).reshape(h * w, 4)
    return imp.Tensor(grid.astype(np.float32))


# ---------------------------------------------------------------------------------------
# 1. WGAN-GP (Gulrajani et al.): a generator of a linear layer and ConvTranspose2d layers
#    with BatchNorm2d and ReLU, tanh out; a critic of strided convs and LeakyReLU(0.2)
#    without batch norm; per critic update, random interpolates of real and fake images,
#    the critic's gradient with respect to them (a nested GradManager attached to the
#    interpolates, recorded by the critic's manager), the penalty 10 (|grad| - 1)^2 added
#    to the Wasserstein estimate; two critic updates, then one generator update, a step;
#    Adam at betas (0, 0.9). Four batches of scenes in [-1, 1] cycle.
class WGANGenerator(nn.Module):
    def __init__(self, nz, ch, size):
        super().__init__()
        self.ch, self.start = 4 * ch, size // 8
        self.fc = nn.Linear(nz, 4 * ch * self.start ** 2)
        self.up = nn.Sequential(
            nn.BatchNorm2d(4 * ch), nn.ReLU(),
            nn.ConvTranspose2d(4 * ch, 2 * ch, 4, 2, 1), nn.BatchNorm2d(2 * ch), nn.ReLU(),
            nn.ConvTranspose2d(2 * ch, ch, 4, 2, 1), nn.BatchNorm2d(ch), nn.ReLU(),
            nn.ConvTranspose2d(ch, 3, 4, 2, 1), nn.Tanh())

    def forward(self, z):
        return self.up(F.reshape(self.fc(z), (z.shape[0], self.ch, self.start, self.start)))


class WGANCritic(nn.Module):
    def __init__(self, ch, size):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ch, 3, 1, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(ch, 2 * ch, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(2 * ch, 4 * ch, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(4 * ch, 4 * ch, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(),
            nn.Linear(4 * ch * (size // 8) ** 2, 1))

    def forward(self, x):
        return F.squeeze(self.main(x), 1)


def _wgan_gp(c):
    rng = np.random.default_rng(501)
    b, nz, size = c["batch"], c["nz"], c["size"]
    reals = [imp.Tensor(2 * _scenes(rng, b, size) - 1) for _ in range(4)]
    gen, critic = WGANGenerator(nz, c["ch"], size), WGANCritic(c["ch"], size)
    gm_g = GradManager().attach(gen.parameters())
    gm_c = GradManager().attach(critic.parameters())
    opt_g = optim.Adam(gen.parameters(), 1e-4, betas=(0.0, 0.9))
    opt_c = optim.Adam(critic.parameters(), 1e-4, betas=(0.0, 0.9))
    next_real = _cycle(reals)

    def critic_update():
        real = next_real()
        fake = gen(imp.random.normal(size=(b, nz))).detach()
        eps = imp.random.uniform(size=(b, 1, 1, 1))
        mixed = eps * real + (1 - eps) * fake
        with gm_c:
            gm_x = GradManager().attach([mixed])
            with gm_x:
                gm_x.backward(F.sum(critic(mixed)))
            slope = F.sqrt(_sum_rows(mixed.grad * mixed.grad) + 1e-12)
            mixed.grad = None
            penalty = F.mean((slope - 1) ** 2)
            loss = F.mean(critic(fake)) - F.mean(critic(real)) + 10.0 * penalty
            gm_c.backward(loss)
        opt_c.step()
        opt_c.clear_grad()
        return loss

    def step():
        for _ in range(c["n_critic"]):
            loss_c = critic_update()
        with gm_g:
            loss_g = -F.mean(critic(gen(imp.random.normal(size=(b, nz)))))
            gm_g.backward(loss_g)
        opt_g.step()
        opt_g.clear_grad()
        return loss_c
    return step


# ---------------------------------------------------------------------------------------
# 2. MAML (Finn et al.) on few-shot classification of made-up glyphs: the conv-4 learner
#    of the paper's Omniglot runs (four 3x3 stride-2 convs, batch norm on the batch's own
#    statistics, ReLU, a linear head), written as a function of a list of weights so that
#    it runs on fast weights; per task two inner SGD steps on the support set (each a
#    GradManager attached to the current fast weights, inside the outer recording, so that
#    the outer backward differentiates through the inner gradients), then the query loss;
#    the tasks' query losses summed into one backward pass; Adam. Tasks (`ways` classes
#    of a pool, `shots` support and `queries` query images each) drawn from the pool at
#    the start, four meta-batches of them that cycle.
class ConvLearner(nn.Module):
    def __init__(self, ch, ways, size):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(1 if i == 0 else ch, ch, 3, 2, 1)
                                    for i in range(4)])
        self.norms = nn.ModuleList([nn.BatchNorm2d(ch) for _ in range(4)])
        for _ in range(4):
            size = (size + 1) // 2
        self.head = nn.Linear(ch * size * size, ways)

    def weights(self):
        per_layer = [t for conv, norm in zip(self.convs, self.norms)
                     for t in (conv.weight, conv.bias, norm.weight, norm.bias)]
        return per_layer + [self.head.weight, self.head.bias]

    @staticmethod
    def run(w, x):
        for i in range(4):
            weight, bias, gamma, beta = w[4 * i:4 * i + 4]
            x = F.conv2d(x, weight, bias, stride=2, padding=1)
            x = F.relu(F.batch_norm(x, None, None, gamma, beta, training=True))
        return F.linear(F.flatten(x, 1), w[-2], w[-1])


def _glyph_pool(rng, classes, per_class, size):
    """(classes, per_class, 1, size, size): each class a few random strokes (soft lines
    between random points), its images the strokes shifted by up to two pixels, thickened
    at random and noised."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    pool = np.zeros((classes, per_class, 1, size, size), np.float32)
    for k in range(classes):
        strokes = rng.uniform(0.15, 0.85, (3, 2, 2)) * size
        for i in range(per_class):
            dy, dx = rng.integers(-2, 3, 2)
            width = rng.uniform(0.8, 1.6)
            img = np.zeros((size, size))
            for (y0, x0), (y1, x1) in strokes:
                y0, y1, x0, x1 = y0 + dy, y1 + dy, x0 + dx, x1 + dx
                t = np.clip(((yy - y0) * (y1 - y0) + (xx - x0) * (x1 - x0))
                            / ((y1 - y0) ** 2 + (x1 - x0) ** 2 + 1e-9), 0, 1)
                dist = np.hypot(yy - y0 - t * (y1 - y0), xx - x0 - t * (x1 - x0))
                img = np.maximum(img, np.exp(-(dist / width) ** 2))
            pool[k, i, 0] = img + 0.1 * rng.standard_normal((size, size))
    return pool


def _maml(c):
    rng = np.random.default_rng(503)
    ways, shots, queries, size = c["ways"], c["shots"], c["queries"], c["size"]
    pool = _glyph_pool(rng, c["classes"], shots + queries + 4, size)
    net = ConvLearner(c["ch"], ways, size)
    meta = net.weights()
    gm, opt = GradManager().attach(meta), optim.Adam(meta, 1e-3)
    inner_lr = c["inner_lr"]

    def task():
        classes = rng.choice(len(pool), ways, replace=False)
        picks = [rng.choice(pool.shape[1], shots + queries, replace=False) for _ in classes]
        support = np.concatenate([pool[k, p[:shots]] for k, p in zip(classes, picks)])
        query = np.concatenate([pool[k, p[shots:]] for k, p in zip(classes, picks)])
        labels = np.arange(ways, dtype=np.int32)
        return (imp.Tensor(support), imp.Tensor(np.repeat(labels, shots)),
                imp.Tensor(query), imp.Tensor(np.repeat(labels, queries)))

    def adapted(support, support_labels):
        fast = meta
        for _ in range(c["inner_steps"]):
            gm_in = GradManager().attach(fast)
            with gm_in:
                gm_in.backward(F.cross_entropy(net.run(fast, support), support_labels))
            grads = [w.grad for w in fast]
            for w in fast:
                w.grad = None
            fast = [w - inner_lr * g for w, g in zip(fast, grads)]
        return fast

    meta_batches = [[task() for _ in range(c["tasks"])] for _ in range(4)]
    next_tasks = _cycle(meta_batches)

    def step():
        tasks = next_tasks()
        with gm:
            total = 0
            for support, support_labels, query, query_labels in tasks:
                fast = adapted(support, support_labels)
                total = total + F.cross_entropy(net.run(fast, query), query_labels)
            loss = total / len(tasks)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 3. An energy-based model sampled by Langevin dynamics (Du and Mordatch's IGEBM): a conv
#    net with SiLU gives each image an energy; negatives start from a replay buffer (kept
#    in numpy, 5% restarted from uniform noise), then `langevin` steps x <- clip(x - lr
#    dE/dx + noise, 0, 1), each gradient a backward pass of its own with only the images
#    attached; the buffer takes the samples back; the loss E(real) - E(sample) plus a
#    small L2 on both energies; Adam at betas (0, 0.999), gradients clipped to 1. Four
#    batches of scenes cycle, each step with a little noise added.
class EnergyNet(nn.Module):
    def __init__(self, ch, size):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ch, 3, 1, 1), nn.SiLU(),
            nn.Conv2d(ch, 2 * ch, 4, 2, 1), nn.SiLU(),
            nn.Conv2d(2 * ch, 2 * ch, 3, 1, 1), nn.SiLU(),
            nn.Conv2d(2 * ch, 4 * ch, 4, 2, 1), nn.SiLU(),
            nn.Conv2d(4 * ch, 4 * ch, 4, 2, 1), nn.SiLU(), nn.Flatten(),
            nn.Linear(4 * ch * (size // 8) ** 2, 1))

    def forward(self, x):
        return F.squeeze(self.main(x), 1)


def _ebm(c):
    rng = np.random.default_rng(505)
    b, size = c["batch"], c["size"]
    reals = [imp.Tensor(_scenes(rng, b, size)) for _ in range(4)]
    buffer = rng.uniform(0, 1, (c["buffer"], 3, size, size)).astype(np.float32)
    net = EnergyNet(c["ch"], size)
    gm, opt = GradManager().attach(net.parameters()), optim.Adam(
        net.parameters(), 1e-4, betas=(0.0, 0.999))
    next_real = _cycle(reals)

    def sample():
        idx = rng.choice(len(buffer), b, replace=False)
        start = buffer[idx]
        restart = rng.random(b) < 0.05
        start[restart] = rng.uniform(0, 1, (int(restart.sum()), 3, size, size))
        x = imp.Tensor(start)
        for _ in range(c["langevin"]):
            gm_x = GradManager().attach([x])
            with gm_x:
                gm_x.backward(F.sum(net(x)))
            noise = imp.random.normal(0, 0.005, size=x.shape)
            x = F.clip(x - c["step_size"] * x.grad + noise, 0.0, 1.0).detach()
        buffer[idx] = x.numpy()
        return x

    def step():
        negative = sample()
        real = next_real() + imp.random.normal(0, 0.005, size=(b, 3, size, size))
        with gm:
            e_pos, e_neg = net(real), net(negative)
            loss = (F.mean(e_pos) - F.mean(e_neg)
                    + 0.1 * (F.mean(e_pos * e_pos) + F.mean(e_neg * e_neg)))
            gm.backward(loss)
        optim.clip_grad_norm(net.parameters(), 1.0)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 4. Slot Attention (Locatello et al.) on sprites: a conv encoder (5x5 convs, ReLU) with a
#    soft position embedding, a LayerNorm and an MLP over the positions; `slots` slots
#    drawn each step from a learned Gaussian, then `iters` rounds of attention whose
#    softmax runs over the slots (each position shared among them), a weighted mean over
#    the positions, a GRUCell update and a residual MLP; a spatial broadcast decoder (each
#    slot tiled over an 8x8 grid with its position embedding, ConvTranspose2d up to the
#    image) gives every slot an RGB image and a mask logit; the masks' softmax over the
#    slots mixes the images; MSE; Adam with warm-up and cosine decay.
class SlotAttention(nn.Module):
    def __init__(self, slots, dim, iters, hidden):
        super().__init__()
        self.slots, self.iters, self.scale = slots, iters, dim ** -0.5
        self.mu = nn.Parameter(imp.random.normal(0, 1, (1, 1, dim)))
        self.log_sigma = nn.Parameter(F.full((1, 1, dim), -1.0))
        self.norm_inputs, self.norm_slots = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.norm_mlp = nn.LayerNorm(dim)
        self.q, self.k, self.v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.gru = nn.GRUCell(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, inputs):                                        # (b, n, d)
        b, _, d = inputs.shape
        inputs = self.norm_inputs(inputs)
        k, v = self.k(inputs), self.v(inputs)
        slots = self.mu + F.exp(self.log_sigma) * imp.random.normal(size=(b, self.slots, d))
        for _ in range(self.iters):
            prev = slots
            q = self.q(self.norm_slots(slots)) * self.scale
            attn = F.softmax(F.matmul(k, q, transpose_b=True), axis=2) + 1e-8    # (b, n, K)
            attn = attn / F.sum(attn, axis=1, keepdims=True)
            updates = F.matmul(attn, v, transpose_a=True)                        # (b, K, d)
            slots = F.reshape(self.gru(F.reshape(updates, (b * self.slots, d)),
                                       F.reshape(prev, (b * self.slots, d))),
                              (b, self.slots, d))
            slots = slots + self.mlp(self.norm_mlp(slots))
        return slots


class SlotAutoencoder(nn.Module):
    def __init__(self, ch, slots, iters, size):
        super().__init__()
        self.size, self.slots, self.ch = size, slots, ch
        self.encoder = nn.Sequential(*[m for i in range(4) for m in (
            nn.Conv2d(3 if i == 0 else ch, ch, 5, padding=2), nn.ReLU())])
        self.enc_pos = nn.Linear(4, ch)
        self.enc_mlp = nn.Sequential(nn.LayerNorm(ch), nn.Linear(ch, ch), nn.ReLU(),
                                     nn.Linear(ch, ch))
        self.attention = SlotAttention(slots, ch, iters, 2 * ch)
        self.dec_pos = nn.Linear(4, ch)
        ups = []
        s = 8
        while s < size:
            ups += [nn.ConvTranspose2d(ch, ch, 4, 2, 1), nn.ReLU()]
            s *= 2
        self.decoder = nn.Sequential(*ups, nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
                                     nn.Conv2d(ch, 4, 3, padding=1))
        self.grid_in, self.grid_out = _grid(size, size), _grid(8, 8)

    def forward(self, img):
        b, s, ch, k = img.shape[0], self.size, self.ch, self.slots
        feats = F.transpose(F.reshape(self.encoder(img), (b, ch, s * s)), (0, 2, 1))
        feats = self.enc_mlp(feats + self.enc_pos(self.grid_in))
        slots = F.reshape(self.attention(feats), (b * k, 1, ch))
        tiled = slots + F.expand_dims(self.dec_pos(self.grid_out), 0)       # (bk, 64, ch)
        tiled = F.reshape(F.transpose(tiled, (0, 2, 1)), (b * k, ch, 8, 8))
        out = F.reshape(self.decoder(tiled), (b, k, 4, s, s))
        rgb, logits = out[:, :, :3], out[:, :, 3:]
        masks = F.softmax(logits, axis=1)
        return F.sum(rgb * masks, axis=1)


def _sprites(rng, n, size):
    """(n, 3, size, size): two to four sprites (squares, disks, triangles) of random colours
    on black, later ones in front."""
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = np.zeros((n, 3, size, size), np.float32)
    for img in out:
        for _ in range(rng.integers(2, 5)):
            cy, cx = rng.uniform(0.15, 0.85, 2)
            r = rng.uniform(0.08, 0.18)
            kind = rng.integers(3)
            if kind == 0:
                inside = (np.abs(yy - cy) < r) & (np.abs(xx - cx) < r)
            elif kind == 1:
                inside = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
            else:
                inside = (yy > cy - r) & (yy < cy + r) & (np.abs(xx - cx) < (yy - cy + r) / 2)
            img[:, inside] = rng.uniform(0.2, 1, (3, 1))
    return out


def _slot_attention(c):
    rng = np.random.default_rng(507)
    batches = [imp.Tensor(_sprites(rng, c["batch"], c["size"])) for _ in range(4)]
    model = SlotAutoencoder(c["ch"], c["slots"], c["iters"], c["size"])
    opt = optim.Adam(model.parameters(), 4e-4)
    schedule = CosineAnnealingLR(opt, 500, warmup_steps=3)
    next_batch = _cycle(batches)

    def loss_of():
        img = next_batch()
        return F.mse_loss(model(img), img)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 5. A masked autoencoder (He et al.): images cut into patches (numpy, once), a linear
#    patch embedding and fixed 2-D sine-cosine position embeddings; per step noise drawn
#    for every patch, its argsort the shuffle and the argsort of that the restore; the
#    first quarter of the shuffle kept and gathered for a stack of pre-norm GELU
#    nn.TransformerEncoderLayers; a narrower decoder gets the encoded patches plus a
#    learned mask token for each hidden one, unshuffled by a gather, its own position
#    embeddings and layers, and predicts each patch's pixels normalised per patch; the MSE
#    counts the hidden patches only; AdamW at betas (0.9, 0.95), warm-up and cosine decay.
def _sincos(n_side, dim):
    """MAE's fixed 2-D sine-cosine position embedding: (1, n_side^2, dim)."""
    def one_axis(pos, d):
        omega = 1.0 / 10000 ** (np.arange(d // 2) / (d / 2))
        out = pos.reshape(-1)[:, None] * omega[None]
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)
    yy, xx = np.mgrid[0:n_side, 0:n_side].astype(np.float64)
    emb = np.concatenate([one_axis(yy, dim // 2), one_axis(xx, dim // 2)], axis=1)
    return imp.Tensor(emb[None].astype(np.float32))


def _encoder_layers(dim, heads, depth):
    return nn.ModuleList([nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0,
                                                     activation="gelu", batch_first=True,
                                                     norm_first=True)
                          for _ in range(depth)])


class MaskedAutoencoder(nn.Module):
    def __init__(self, patches, patch_dim, dim, heads, depth, dec_dim, dec_depth, keep):
        super().__init__()
        side = int(round(math.sqrt(patches)))
        self.keep = keep
        self.embed = nn.Linear(patch_dim, dim)
        self.pos, self.dec_pos = _sincos(side, dim), _sincos(side, dec_dim)
        self.encoder = _encoder_layers(dim, heads, depth)
        self.norm = nn.LayerNorm(dim)
        self.dec_embed = nn.Linear(dim, dec_dim)
        self.mask_token = nn.Parameter(imp.random.normal(0, 0.02, (1, 1, dec_dim)))
        self.decoder = _encoder_layers(dec_dim, heads, dec_depth)
        self.dec_norm = nn.LayerNorm(dec_dim)
        self.pred = nn.Linear(dec_dim, patch_dim)

    def forward(self, patches):
        b, n, _ = patches.shape
        x = self.embed(patches) + self.pos
        shuffle = F.argsort(imp.random.uniform(size=(b, n)), axis=1)
        restore = F.argsort(shuffle, axis=1)
        kept = F.expand_dims(shuffle[:, :self.keep], 2)
        x = F.gather(x, 1, F.broadcast_to(kept, (b, self.keep, x.shape[2])))
        for layer in self.encoder:
            x = layer(x)
        x = self.dec_embed(self.norm(x))
        d = x.shape[2]
        x = F.concat([x, F.broadcast_to(self.mask_token, (b, n - self.keep, d))], axis=1)
        x = F.gather(x, 1, F.broadcast_to(F.expand_dims(restore, 2), (b, n, d)))
        x = x + self.dec_pos
        for layer in self.decoder:
            x = layer(x)
        hidden = (restore >= self.keep).astype("float32")                 # (b, n)
        return self.pred(self.dec_norm(x)), hidden


def _patchify(img, p):
    n, ch, s, _ = img.shape
    g = s // p
    return img.reshape(n, ch, g, p, g, p).transpose(0, 2, 4, 1, 3, 5).reshape(n, g * g, -1)


def _mae(c):
    rng = np.random.default_rng(509)
    p, size = c["patch"], c["size"]
    batches = []
    for _ in range(4):
        patches = _patchify(_scenes(rng, c["batch"], size), p)
        mean, var = patches.mean(axis=2, keepdims=True), patches.var(axis=2, keepdims=True)
        batches.append((imp.Tensor(patches), imp.Tensor(
            ((patches - mean) / np.sqrt(var + 1e-6)).astype(np.float32))))
    n = (size // p) ** 2
    model = MaskedAutoencoder(n, 3 * p * p, c["dim"], c["heads"], c["depth"], c["dec_dim"],
                              c["dec_depth"], n // 4)
    opt = optim.AdamW(model.parameters(), 1e-3, betas=(0.9, 0.95), weight_decay=0.05)
    schedule = CosineAnnealingLR(opt, 400, warmup_steps=3)
    next_batch = _cycle(batches)

    def loss_of():
        patches, target = next_batch()
        pred, hidden = model(patches)
        per_patch = F.mean((pred - target) ** 2, axis=2)
        return F.sum(per_patch * hidden) / F.sum(hidden)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 6. A Switch Transformer language model (Fedus et al.): token and position embeddings,
#    pre-norm causal self-attention, and in every block a Switch feed-forward layer: a
#    router's softmax, each token sent to its top expert only, at most `capacity` tokens an
#    expert (the capacity factor 1.25 of the tokens' even share; a token's place in its
#    expert's queue is the cumulative sum of the one-hot routes, overflowing tokens dropped
#    to a spare row and passed on by the residual), tokens scattered into the experts'
#    buffers by index_add, the experts' two-layer GELU MLPs one batched matmul each,
#    outputs gathered back by index_select and scaled by the router's probability; the
#    load-balancing loss (experts x sum of tokens' share times mean probability) at 0.01
#    per layer. The text: a mix of four random sparse Markov chains; Adam, warm-up.
class SwitchFFN(nn.Module):
    def __init__(self, dim, hidden, experts, capacity_factor=1.25):
        super().__init__()
        self.experts, self.capacity_factor = experts, capacity_factor
        self.router = nn.Linear(dim, experts, bias=False)
        self.w1 = nn.Parameter(imp.random.normal(0, dim ** -0.5, (experts, dim, hidden)))
        self.b1 = nn.Parameter(F.zeros((experts, 1, hidden)))
        self.w2 = nn.Parameter(imp.random.normal(0, hidden ** -0.5, (experts, hidden, dim)))
        self.b2 = nn.Parameter(F.zeros((experts, 1, dim)))

    def forward(self, x):
        b, s, d = x.shape
        n, e = b * s, self.experts
        tokens = F.reshape(x, (n, d))
        probs = F.softmax(self.router(tokens), axis=1)                            # (n, E)
        expert = F.argmax(probs, axis=1)
        route = F.equal(F.expand_dims(expert, 1), F.arange(e, dtype="int32")).astype("float32")
        gate = F.sum(probs * route, axis=1, keepdims=True)
        place = F.sum(F.cumsum(route, axis=0) * route, axis=1) - 1                # (n,)
        capacity = int(math.ceil(self.capacity_factor * n / e))
        slot = F.where(place < capacity, expert * capacity + place.astype("int32"),
                       e * capacity)
        queued = F.index_add(F.zeros((e * capacity + 1, d)), 0, slot, tokens)
        h = F.reshape(queued[:e * capacity], (e, capacity, d))
        h = F.matmul(F.gelu(F.matmul(h, self.w1) + self.b1), self.w2) + self.b2
        out = F.concat([F.reshape(h, (e * capacity, d)), F.zeros((1, d))], axis=0)
        y = F.index_select(out, 0, slot) * gate
        balance = e * F.sum(F.mean(route, axis=0) * F.mean(probs, axis=0))
        return F.reshape(y, (b, s, d)), balance


class SwitchBlock(nn.Module):
    def __init__(self, dim, heads, hidden, experts):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ffn = SwitchFFN(dim, hidden, experts)

    def forward(self, x, causal):
        q, k, v = F.split(self.qkv(self.norm1(x)), 3, axis=2)
        x = x + self.proj(attention(q, k, v, self.heads, causal))
        y, balance = self.ffn(self.norm2(x))
        return x + y, balance


class SwitchLM(nn.Module):
    def __init__(self, vocab, length, dim, heads, hidden, experts, layers):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, dim), nn.Embedding(length, dim)
        self.blocks = nn.ModuleList([SwitchBlock(dim, heads, hidden, experts)
                                     for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)
        self.causal = imp.Tensor(np.triu(np.full((length, length), NEG, np.float32), 1))

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos(F.arange(tokens.shape[1], dtype="int32"))
        balance = 0
        for block in self.blocks:
            x, b = block(x, self.causal)
            balance = balance + b
        return self.head(self.norm(x)), balance


def _markov_text(rng, n, length, vocab, chains=4, fanout=4):
    """(n, length + 1) int32: each row walks one of `chains` random sparse chains (each
    word followed by one of `fanout` words)."""
    nexts = rng.integers(0, vocab, (chains, vocab, fanout))
    out = np.zeros((n, length + 1), np.int32)
    for i in range(n):
        chain, w = rng.integers(chains), rng.integers(vocab)
        for t in range(length + 1):
            out[i, t] = w
            w = nexts[chain, w, rng.integers(fanout)]
    return out


def _switch(c):
    rng = np.random.default_rng(511)
    length = c["length"]
    batches = [imp.Tensor(_markov_text(rng, c["batch"], length, c["vocab"]))
               for _ in range(4)]
    model = SwitchLM(c["vocab"], length, c["dim"], c["heads"], c["hidden"], c["experts"],
                     c["layers"])
    opt = optim.Adam(model.parameters(), 1e-3)
    schedule = CosineAnnealingLR(opt, 1000, warmup_steps=3)
    next_batch = _cycle(batches)

    def loss_of():
        text = next_batch()
        logits, balance = model(text[:, :length])
        return F.cross_entropy(logits, text[:, 1:]) + 0.01 * balance
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 7. An E(n)-equivariant graph network (Satorras et al.) on made-up molecules: atom types
#    embedded, every ordered pair of atoms of a molecule an edge (an edge list over the
#    flattened batch); per layer each edge's message from both atoms' features and their
#    squared distance (index_select by the edge list), the atoms moved by their edges'
#    difference vectors weighted by a tanh of the messages (summed by index_add, divided by
#    the degree), the messages summed by index_add into a residual node update; the
#    energy a mean per molecule (index_add by molecule) of an MLP of the final features.
#    Targets: Morse energies of the atoms' pairs with type-dependent depths, standardised;
#    MSE; Adam.
class EGNNLayer(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.edge = nn.Sequential(nn.Linear(2 * hidden + 1, hidden), nn.SiLU(),
                                  nn.Linear(hidden, hidden), nn.SiLU())
        self.coord = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(),
                                   nn.Linear(hidden, 1, bias=False))
        self.node = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.SiLU(),
                                  nn.Linear(hidden, hidden))
        last = self.coord[2]
        last.weight[...] = imp.random.normal(0, 0.001, size=last.weight.shape)

    def forward(self, h, x, src, dst, inv_degree):
        diff = F.index_select(x, 0, dst) - F.index_select(x, 0, src)
        dist2 = F.sum(diff * diff, axis=1, keepdims=True)
        m = self.edge(F.concat([F.index_select(h, 0, dst), F.index_select(h, 0, src), dist2],
                               axis=1))
        moves = F.index_add(F.zeros_like(x), 0, dst, diff * F.tanh(self.coord(m)))
        x = x + moves * inv_degree
        h = h + self.node(F.concat([h, F.index_add(F.zeros_like(h), 0, dst, m)], axis=1))
        return h, x


class EGNN(nn.Module):
    def __init__(self, kinds, hidden, layers):
        super().__init__()
        self.embed = nn.Embedding(kinds, hidden)
        self.layers = nn.ModuleList([EGNNLayer(hidden) for _ in range(layers)])
        self.readout = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(),
                                     nn.Linear(hidden, 1))

    def forward(self, g):
        h, x = self.embed(g["kinds"]), g["pos"]
        for layer in self.layers:
            h, x = layer(h, x, g["src"], g["dst"], g["inv_degree"])
        per_atom = self.readout(h)
        return F.index_add(F.zeros((g["molecules"], 1)), 0, g["molecule"], per_atom,
                           alpha=g["inv_atoms"])


def _molecules(rng, n, atoms, kinds=5):
    """A batch of n molecules of `atoms` atoms each as flat Tensors and their raw
    energies (numpy)."""
    depth = rng.uniform(0.5, 1.5, (kinds, kinds))
    depth = (depth + depth.T) / 2
    kind = rng.integers(0, kinds, (n, atoms))
    pos = rng.standard_normal((n, atoms, 3)) * (0.8 * atoms ** (1 / 3))
    r = np.linalg.norm(pos[:, :, None] - pos[:, None], axis=3)
    morse = (1 - np.exp(-1.5 * (r - 1.2))) ** 2 - 1
    pair = depth[kind[:, :, None], kind[:, None, :]] * np.minimum(morse, 4.0)
    iu = np.triu_indices(atoms, 1)
    energy = pair[:, iu[0], iu[1]].sum(axis=1)
    i, j = np.nonzero(~np.eye(atoms, dtype=bool))
    offsets = (np.arange(n) * atoms)[:, None]
    g = dict(kinds=kind.reshape(-1), pos=pos.reshape(-1, 3).astype(np.float32),
             src=(offsets + j).reshape(-1), dst=(offsets + i).reshape(-1),
             molecule=np.repeat(np.arange(n), atoms),
             inv_degree=np.full((n * atoms, 1), 1.0 / (atoms - 1), np.float32))
    g = {k: imp.Tensor(v.astype(np.int32) if v.dtype.kind == "i" else v)
         for k, v in g.items()}
    g["molecules"], g["inv_atoms"] = n, 1.0 / atoms
    return g, energy


def _egnn(c):
    rng = np.random.default_rng(513)
    data = [_molecules(rng, c["batch"], c["atoms"]) for _ in range(4)]
    energies = np.concatenate([e for _, e in data])
    mean, std = energies.mean(), energies.std() + 1e-6
    batches = [(g, imp.Tensor(((e - mean) / std).astype(np.float32)[:, None]))
               for g, e in data]
    model = EGNN(5, c["hidden"], c["layers"])
    opt = optim.Adam(model.parameters(), 1e-3)
    next_batch = _cycle(batches)

    def loss_of():
        g, target = next_batch()
        return F.mse_loss(model(g), target)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 8. A point-cloud generator trained by a Sinkhorn loss (Genevay et al.): a class embedding
#    added to a linear map of per-point Gaussian noise, an MLP to 2-D points; the loss the
#    entropic optimal transport cost between the generated and the target cloud less half
#    the generated cloud's cost against itself (the target's own term, a constant, left
#    out), each by `iters` log-domain Sinkhorn iterations (the dual potentials updated by
#    logsumexp over the (batch, n, m) cost) differentiated through every iteration, no
#    envelope trick; Adam. Targets: rings, squares, two moons, spirals and crosses, four
#    batches of freshly sampled clouds that cycle.
class CloudGenerator(nn.Module):
    def __init__(self, classes, noise, hidden, layers):
        super().__init__()
        self.embed = nn.Embedding(classes, hidden)
        self.inp = nn.Linear(noise, hidden)
        body = []
        for _ in range(layers):
            body += [nn.Linear(hidden, hidden), nn.SiLU()]
        self.body = nn.Sequential(nn.SiLU(), *body, nn.Linear(hidden, 2))

    def forward(self, labels, noise):
        return self.body(self.inp(noise) + F.expand_dims(self.embed(labels), 1))


def _sinkhorn_cost(x, y, eps, iters):
    """The entropic OT cost between uniform clouds x (b, n, d) and y (b, m, d), by `iters`
    log-domain Sinkhorn iterations, unrolled: the mean over the batch of <a, f> + <b, g>."""
    n, m = x.shape[1], y.shape[1]
    cost = (F.sum(x * x, axis=2, keepdims=True) + F.expand_dims(F.sum(y * y, axis=2), 1)
            - 2 * F.matmul(x, y, transpose_b=True))                             # (b, n, m)
    cost = F.maximum(cost, 0.0) / eps
    log_a, log_b = -math.log(n), -math.log(m)
    g = F.zeros((x.shape[0], 1, m))
    for _ in range(iters):
        f = -F.logsumexp(g - cost + log_b, axis=2, keepdims=True)              # (b, n, 1)
        g = -F.logsumexp(f - cost + log_a, axis=1, keepdims=True)              # (b, 1, m)
    return eps * F.mean(F.sum(f, axis=(1, 2)) / n + F.sum(g, axis=(1, 2)) / m)


def _shape_clouds(rng, n, points):
    """(labels (n,), clouds (n, points, 2)): five kinds of 2-D shapes, jittered."""
    labels = rng.integers(0, 5, n)
    clouds = np.zeros((n, points, 2))
    for i, k in enumerate(labels):
        t = rng.uniform(0, 1, points)
        if k == 0:                                            # ring
            pts = np.stack([np.cos(2 * np.pi * t), np.sin(2 * np.pi * t)], 1)
        elif k == 1:                                          # square outline
            side, u = (4 * t).astype(int), 8 * (t % 0.25) - 1
            pts = np.select([side[:, None] == s for s in range(4)],
                            [np.stack([u, -np.ones_like(u)], 1),
                             np.stack([np.ones_like(u), u], 1),
                             np.stack([-u, np.ones_like(u)], 1),
                             np.stack([-np.ones_like(u), -u], 1)])
        elif k == 2:                                          # two moons
            up = t < 0.5
            a = np.pi * (2 * t % 1)
            pts = np.where(up[:, None], np.stack([np.cos(a) - 0.5, np.sin(a) - 0.25], 1),
                           np.stack([0.5 - np.cos(a), 0.25 - np.sin(a)], 1))
        elif k == 3:                                          # spiral
            a = 3 * np.pi * t
            pts = np.stack([t * np.cos(a), t * np.sin(a)], 1)
        else:                                                 # cross
            u, horizontal = 2 * (2 * t % 1) - 1, t < 0.5
            pts = np.where(horizontal[:, None], np.stack([u, 0 * u], 1),
                           np.stack([0 * u, u], 1))
        clouds[i] = pts + 0.03 * rng.standard_normal((points, 2))
    return imp.Tensor(labels.astype(np.int32)), imp.Tensor(clouds.astype(np.float32))


def _sinkhorn(c):
    rng = np.random.default_rng(515)
    b, points = c["batch"], c["points"]
    batches = [_shape_clouds(rng, b, points) for _ in range(4)]
    model = CloudGenerator(5, c["noise"], c["hidden"], c["layers"])
    opt = optim.Adam(model.parameters(), 1e-3)
    next_batch = _cycle(batches)
    eps, iters = c["eps"], c["iters"]

    def loss_of():
        labels, target = next_batch()
        fake = model(labels, imp.random.normal(size=(b, points, c["noise"])))
        return (_sinkhorn_cost(fake, target, eps, iters)
                - 0.5 * _sinkhorn_cost(fake, fake, eps, iters))
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 9. PonderNet (Banino et al.) on parity: a GRUCell reads the same input vector at every
#    step, a head gives a prediction and a halting probability at each; the steps run
#    until the probability of not having halted yet is below 1% in every sample of the
#    batch (read back each step, so the graph's length follows the values) or a maximum,
#    the rest of the probability given to the last step; the loss the expected BCE under
#    the halting distribution plus 0.01 KL to a geometric prior (lambda 0.2) truncated to
#    the steps taken; Adam, gradients clipped. Inputs: vectors with a random number of
#    entries set to +1 or -1, the target the parity of the +1s; four batches cycle.
class PonderGRU(nn.Module):
    def __init__(self, bits, hidden):
        super().__init__()
        self.hidden = hidden
        self.cell = nn.GRUCell(bits, hidden)
        self.out, self.halt = nn.Linear(hidden, 1), nn.Linear(hidden, 1)

    def forward(self, x, max_steps, threshold=0.01):
        b = x.shape[0]
        h = F.zeros((b, self.hidden))
        running = F.ones((b,))
        probs, preds = [], []
        for n in range(max_steps):
            h = self.cell(x, h)
            preds.append(F.squeeze(self.out(h), 1))
            lam = F.sigmoid(F.squeeze(self.halt(h), 1))
            left = running * (1 - lam)
            if n == max_steps - 1 or float(F.max(left)) < threshold:
                probs.append(running)                                # halts here at last
                break
            probs.append(running * lam)
            running = left
        return F.stack(probs, axis=1), F.stack(preds, axis=1)


def _parity(rng, n, bits):
    x = np.zeros((n, bits), np.float32)
    for row in x:
        k = rng.integers(1, bits + 1)
        row[rng.choice(bits, k, replace=False)] = rng.choice([-1.0, 1.0], k)
    return imp.Tensor(x), imp.Tensor(((x == 1).sum(axis=1) % 2).astype(np.float32))


def _pondernet(c):
    rng = np.random.default_rng(517)
    batches = [_parity(rng, c["batch"], c["bits"]) for _ in range(4)]
    model = PonderGRU(c["bits"], c["hidden"])
    params = model.parameters()
    gm, opt = GradManager().attach(params), optim.Adam(params, 1e-3)
    next_batch = _cycle(batches)
    lam_p = 0.2

    def step():
        x, y = next_batch()
        with gm:
            p, logits = model(x, c["max_steps"])
            steps = p.shape[1]
            prior = lam_p * (1 - lam_p) ** np.arange(steps)
            log_prior = imp.Tensor(np.log(prior / prior.sum()).astype(np.float32))
            bce = F.softplus(logits) - F.expand_dims(y, 1) * logits          # (b, steps)
            expected = F.mean(F.sum(p * bce, axis=1))
            kl = F.mean(F.sum(p * (F.log(p + 1e-10) - log_prior), axis=1))
            loss = expected + 0.01 * kl
            gm.backward(loss)
        optim.clip_grad_norm(params, 1.0)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 10. Contrastive predictive coding (van den Oord et al.) on raw waveforms: five strided
#     Conv1d layers (strides 5, 4, 2, 2, 2: one frame per 160 samples) with BatchNorm1d
#     and ReLU give the frames z, a batch-first nn.GRU over them the contexts c; for each
#     of `ahead` offsets k a linear predictor maps c_t to a guess of z_(t+k), scored
#     against every frame of the same sequence (a batched matmul), InfoNCE (cross entropy
#     toward frame t + k); the mean over the offsets; Adam. The waveforms: "speakers" (a
#     few base frequencies each) uttering "phonemes" of 300-900 samples (two or three
#     harmonics of a base, an envelope), plus noise; four batches cycle.
class CPC(nn.Module):
    def __init__(self, ch, hidden, ahead):
        super().__init__()
        layers = []
        for i, (k, s, p) in enumerate([(10, 5, 3), (8, 4, 2), (4, 2, 1), (4, 2, 1),
                                       (4, 2, 1)]):
            layers += [nn.Conv1d(1 if i == 0 else ch, ch, k, s, p, bias=False),
                       nn.BatchNorm1d(ch), nn.ReLU()]
        self.encoder = nn.Sequential(*layers)
        self.gru = nn.GRU(ch, hidden, batch_first=True)
        self.predictors = nn.ModuleList([nn.Linear(hidden, ch) for _ in range(ahead)])

    def forward(self, wave):
        z = F.transpose(self.encoder(wave), (0, 2, 1))                       # (b, T, ch)
        context, _ = self.gru(z)
        b, frames = z.shape[0], z.shape[1]
        total = 0
        for k, predictor in enumerate(self.predictors, 1):
            guess = predictor(context[:, :frames - k])                       # (b, T-k, ch)
            scores = F.matmul(guess, z, transpose_b=True)                    # (b, T-k, T)
            target = F.broadcast_to(F.arange(k, frames, dtype="int32"), (b, frames - k))
            total = total + F.cross_entropy(scores, target)
        return total / len(self.predictors)


def _speech(rng, n, length):
    out = np.zeros((n, 1, length), np.float32)
    t = np.arange(length) / 16000
    for row in out:
        bases = rng.uniform(90, 260, 4)
        start = 0
        while start < length:
            dur = rng.integers(300, 900)
            seg = slice(start, min(start + dur, length))
            f0 = bases[rng.integers(4)] * rng.uniform(1, 4)
            env = np.hanning(dur)[:seg.stop - seg.start]
            tone = sum(rng.uniform(0.2, 1) * np.sin(2 * np.pi * h * f0 * t[seg] + rng.uniform(0, 6))
                       for h in range(1, rng.integers(3, 5)))
            row[0, seg] = env * tone
            start += dur
        row += 0.05 * rng.standard_normal(length).astype(np.float32)
    return imp.Tensor(out)


def _cpc(c):
    rng = np.random.default_rng(519)
    batches = [_speech(rng, c["batch"], c["length"]) for _ in range(4)]
    model = CPC(c["ch"], c["hidden"], c["ahead"])
    opt = optim.Adam(model.parameters(), 1e-3)
    next_batch = _cycle(batches)
    return stepper(model.parameters(), opt, lambda: model(next_batch()))


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "wgan_gp": dict(nz=64, ch=12, size=32, n_critic=2, batch=10),
    "maml": dict(ch=24, ways=5, shots=2, queries=5, size=28, classes=40, inner_steps=2,
                 inner_lr=0.4, tasks=2),
    "ebm_langevin": dict(ch=16, size=32, batch=16, buffer=256, langevin=3, step_size=10.0),
    "slot_attention": dict(ch=32, slots=5, iters=3, size=32, batch=4),
    "mae": dict(patch=4, size=32, dim=96, heads=4, depth=4, dec_dim=64, dec_depth=2,
                batch=24),
    "switch_lm": dict(vocab=256, length=64, dim=96, heads=4, hidden=192, experts=8, layers=2,
                      batch=32),
    "egnn": dict(hidden=64, layers=4, atoms=12, batch=32),
    "sinkhorn": dict(noise=8, hidden=128, layers=3, points=64, eps=0.05, iters=20,
                     batch=12),
    "pondernet": dict(bits=32, hidden=256, max_steps=20, batch=256),
    "cpc": dict(ch=64, hidden=64, ahead=6, length=12800, batch=8),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "wgan_gp": dict(nz=8, ch=4, size=16, n_critic=2, batch=4),
    "maml": dict(ch=8, ways=3, shots=1, queries=2, size=16, classes=8, inner_steps=2,
                 inner_lr=0.4, tasks=2),
    "ebm_langevin": dict(ch=4, size=16, batch=4, buffer=16, langevin=3, step_size=10.0),
    "slot_attention": dict(ch=8, slots=3, iters=2, size=16, batch=2),
    "mae": dict(patch=4, size=16, dim=16, heads=2, depth=2, dec_dim=16, dec_depth=1,
                batch=4),
    "switch_lm": dict(vocab=32, length=12, dim=16, heads=2, hidden=24, experts=4, layers=2,
                      batch=4),
    "egnn": dict(hidden=12, layers=2, atoms=5, batch=4),
    "sinkhorn": dict(noise=4, hidden=16, layers=2, points=16, eps=0.05, iters=5, batch=4),
    "pondernet": dict(bits=8, hidden=16, max_steps=6, batch=16),
    "cpc": dict(ch=8, hidden=8, ahead=3, length=1600, batch=2),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps:
# none here (every model has its own data and step)
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "wgan_gp": _wgan_gp,
    "maml": _maml,
    "ebm_langevin": _ebm,
    "slot_attention": _slot_attention,
    "mae": _mae,
    "switch_lm": _switch,
    "egnn": _egnn,
    "sinkhorn": _sinkhorn,
    "pondernet": _pondernet,
    "cpc": _cpc,
}


MODEL_SET = ModelSet(__name__, "tests/fourteenth_models.py", CONFIGS, BENCH_SIZES, BUILDERS,
                     STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
