"""Ten more models for the memory manager, ordinary ones as a user would write them from a
PyTorch tutorial or the paper, unlike the zoo and tests/{unseen,fresh,novel,heldout,sixth,
seventh,eighth,ninth,tenth}_models.py; written in session 47 by a helper that had not read
the memory manager: ESPCN super-resolution (tanh convs at low resolution, a sub-pixel
convolution: a pixel shuffle by reshapes and a transpose), a categorical VAE with the
Gumbel-softmax (straight-through one-hot samples, an annealed temperature, a KL to the
uniform prior), a mixture density network on Bishop's two-link robot arm (the inverse
kinematics' two branches, a Gaussian mixture's log-likelihood by logsumexp), prototypical
networks (few-shot episodes drawn each step, class prototypes as means of a conv-4
encoder's support embeddings, squared Euclidean distances), Bayes by Backprop (every weight
sampled by the reparameterisation each step, a scale-mixture prior, the KL estimated on the
sample), Gatys' neural style transfer (the image the only parameter, a frozen conv net,
Gram matrices of several layers, a total variation term), a BiLSTM-CRF tagger (a linear
chain CRF's forward algorithm by logsumexp over transitions, the gold path's score
gathered), a synchronous advantage actor-critic on vectorised Catch (the rollout inside
the recording, actions sampled by Gumbel-max and read back at every move, n-step returns,
an entropy bonus, a hand-written RMSprop), FiLM visual question answering (a GRU question
encoder whose output scales and shifts every residual block of a CNN with coordinate maps)
and Reptile on sine-wave regression (a fast copy of the weights trained by inner SGD steps
per task, the meta-weights moved toward it in place).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/tenth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import StepLR
from imperative.models import GRU, cluster_task, conv_bn_relu
from model_sets import ModelSet, bce_with_logits, mlp, stepper
from tenth_models import BiLSTM, Catch, _cycle

# ---------------------------------------------------------------------------------------
# helpers: what a PyTorch user would have taken from torch.nn, torch.optim or torch

LOG_2PI = math.log(2.0 * math.pi)


def _pixel_shuffle(x, r):
    """torch.nn.functional.pixel_shuffle: (b, c r^2, h, w) -> (b, c, h r, w r)."""
    b, c, h, w = x.shape
    x = F.reshape(x, (b, c // (r * r), r, r, h, w))
    return F.reshape(F.transpose(x, (0, 1, 4, 2, 5, 3)), (b, c // (r * r), h * r, w * r))


def _gumbel(shape):
    """Standard Gumbel noise, -log(-log(u)), as torch.nn.functional.gumbel_softmax draws it."""
    u = imp.random.uniform(size=shape)
    return -F.log(-F.log(u + 1e-20) + 1e-20)


def _gumbel_softmax(logits, tau, hard=True):
    """torch.nn.functional.gumbel_softmax over the last axis: a soft sample, or with `hard`
    the one-hot of its argmax whose gradient is the soft sample's (straight-through)."""
    y = F.softmax((logits + _gumbel(logits.shape)) / tau, axis=-1)
    if not hard:
        return y
    one_hot = F.equal(y, F.max(y, axis=-1, keepdims=True)).astype("float32")
    return one_hot - y.detach() + y


def _logaddexp(a, b):
    """torch.logaddexp."""
    return F.logsumexp(F.stack([a, b]), axis=0)


def _normal_log_prob(x, mu, log_sigma):
    """torch.distributions.Normal(mu, exp(log_sigma)).log_prob(x)."""
    z = (x - mu) * F.exp(-log_sigma)
    return -0.5 * z * z - log_sigma - 0.5 * LOG_2PI


def _total_variation(img):
    """The anisotropic total variation of (b, c, h, w) images, mean of squared steps."""
    dh = img[:, :, 1:, :] - img[:, :, :-1, :]
    dw = img[:, :, :, 1:] - img[:, :, :, :-1]
    return F.mean(dh * dh) + F.mean(dw * dw)


def _gram(f):
    """Gatys' Gram matrix of (b, c, h, w) features: (b, c, c), normalised by c h w."""
    b, c, h, w = f.shape
    flat = F.reshape(f, (b, c, h * w))
    return F.matmul(flat, flat, transpose_b=True) * (1.0 / (c * h * w))


class RMSprop:
    """torch.optim.RMSprop (alpha 0.99, as A2C uses it): a running mean of squared
    gradients, rebound in place by setitem each step, as the parameters are."""

    def __init__(self, params, lr, alpha=0.99, eps=1e-5):
        self.params, self.lr, self.alpha, self.eps = list(params), lr, alpha, eps
        self.square_avg = [F.zeros_like(p) for p in self.params]

    def step(self):
        for p, square_avg in zip(self.params, self.square_avg):
            if p.grad is None:
                continue
            square_avg[...] = self.alpha * square_avg + (1 - self.alpha) * p.grad * p.grad
            p[...] = p - self.lr * p.grad / (F.sqrt(square_avg) + self.eps)

    def clear_grad(self):
        for p in self.params:
            p.grad = None


def _glyphs(rng, n, size, strokes=(2, 5)):
    """(n, size, size) binary glyphs, each a few straight strokes between random points."""
    out = np.zeros((n, size, size), np.float32)
    t = np.linspace(0.0, 1.0, 3 * size)[:, None]
    for g in out:
        for _ in range(rng.integers(*strokes)):
            a, b = rng.uniform(1, size - 2, 2), rng.uniform(1, size - 2, 2)
            pts = np.rint(a + t * (b - a)).astype(int)
            g[pts[:, 0], pts[:, 1]] = 1.0
    return out


def _scenes(rng, n, size):
    """(n, 3, size, size) float32 images in [0, 1]: coloured gratings under two or three
    sharp-edged coloured disks, what a super-resolution net can learn edges from."""
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = np.zeros((n, 3, size, size))
    for img in out:
        for _ in range(2):
            k = rng.uniform(2, 12, 2) * rng.choice([-1, 1], 2)
            wave = np.sin(2 * np.pi * (k[0] * xx + k[1] * yy) + rng.uniform(0, 6))
            img += 0.25 * rng.uniform(0, 1, (3, 1, 1)) * wave
        for _ in range(rng.integers(2, 4)):
            cy, cx, r = rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.9), rng.uniform(0.08, 0.3)
            inside = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
            img[:, inside] = rng.uniform(0, 1, (3, 1))
    return np.clip(0.5 + 0.5 * out, 0, 1).astype(np.float32)


# ---------------------------------------------------------------------------------------
# 1. ESPCN (Shi et al.): single-image super-resolution by `scale`, all convolutions at the
#    low resolution (5x5, 3x3, 3x3 with tanh between, the last to 3 scale^2 channels) and a
#    sub-pixel convolution at the end (the pixel shuffle). The low-resolution inputs are
#    the high-resolution scenes averaged over scale x scale blocks; four batches cycle, each
#    flipped at random left-right per step; MSE; Adam, the rate divided by 10 every 100
#    steps.
class ESPCN(nn.Module):
    def __init__(self, ch, scale):
        super().__init__()
        self.scale = scale
        self.body = nn.Sequential(nn.Conv2d(3, 2 * ch, 5, padding=2), nn.Tanh(),
                                  nn.Conv2d(2 * ch, ch, 3, padding=1), nn.Tanh(),
                                  nn.Conv2d(ch, 3 * scale * scale, 3, padding=1))

    def forward(self, x):
        return _pixel_shuffle(self.body(x), self.scale)


def _espcn(c):
    rng = np.random.default_rng(151)
    b, r, size = c["batch"], c["scale"], c["size"]
    batches = []
    for _ in range(4):
        hr = _scenes(rng, b, size * r)
        lr = hr.reshape(b, 3, size, r, size, r).mean(axis=(3, 5))
        batches.append((imp.Tensor(lr), imp.Tensor(hr)))
    model = ESPCN(c["ch"], r)
    opt = optim.Adam(model.parameters(), 1e-3)
    schedule = StepLR(opt, 100, 0.1)
    next_batch = _cycle(batches)

    def loss_of():
        lr, hr = next_batch()
        if rng.random() < 0.5:
            lr, hr = lr[..., ::-1], hr[..., ::-1]
        return F.mse_loss(model(lr), hr)
    step = stepper(model.parameters(), opt, loss_of)

    def run():
        loss = step()
        schedule.step()
        return loss
    return run


# ---------------------------------------------------------------------------------------
# 2. A categorical VAE with the Gumbel-softmax (Jang et al.): an MLP encoder to `latents`
#    categorical variables of `cats` classes each, straight-through hard samples at a
#    temperature annealed from 1 toward 0.5 (exp(-r n) each step), an MLP decoder to
#    Bernoulli logits; the loss the binary cross entropy summed over pixels plus the KL of
#    the posterior to the uniform prior, averaged over the batch; Adam. Data: binary glyphs
#    of ten classes, shifted by a pixel and with 3% of the pixels flipped.
class GumbelVAE(nn.Module):
    def __init__(self, pixels, hidden, latents, cats):
        super().__init__()
        self.latents, self.cats = latents, cats
        self.encoder = mlp([pixels, 2 * hidden, hidden, latents * cats])
        self.decoder = mlp([latents * cats, hidden, 2 * hidden, pixels])

    def forward(self, x, tau):
        logits = F.reshape(self.encoder(x), (x.shape[0], self.latents, self.cats))
        z = _gumbel_softmax(logits, tau)
        return self.decoder(F.reshape(z, (x.shape[0], -1))), logits


def _noisy_glyphs(rng, prototypes, n, flip=0.03):
    """(n, pixels) binary images: a random prototype rolled by up to a pixel each way, with
    `flip` of its pixels flipped; and their classes."""
    which = rng.integers(0, len(prototypes), n)
    out = np.empty((n,) + prototypes.shape[1:], np.float32)
    for i, k in enumerate(which):
        out[i] = np.roll(prototypes[k], tuple(rng.integers(-1, 2, 2)), axis=(0, 1))
    flips = rng.random(out.shape) < flip
    return np.where(flips, 1.0 - out, out).reshape(n, -1).astype(np.float32), which


def _gumbelvae(c):
    rng = np.random.default_rng(157)
    b, size, cats = c["batch"], c["size"], c["cats"]
    prototypes = _glyphs(rng, 10, size)
    batches = [imp.Tensor(_noisy_glyphs(rng, prototypes, b)[0]) for _ in range(4)]
    model = GumbelVAE(size * size, c["hidden"], c["latents"], cats)
    next_batch = _cycle(batches)
    state = {"n": 0}

    def loss_of():
        tau = max(0.5, math.exp(-3e-3 * state["n"]))
        state["n"] += 1
        x = next_batch()
        recon, logits = model(x, tau)
        nll = F.sum(bce_with_logits(recon, x, "none")) / b
        log_q = F.log_softmax(logits, axis=-1)
        kl = F.sum(F.exp(log_q) * (log_q + math.log(cats))) / b
        return nll + kl
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 3. A mixture density network (Bishop) on the inverse kinematics of his two-link robot
#    arm: from the end effector's position, the two joint angles, whose distribution has
#    two branches (elbow up and down). A tanh MLP gives `mixtures` mixing logits, means and
#    log scales of diagonal Gaussians over the two angles; the negative log-likelihood by
#    logsumexp over the components; minibatches drawn each step from a fixed training set;
#    Adam.
class MDN(nn.Module):
    def __init__(self, hidden, layers, mixtures, dims=2):
        super().__init__()
        self.k, self.dims = mixtures, dims
        self.trunk = nn.Sequential(*[m for i in range(layers) for m in
                                     (nn.Linear(2 if i == 0 else hidden, hidden), nn.Tanh())])
        self.pi = nn.Linear(hidden, mixtures)
        self.mu = nn.Linear(hidden, mixtures * dims)
        self.log_sigma = nn.Linear(hidden, mixtures * dims)

    def forward(self, x):
        h = self.trunk(x)
        shape = (x.shape[0], self.k, self.dims)
        return (F.log_softmax(self.pi(h), axis=1), F.reshape(self.mu(h), shape),
                F.clip(F.reshape(self.log_sigma(h), shape), -7.0, 7.0))


def _mdn_nll(log_pi, mu, log_sigma, y):
    """-log sum_k pi_k N(y; mu_k, sigma_k), averaged: y (b, dims)."""
    log_prob = F.sum(_normal_log_prob(F.expand_dims(y, 1), mu, log_sigma), axis=2)
    return -F.mean(F.logsumexp(log_pi + log_prob, axis=1))


def _robot_arm(rng, n, l1=0.8, l2=0.2):
    """(positions (n, 2), normalised angles (n, 2)) of Bishop's two-link arm."""
    t1 = rng.uniform(0.3, 1.2, n)
    t2 = rng.uniform(np.pi / 2, 3 * np.pi / 2, n)
    x = np.stack([l1 * np.cos(t1) - l2 * np.cos(t1 + t2),
                  l1 * np.sin(t1) - l2 * np.sin(t1 + t2)], 1)
    y = np.stack([(t1 - 0.75) / 0.26, (t2 - np.pi) / 0.9], 1)
    x = x + 0.005 * rng.standard_normal(x.shape)
    return imp.Tensor(x.astype(np.float32)), imp.Tensor(y.astype(np.float32))


def _mdn(c):
    rng = np.random.default_rng(163)
    b = c["batch"]
    x, y = _robot_arm(rng, 8 * b)
    model = MDN(c["hidden"], c["layers"], c["mixtures"])

    def loss_of():
        pick = imp.random.randint(0, 8 * b, size=(b,))
        return _mdn_nll(*model(x[pick]), y[pick])
    return stepper(model.parameters(), optim.Adam(model.parameters(), 3e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 4. Prototypical networks (Snell et al.) on Omniglot-like glyphs: each step an episode of
#    `way` classes drawn from a pool, `shot` support and `query` query examples each (the
#    class's glyph rolled a pixel or so, some strokes' pixels dropped, noise); a conv-4
#    encoder (conv, batch norm, ReLU, 2x2 max pool, four times), each class's prototype the
#    mean of its support embeddings, the queries classified by a softmax over minus their
#    squared Euclidean distances to the prototypes; Adam.
class ConvFour(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Sequential(conv_bn_relu(1 if i == 0 else ch, ch),
                                                    nn.MaxPool2d(2)) for i in range(4)])

    def forward(self, x):
        return F.flatten(self.blocks(x), 1)


def _squared_distances(a, b):
    """(n, m) squared Euclidean distances between the rows of a (n, d) and b (m, d)."""
    return (F.sum(a * a, axis=1, keepdims=True) - 2.0 * F.matmul(a, b, transpose_b=True)
            + F.transpose(F.sum(b * b, axis=1, keepdims=True), (1, 0)))


def _episode(rng, pool, way, shot, query):
    """(support (way shot, 1, s, s), query (way query, 1, s, s), query labels)."""
    classes = rng.choice(len(pool), way, replace=False)
    per = shot + query
    images = np.empty((way, per) + pool.shape[1:], np.float32)
    for i, k in enumerate(classes):
        for j in range(per):
            g = np.roll(pool[k], tuple(rng.integers(-1, 2, 2)), axis=(0, 1))
            g = g * (rng.random(g.shape) > 0.1)
            images[i, j] = g + 0.1 * rng.standard_normal(g.shape)
    images = images[:, :, None]
    labels = np.repeat(np.arange(way), query).astype(np.int32)
    return (imp.Tensor(images[:, :shot].reshape((way * shot,) + images.shape[2:])),
            imp.Tensor(images[:, shot:].reshape((way * query,) + images.shape[2:])),
            imp.Tensor(labels))


def _protonet(c):
    rng = np.random.default_rng(167)
    way, shot, query = c["way"], c["shot"], c["query"]
    pool = _glyphs(rng, c["classes"], c["size"], strokes=(3, 6))
    model = ConvFour(c["ch"])

    def loss_of():
        support, queries, labels = _episode(rng, pool, way, shot, query)
        emb = model(F.concat([support, queries], axis=0))
        s, q = emb[:way * shot], emb[way * shot:]
        prototypes = F.mean(F.reshape(s, (way, shot, -1)), axis=1)
        return F.cross_entropy(-_squared_distances(q, prototypes), labels)
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 5. Bayes by Backprop (Blundell et al.): an MLP whose every weight and bias is a Gaussian
#    (a mean and rho, sigma = softplus(rho)), sampled by the reparameterisation at every
#    forward pass; the KL to a scale-mixture prior (pi N(0, 1) + (1 - pi) N(0, e^-6))
#    estimated on the sample, log q(w) - log p(w), weighted by 1 / (the number of
#    minibatches); `samples` Monte Carlo samples a step; minibatches cycle through a
#    fixed training set of noisy class templates; Adam.
class BayesLinear(nn.Module):
    def __init__(self, cin, cout, prior_pi=0.5, log_sigma1=0.0, log_sigma2=-6.0):
        super().__init__()
        self.w_mu = nn.Parameter(imp.random.uniform(-0.1, 0.1, (cout, cin)))
        self.w_rho = nn.Parameter(np.full((cout, cin), -5.0, np.float32))
        self.b_mu = nn.Parameter(np.zeros((cout,), np.float32))
        self.b_rho = nn.Parameter(np.full((cout,), -5.0, np.float32))
        self.prior = (math.log(prior_pi), log_sigma1, math.log(1.0 - prior_pi), log_sigma2)

    def sample(self, mu, rho):
        """(a sample, log q(sample) - log p(sample))."""
        eps = imp.random.normal(size=mu.shape)
        sigma = F.softplus(rho)
        w = mu + sigma * eps
        log_q = F.sum(-0.5 * eps * eps - F.log(sigma) - 0.5 * LOG_2PI)
        log_pi1, ls1, log_pi2, ls2 = self.prior
        log_p = F.sum(_logaddexp(log_pi1 + _normal_log_prob(w, 0.0, ls1),
                                 log_pi2 + _normal_log_prob(w, 0.0, ls2)))
        return w, log_q - log_p

    def forward(self, x):
        w, kl_w = self.sample(self.w_mu, self.w_rho)
        b, kl_b = self.sample(self.b_mu, self.b_rho)
        return F.linear(x, w, b), kl_w + kl_b


class BayesMLP(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = nn.ModuleList([BayesLinear(a, b) for a, b in zip(sizes, sizes[1:])])

    def forward(self, x):
        kl = 0.0
        for i, layer in enumerate(self.layers):
            x, layer_kl = layer(x)
            kl = kl + layer_kl
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x, kl


def _bayes(c):
    b, d, batches = c["batch"], c["dim"], 8
    x, labels = cluster_task(batches * b, (d,), seed=173)
    data = [(x[i * b:(i + 1) * b], labels[i * b:(i + 1) * b]) for i in range(batches)]
    model = BayesMLP([d, c["hidden"], c["hidden"], 10])
    next_batch = _cycle(data)

    def loss_of():
        xb, yb = next_batch()
        loss = 0.0
        for _ in range(c["samples"]):
            logits, kl = model(xb)
            loss = loss + kl / (batches * b) + F.cross_entropy(logits, yb)
        return loss / c["samples"]
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 6. Neural style transfer (Gatys et al.): the image is the only parameter; a frozen conv
#    net (three stages of 3x3 convs and ReLUs, average pooling between, as Gatys preferred
#    to max pooling; random weights standing in for VGG's, not attached); the content loss
#    on one deep layer's features, the style loss on the Gram matrices of the first layer
#    of each stage, a total variation term; the targets computed once, outside the
#    recording; Adam on the pixels, which are clipped to [0, 1] in place after each step.
class StyleFeatures(nn.Module):
    def __init__(self, ch):
        super().__init__()
        widths = [3, ch, 2 * ch, 4 * ch]
        self.stages = nn.ModuleList([nn.ModuleList([nn.Conv2d(widths[i], widths[i + 1], 3,
                                                              padding=1),
                                                    nn.Conv2d(widths[i + 1], widths[i + 1], 3,
                                                              padding=1)])
                                     for i in range(3)])

    def forward(self, x):
        """(style features: each stage's first ReLU, content features: stage 2's second)."""
        style, content = [], None
        for i, (first, second) in enumerate(self.stages):
            if i:
                x = F.avg_pool2d(x, 2)
            x = F.relu(first(x))
            style.append(x)
            x = F.relu(second(x))
            if i == 1:
                content = x
        return style, content


def _style(c):
    rng = np.random.default_rng(179)
    size, b = c["size"], c["batch"]
    content_img = imp.Tensor(_scenes(rng, b, size))
    yy, xx = np.mgrid[0:size, 0:size] / size
    stripes = np.sin(2 * np.pi * (9 * xx + 4 * yy))[None] * np.array([0.4, 0.1, -0.3])[:, None,
                                                                                       None]
    checks = 0.2 * np.sign(np.sin(28 * xx) * np.sin(28 * yy))
    style_img = imp.Tensor(np.clip(0.5 + stripes + checks, 0, 1)[None].repeat(b, 0)
                           .astype(np.float32))
    net = StyleFeatures(c["ch"])
    style_feats, _ = net(style_img)
    style_grams = [_gram(f) for f in style_feats]
    content_target = net(content_img)[1]
    image = nn.Parameter(content_img + 0.1 * imp.random.normal(size=content_img.shape))
    opt = optim.Adam([image], 0.02)

    def loss_of():
        feats, content = net(image)
        style_loss = 0.0
        for f, g in zip(feats, style_grams):
            style_loss = style_loss + F.mse_loss(_gram(f), g)
        return (F.mse_loss(content, content_target) + 1e3 * style_loss
                + 0.1 * _total_variation(image))
    step = stepper([image], opt, loss_of)

    def run():
        loss = step()
        image[...] = F.clip(image, 0.0, 1.0)
        return loss
    return run


# ---------------------------------------------------------------------------------------
# 7. A BiLSTM-CRF tagger (Huang et al.; Lample et al.) for made-up named entities: word
#    embeddings, a bidirectional LSTM over padded sentences, per-tag emission scores, and a
#    linear-chain CRF (transition, start and end scores) trained by its negative
#    log-likelihood: the forward algorithm's logsumexp over the previous tag at every word
#    (its state held still over the padding) less the gold path's score, gathered from the
#    emissions by one-hot products and from the transitions by an embedding of the flat
#    (previous, next) index. BIO tags of two types, whose ambiguous names only the trigger
#    word before them tells apart; Adam.
TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
NUM_TAGS = len(TAGS)


class BiLSTMCRF(nn.Module):
    def __init__(self, vocab, dim, hidden, tags=NUM_TAGS):
        super().__init__()
        self.tags = tags
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = BiLSTM(dim, hidden)
        self.emit = nn.Linear(2 * hidden, tags)
        self.transitions = nn.Parameter(np.zeros((tags, tags), np.float32))
        self.start = nn.Parameter(np.zeros((tags,), np.float32))
        self.end = nn.Parameter(np.zeros((tags,), np.float32))

    def log_partition(self, emissions, mask):
        """log Z per sentence (b,), by the forward algorithm over (b, t, tags) emissions."""
        t = emissions.shape[1]
        emit = [F.squeeze(e, 1) for e in F.split(emissions, t, axis=1)]
        keep = F.split(mask, t, axis=1)
        alpha = self.start + emit[0]
        for s in range(1, t):
            scores = F.expand_dims(alpha, 2) + self.transitions          # (b, prev, next)
            following = F.logsumexp(scores, axis=1) + emit[s]
            alpha = alpha + keep[s] * (following - alpha)
        return F.logsumexp(alpha + self.end, axis=1)

    def gold_score(self, emissions, tags, last, mask):
        """The score of the given tag paths (b,): tags (b, t), last (b,) their final tags."""
        n = self.tags
        emitted = F.sum(F.sum(emissions * F.one_hot(tags, n), axis=2) * mask, axis=1)
        pairs = tags[:, :-1] * n + tags[:, 1:]
        moved = F.squeeze(F.embedding(pairs, F.reshape(self.transitions, (n * n, 1))), 2)
        return (emitted + F.sum(moved * mask[:, 1:], axis=1)
                + F.sum(self.start * F.one_hot(tags[:, 0], n), axis=1)
                + F.sum(self.end * F.one_hot(last, n), axis=1))

    def forward(self, words, tags, last, mask):
        emissions = self.emit(self.lstm(self.embed(words), mask))
        return F.mean(self.log_partition(emissions, mask)
                      - self.gold_score(emissions, tags, last, mask))


def _tagging_task(rng, n, length, vocab):
    """Tensors (words, tags, last tags, mask): word 0 pads, 1 and 2 are the triggers of a
    person and a place ("mr", "in"); names are drawn from one ambiguous list (1-3 words),
    the tag after the trigger's type; the rest filler words."""
    names = np.arange(3, 3 + vocab // 4)
    filler = np.arange(3 + vocab // 4, vocab)
    words = np.zeros((n, length), np.int64)
    tags = np.zeros((n, length), np.int64)
    lengths = rng.integers(length // 2, length + 1, n)
    for i in range(n):
        j = 0
        while j < lengths[i]:
            if rng.random() < 0.25 and j + 2 < lengths[i]:
                kind = rng.integers(0, 2)
                span = min(rng.integers(1, 4), lengths[i] - j - 1)
                words[i, j] = 1 + kind
                words[i, j + 1:j + 1 + span] = rng.choice(names, span)
                tags[i, j + 1] = 1 + 2 * kind
                tags[i, j + 2:j + 1 + span] = 2 + 2 * kind
                j += 1 + span
            else:
                words[i, j] = rng.choice(filler)
                j += 1
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.float32)
    last = tags[np.arange(n), lengths - 1]
    return tuple(imp.Tensor(a) for a in (words.astype(np.int32), tags.astype(np.int32),
                                         last.astype(np.int32), mask))


def _crf(c):
    rng = np.random.default_rng(181)
    batches = [_tagging_task(rng, c["batch"], c["length"], c["vocab"]) for _ in range(4)]
    model = BiLSTMCRF(c["vocab"], c["dim"], c["hidden"])
    next_batch = _cycle(batches)
    return stepper(model.parameters(), optim.Adam(model.parameters(), 5e-3),
                   lambda: model(*next_batch()))


# ---------------------------------------------------------------------------------------
# 8. A2C (the synchronous advantage actor-critic of Mnih et al.) on `envs` games of Catch
#    (tenth_models'): a shared conv trunk with policy and value heads; each step a rollout
#    of `nsteps` moves inside the recording, each move's action sampled by Gumbel-max from
#    the policy and read back to advance the games; n-step returns (bootstrapped from the
#    last state's value, read back, cut at each game's end), advantages, the policy
#    gradient loss, half the value loss, an entropy bonus; gradients clipped to a norm of
#    0.5, RMSprop (hand-written: optim has none). The games' reward is shaped: -0.1 a move
#    for each column between the ball and the paddle, +-1 at the end as in Catch. The step
#    returns the critic's loss, the one that falls as the agent learns (the total's policy
#    term follows the advantages' sign, its value is no measure of progress).
class ActorCritic(nn.Module):
    def __init__(self, rows, cols, ch, hidden):
        super().__init__()
        flat = 2 * ch * ((rows + 1) // 2) * ((cols + 1) // 2)
        self.trunk = nn.Sequential(nn.Conv2d(2, ch, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1), nn.ReLU(),
                                   nn.Flatten(), nn.Linear(flat, hidden), nn.ReLU())
        self.policy, self.value = nn.Linear(hidden, 3), nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.policy(h), F.squeeze(self.value(h), 1)


def _a2c(c):
    rng = np.random.default_rng(191)
    env = Catch(rng, c["envs"], c["rows"], c["cols"])
    model = ActorCritic(c["rows"], c["cols"], c["ch"], c["hidden"])
    params = model.parameters()
    gm, opt = GradManager().attach(params), RMSprop(params, 7e-4)
    gamma, nsteps = 0.9, c["nsteps"]

    def step():
        with gm:
            log_probs, values, entropies, rewards, dones = [], [], [], [], []
            for _ in range(nsteps):
                logits, value = model(imp.Tensor(env.frames))
                action = F.argmax(logits + _gumbel(logits.shape), axis=1)
                moves = action.numpy()
                reward = -0.1 * np.abs(env.ball[:, 1] - np.clip(env.paddle + moves - 1, 0,
                                                                  env.cols - 1))
                _, caught, done = env.step(moves)
                reward = (reward + caught).astype(np.float32)
                log_p = F.log_softmax(logits, axis=1)
                log_probs.append(F.sum(log_p * F.one_hot(action, 3), axis=1))
                entropies.append(-F.sum(F.exp(log_p) * log_p, axis=1))
                values.append(value)
                rewards.append(reward)
                dones.append(done)
            ret = model(imp.Tensor(env.frames))[1].numpy()
            returns = []
            for reward, done in zip(reversed(rewards), reversed(dones)):
                ret = reward + gamma * ret * (1.0 - done)
                returns.append(ret)
            returns = imp.Tensor(np.stack(returns[::-1]).astype(np.float32))
            advantage = returns - F.stack(values)
            critic = F.mean(advantage * advantage)
            loss = (-F.mean(F.stack(log_probs) * advantage.detach()) + 0.5 * critic
                    - 0.01 * F.mean(F.stack(entropies)))
            gm.backward(loss)
        optim.clip_grad_norm(params, 0.5)
        opt.step()
        opt.clear_grad()
        return critic
    return step


# ---------------------------------------------------------------------------------------
# 9. FiLM (Perez et al.) on a made-up CLEVR: scenes of coloured shapes on a grid, questions
#    from three templates (how many <colour> objects, how many <shape>s, is there a
#    <colour> <shape>), answered by a count or yes/no. A GRU encodes the question; a linear
#    layer of its state gives each residual block's FiLM scale and shift; the image through
#    a conv stem, then `blocks` residual blocks (coordinate maps concatenated, a 1x1 conv,
#    ReLU, a 3x3 conv, batch norm without affine parameters, FiLM, ReLU, the skip), a
#    classifier of a 1x1 conv, a global max pool and an MLP; Adam.
COLOURS = np.array([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.3, 0.3, 1.0]], np.float32)
#   words: 0 pad, 1 how, 2 many, 3 objects, 4 is, 5 there, 6 a, 7-9 colours, 10-12 shapes
ANSWERS = 12                        # counts 0-9, 10 no, 11 yes


def _shape_mask(kind, cell):
    yy, xx = np.mgrid[0:cell, 0:cell] - (cell - 1) / 2
    r = cell * 0.4
    if kind == 0:
        return (np.abs(yy) < r) & (np.abs(xx) < r)                  # square
    if kind == 1:
        return yy ** 2 + xx ** 2 < r * r                              # disk
    return (np.abs(yy) < r / 3) | (np.abs(xx) < r / 3)                # cross


def _clevr(rng, n, grid, cell):
    """Tensors (images (n, 3, grid cell, grid cell), questions (n, 5), answers (n,))."""
    images = np.zeros((n, 3, grid * cell, grid * cell), np.float32)
    questions = np.zeros((n, 5), np.int32)
    answers = np.zeros(n, np.int32)
    masks = [_shape_mask(k, cell) for k in range(3)]
    for i in range(n):
        occupied = rng.random((grid, grid)) < min(0.5, 8.0 / grid ** 2)
        colour = rng.integers(0, 3, (grid, grid))
        shape = rng.integers(0, 3, (grid, grid))
        for y, x in zip(*np.nonzero(occupied)):
            patch = images[i, :, y * cell:(y + 1) * cell, x * cell:(x + 1) * cell]
            patch[:, masks[shape[y, x]]] = COLOURS[colour[y, x]][:, None]
        kind, col, shp = rng.integers(0, 3), rng.integers(0, 3), rng.integers(0, 3)
        if kind == 0:
            questions[i] = [1, 2, 7 + col, 3, 0]
            answers[i] = min(9, (occupied & (colour == col)).sum())
        elif kind == 1:
            questions[i] = [0, 1, 2, 10 + shp, 0]
            answers[i] = min(9, (occupied & (shape == shp)).sum())
        else:
            questions[i] = [4, 5, 6, 7 + col, 10 + shp]
            answers[i] = 10 + (occupied & (colour == col) & (shape == shp)).any()
    images += 0.05 * rng.standard_normal(images.shape).astype(np.float32)
    return imp.Tensor(images), imp.Tensor(questions), imp.Tensor(answers)


def _coords(b, h, w):
    """(b, 2, h, w) coordinate maps in [-1, 1], as FiLM concatenates them."""
    yy, xx = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    return imp.Tensor(np.broadcast_to(np.stack([yy, xx])[None], (b, 2, h, w))
                      .astype(np.float32))


class FiLMBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch + 2, ch, 1)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1)
        self.bn = nn.BatchNorm2d(ch, affine=False)

    def forward(self, x, coords, gamma, beta):
        h = F.relu(self.conv1(F.concat([x, coords], axis=1)))
        h = self.bn(self.conv2(h))
        h = F.relu(F.expand_dims(F.expand_dims(gamma, 2), 3) * h
                   + F.expand_dims(F.expand_dims(beta, 2), 3))
        return x + h


class FiLMNet(nn.Module):
    def __init__(self, ch, embed, hidden, blocks, vocab=13):
        super().__init__()
        self.ch = ch
        self.embed = nn.Embedding(vocab, embed)
        self.question = GRU(embed, hidden)
        self.film = nn.Linear(hidden, 2 * ch * blocks)
        self.stem = nn.Sequential(conv_bn_relu(5, ch), nn.MaxPool2d(2), conv_bn_relu(ch, ch))
        self.blocks = nn.ModuleList([FiLMBlock(ch) for _ in range(blocks)])
        self.head = nn.Conv2d(ch + 2, 4 * ch, 1)
        self.classify = mlp([4 * ch, 4 * ch, ANSWERS])

    def forward(self, images, questions):
        b, _, s, _ = images.shape
        q = self.question(self.embed(questions))
        film = F.split(self.film(q), 2 * len(self.blocks), axis=1)
        x = self.stem(F.concat([images, _coords(b, s, s)], axis=1))
        coords = _coords(b, x.shape[2], x.shape[3])
        for i, block in enumerate(self.blocks):
            x = block(x, coords, 1.0 + film[2 * i], film[2 * i + 1])
        x = F.relu(self.head(F.concat([x, coords], axis=1)))
        return self.classify(F.max(x, axis=(2, 3)))


def _film(c):
    rng = np.random.default_rng(193)
    batches = [_clevr(rng, c["batch"], c["grid"], c["cell"]) for _ in range(4)]
    model = FiLMNet(c["ch"], c["embed"], c["hidden"], c["blocks"])
    next_batch = _cycle(batches)

    def loss_of():
        images, questions, answers = next_batch()
        return F.cross_entropy(model(images, questions), answers)
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 10. Reptile (Nichol et al.) on sine-wave regression (amplitude in [0.1, 5], phase in
#     [0, pi], x in [-5, 5]), k-shot: each meta-step the `tasks` training tasks in turn; for
#     each, a fast copy of the meta-weights (load_state_dict) trained by `inner` full-batch
#     SGD steps on the task's k points, its own GradManager; then the meta-weights moved in
#     place, without gradients, by epsilon (linearly annealed) times the mean of (fast -
#     meta). The step returns the adapted models' mean loss on k held-out points a task.
def _sine_task(rng, points):
    amp, phase = rng.uniform(0.1, 5.0), rng.uniform(0, np.pi)
    x = rng.uniform(-5, 5, (points, 1))
    return x.astype(np.float32), (amp * np.sin(x + phase)).astype(np.float32)


def _reptile(c):
    rng = np.random.default_rng(197)
    sizes = [1] + [c["width"]] * c["layers"] + [1]
    meta, fast = mlp(sizes, nn.Tanh), mlp(sizes, nn.Tanh)
    meta_params, fast_params = meta.parameters(), fast.parameters()
    shots = c["points"]
    tasks = [tuple(imp.Tensor(a) for a in _sine_task(rng, 2 * shots)) for _ in range(c["tasks"])]
    task = {}
    inner = stepper(fast_params, optim.SGD(fast_params, c["lr"]),
                    lambda: F.mse_loss(fast(task["x"][:shots]), task["y"][:shots]))
    state = {"n": 0}

    def step():
        eps = 0.5 * max(0.05, 1.0 - state["n"] / 1000)
        state["n"] += 1
        moves = [F.zeros_like(p) for p in meta_params]
        held_out = 0.0
        for task["x"], task["y"] in tasks:
            fast.load_state_dict(meta.state_dict())
            for _ in range(c["inner"]):
                inner()
            held_out = held_out + F.mse_loss(fast(task["x"][shots:]), task["y"][shots:])
            moves = [m + (q - p) for m, p, q in zip(moves, meta_params, fast_params)]
        for p, m in zip(meta_params, moves):
            p[...] = p + (eps / len(tasks)) * m
        return held_out / len(tasks)
    return step


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "espcn": dict(ch=32, scale=3, size=40, batch=16),
    "gumbelvae": dict(size=28, hidden=256, latents=30, cats=10, batch=512),
    "mdn": dict(hidden=256, layers=3, mixtures=20, batch=4096),
    "protonet": dict(ch=32, size=28, classes=100, way=12, shot=5, query=5),
    "bayesbackprop": dict(dim=256, hidden=600, samples=2, batch=128),
    "styletransfer": dict(ch=24, size=192, batch=1),
    "bilstmcrf": dict(vocab=2000, dim=64, hidden=64, length=32, batch=48),
    "a2c": dict(rows=10, cols=10, ch=16, hidden=128, envs=96, nsteps=9),
    "film": dict(ch=32, embed=32, hidden=64, blocks=4, grid=4, cell=8, batch=32),
    "reptile": dict(width=128, layers=2, tasks=8, inner=16, points=10, lr=0.02),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "espcn": dict(ch=4, scale=2, size=16, batch=2),
    "gumbelvae": dict(size=8, hidden=16, latents=4, cats=5, batch=16),
    "mdn": dict(hidden=32, layers=2, mixtures=5, batch=256),
    "protonet": dict(ch=4, size=16, classes=10, way=3, shot=2, query=2),
    "bayesbackprop": dict(dim=32, hidden=48, samples=2, batch=8),
    "styletransfer": dict(ch=4, size=24, batch=1),
    "bilstmcrf": dict(vocab=40, dim=8, hidden=8, length=10, batch=8),
    "a2c": dict(rows=6, cols=5, ch=8, hidden=16, envs=4, nsteps=5),
    "film": dict(ch=4, embed=6, hidden=8, blocks=2, grid=3, cell=4, batch=4),
    "reptile": dict(width=48, layers=2, tasks=2, inner=3, points=10, lr=0.02),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "espcn": _espcn,
    "gumbelvae": _gumbelvae,
    "mdn": _mdn,
    "protonet": _protonet,
    "bayesbackprop": _bayes,
    "styletransfer": _style,
    "bilstmcrf": _crf,
    "a2c": _a2c,
    "film": _film,
    "reptile": _reptile,
}


MODEL_SET = ModelSet(__name__, "tests/eleventh_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
