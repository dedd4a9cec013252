"""Ten more models for the memory manager, ordinary ones this time, as a user would write
them from a PyTorch tutorial or the paper, unlike the zoo and tests/{unseen,fresh,novel,
heldout,sixth,seventh,eighth}_models.py; written in session 45 by a helper that had not
read the memory manager: a two-layer character LSTM language model trained by truncated
backpropagation through time (its states carried, detached, from one step to the next,
gradients clipped), an AlexNet-like CNN with batch norm and dropout (random flips, SGD with
weight decay), word2vec's skip-gram with negative sampling (negatives drawn each step from
a unigram^0.75 table), a ResNet-18 at CIFAR resolution (label smoothing, Nesterov SGD), a
BERT-like masked language model (post-norm, padding masks, 80/10/10 masking drawn each
step, a decoder tied to the embedding), a VAE-GAN (an encoder, a decoder and a
discriminator, its features the reconstruction loss, two optimizers), a wide-and-deep CTR
model (hashed crosses in the wide part, field embeddings in the deep one), a temporal
convolutional network on the adding problem (weight-normed dilated causal convs),
GraphSAGE with mean aggregation over neighbours sampled each step, and a triplet network
with batch-hard mining.

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/eighth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.models import cluster_task, global_average, upsample_nearest
from model_sets import NEG, ModelSet, bce_with_logits, l2_normalize, stepper
from model_sets import attention as _attention

# ---------------------------------------------------------------------------------------
# helpers: what a PyTorch user would have taken from torch.nn (and model_sets'
# l2_normalize, bce_with_logits)

def _logsigmoid(x):
    """torch.nn.functional.logsigmoid."""
    return -F.softplus(-x)


def _smoothed_cross_entropy(logits, labels, eps):
    """torch.nn.functional.cross_entropy(..., label_smoothing=eps)."""
    uniform = -F.mean(F.log_softmax(logits, axis=-1), axis=-1)
    return (1.0 - eps) * F.cross_entropy(logits, labels) + eps * F.mean(uniform)


class BatchNorm1d(nn.Module):
    """torch.nn.BatchNorm1d over (b, features): BatchNorm2d on a (b, features, 1, 1) view."""

    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)

    def forward(self, x):
        return F.reshape(self.bn(F.reshape(x, x.shape + (1, 1))), x.shape)


class CausalConv1d(nn.Module):
    """torch.nn.Conv1d (padded on the left only, so that no output sees the future) with
    torch.nn.utils.weight_norm: the weight is g v / |v| per output channel, recomputed at
    every call. Over (b, c, t), as a conv2d over (b, c, 1, t)."""

    def __init__(self, cin, cout, k, dilation):
        super().__init__()
        self.k, self.dilation = k, dilation
        bound = 1.0 / math.sqrt(cin * k)
        self.v = nn.Parameter(imp.random.uniform(-bound, bound, (cout, cin, 1, k)))
        self.g = nn.Parameter(np.sqrt((self.v.numpy() ** 2).sum(axis=(1, 2, 3))))
        self.bias = nn.Parameter(imp.random.uniform(-bound, bound, (cout,)))

    def forward(self, x):
        norm = F.rsqrt(F.sum(self.v * self.v, axis=(1, 2, 3), keepdims=True))
        w = self.v * norm * F.reshape(self.g, (-1, 1, 1, 1))
        x = F.pad(x, ((self.k - 1) * self.dilation, 0))
        return F.conv2d(x, w, self.bias, dilation=(1, self.dilation))


# ---------------------------------------------------------------------------------------
# 1. character LSTM language model (Karpathy's char-rnn, PyTorch's word_language_model):
#    an embedding, two LSTM layers (the input projection of a whole chunk at once, then
#    the recurrence step by step, as nn.LSTM does), dropout between them, a linear decoder.
#    The corpus (words of a small made-up language) is cut into `batch` parallel streams;
#    step i trains on chunk i of `seq` characters, the states carried over from chunk i - 1
#    detached (truncated BPTT), reset where the corpus starts again; gradients clipped.
class CharLSTM(nn.Module):
    def __init__(self, vocab, embed, hidden, layers, dropout):
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(vocab, embed)
        self.wx = nn.ModuleList([nn.Linear(embed if i == 0 else hidden, 4 * hidden)
                                 for i in range(layers)])
        self.wh = nn.ModuleList([nn.Linear(hidden, 4 * hidden, bias=False)
                                 for _ in range(layers)])
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens, state):
        b, t = tokens.shape
        x = self.drop(self.embed(tokens))
        carried = []
        for wx, wh, (h, c) in zip(self.wx, self.wh, state):
            outs = []
            for gx in F.split(wx(x), t, axis=1):
                i, f, g, o = F.split(F.squeeze(gx, 1) + wh(h), 4, axis=1)
                c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
                h = F.sigmoid(o) * F.tanh(c)
                outs.append(h)
            carried.append((h, c))
            x = self.drop(F.stack(outs, axis=1))
        return self.head(x), carried


def _made_up_text(rng, chars):
    """A text of words from a small made-up language: syllables over `chars` letters, a
    Zipfian choice of words, sentences ended by a full stop."""
    letters = np.arange(2, 2 + chars - 2)
    syllables = [rng.choice(letters, rng.integers(2, 4)) for _ in range(60)]
    words = [np.concatenate([syllables[j] for j in rng.integers(0, 60, rng.integers(1, 4))])
             for _ in range(400)]
    weights = 1.0 / np.arange(1, 401)
    picks = rng.choice(400, 60000, p=weights / weights.sum())
    out = []
    for n, w in enumerate(picks):
        out.append(words[w])
        out.append(np.array([1 if n % 9 == 8 else 0]))          # 0: space, 1: full stop
    return np.concatenate(out)


def _charlstm(c):
    rng = np.random.default_rng(61)
    b, t, v, hidden, layers = c["batch"], c["seq"], c["vocab"], c["hidden"], c["layers"]
    text = _made_up_text(rng, v)
    chunks = min(8, (len(text) // b - 1) // t)
    streams = text[:b * (chunks * t + 1)].reshape(b, chunks * t + 1)
    data = [(imp.Tensor(streams[:, k * t:(k + 1) * t].astype(np.int32)),
             imp.Tensor(streams[:, k * t + 1:(k + 1) * t + 1].astype(np.int32)))
            for k in range(chunks)]
    model = CharLSTM(v, c["embed"], hidden, layers, 0.2)
    params = model.parameters()
    gm, opt = GradManager().attach(params), optim.Adam(params, 2e-3)
    zeros = [(F.zeros((b, hidden)), F.zeros((b, hidden))) for _ in range(layers)]
    state = {"k": 0, "hc": zeros}

    def step():
        k = state["k"]
        tokens, targets = data[k]
        with gm:
            logits, carried = model(tokens, zeros if k == 0 else state["hc"])
            loss = F.cross_entropy(F.reshape(logits, (b * t, v)), F.reshape(targets, (b * t,)))
            gm.backward(loss)
        optim.clip_grad_norm(params, 1.0)
        opt.step()
        opt.clear_grad()
        state["hc"] = [(h.detach(), c.detach()) for h, c in carried]
        state["k"] = (k + 1) % chunks
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 2. AlexNet-like CNN for 32 x 32 images (the CIFAR variant, batch norm after each conv):
#    five convs (5x5, 5x5, then three 3x3) with three max pools, then a classifier of two
#    dropout + linear + ReLU layers; each step a random horizontal flip per image; SGD with
#    momentum and weight decay on the weights.
class AlexNet(nn.Module):
    def __init__(self, ch, fc, size):
        super().__init__()

        def conv(cin, cout, k):
            return [nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout),
                    nn.ReLU()]
        self.features = nn.Sequential(*conv(3, ch, 5), nn.MaxPool2d(2),
                                      *conv(ch, 2 * ch, 5), nn.MaxPool2d(2),
                                      *conv(2 * ch, 4 * ch, 3), *conv(4 * ch, 4 * ch, 3),
                                      *conv(4 * ch, 2 * ch, 3), nn.MaxPool2d(2))
        flat = 2 * ch * (size // 8) ** 2
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.5), nn.Linear(flat, fc),
                                        nn.ReLU(), nn.Dropout(0.5), nn.Linear(fc, fc),
                                        nn.ReLU(), nn.Linear(fc, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def _random_flip(x):
    """A horizontal flip of each image of (b, c, h, w) with probability 1/2."""
    flip = imp.random.uniform(size=(x.shape[0], 1, 1, 1)) < 0.5
    return F.where(flip, x[..., ::-1], x)


def _alexnet(c):
    b, s = c["batch"], c["size"]
    x, labels = cluster_task(b, (3, s, s))
    model = AlexNet(c["ch"], c["fc"], s)
    params = model.parameters()
    opt = optim.SGD(params, 0.01, momentum=0.9, weight_decay=5e-4)
    return stepper(params, opt, lambda: F.cross_entropy(model(_random_flip(x)), labels))


# ---------------------------------------------------------------------------------------
# 3. word2vec skip-gram with negative sampling (Mikolov et al.): an input and an output
#    embedding table; each (centre, context) pair scores log sigma(u_c . v_o) plus
#    log sigma(-u_c . v_n) over `negatives` words drawn, each step, from the unigram^0.75
#    distribution (the C tool's table: a large array of word ids, indexed at random).
#    The pairs come from a Zipfian corpus of topics, a window of 2, in batches that cycle;
#    the loss is summed over the pairs (the C tool's per-pair updates), plain SGD.
def _skipgram(c):
    rng = np.random.default_rng(67)
    vocab, dim, b, k = c["vocab"], c["dim"], c["batch"], c["negatives"]
    zipf = 1.0 / np.arange(1, vocab + 1) ** 1.05
    topics = [rng.permutation(vocab)[:vocab // 8] for _ in range(16)]
    corpus = []
    for _ in range(max(40, 6 * b // 200)):
        topic = topics[rng.integers(0, 16)]
        generic = rng.choice(vocab, 200, p=zipf / zipf.sum())
        local = topic[rng.integers(0, len(topic), 200)]
        corpus.append(np.where(rng.random(200) < 0.5, local, generic))
    corpus = np.concatenate(corpus)
    offsets = rng.choice([-2, -1, 1, 2], len(corpus))
    at = np.clip(np.arange(len(corpus)) + offsets, 0, len(corpus) - 1)
    pairs = np.stack([corpus, corpus[at]], axis=1).astype(np.int32)
    rng.shuffle(pairs)
    batches = [(imp.Tensor(pairs[i:i + b, 0].copy()), imp.Tensor(pairs[i:i + b, 1].copy()))
               for i in range(0, len(pairs) - b + 1, b)][:8]
    counts = np.bincount(corpus, minlength=vocab).astype(np.float64) ** 0.75
    table = np.repeat(np.arange(vocab), np.round(counts / counts.sum() * 100000).astype(int))
    table = imp.Tensor(table.astype(np.int32))
    w_in = nn.Parameter(imp.random.uniform(-0.5 / dim, 0.5 / dim, (vocab, dim)))
    w_out = nn.Parameter(np.zeros((vocab, dim), np.float32))
    opt = optim.SGD([w_in, w_out], c["lr"])
    gm = GradManager().attach([w_in, w_out])
    state = {"i": 0}

    def step():
        centre, context = batches[state["i"]]
        state["i"] = (state["i"] + 1) % len(batches)
        negatives = table[imp.random.randint(0, table.shape[0], size=(b, k))]
        with gm:
            u = F.embedding(centre, w_in)                                   # (b, dim)
            pos = F.sum(u * F.embedding(context, w_out), axis=1)
            neg = F.squeeze(F.matmul(F.embedding(negatives, w_out),
                                     F.expand_dims(u, 2)), 2)             # (b, k)
            loss = -F.sum(_logsigmoid(pos) + F.sum(_logsigmoid(-neg), axis=1))
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 4. ResNet-18 for CIFAR (He et al.'s basic blocks, [2, 2, 2, 2], widths w to 8 w, a 3x3
#    stem and no max pool, projection shortcuts by strided 1x1 convs), random flips, label
#    smoothing 0.1, Nesterov SGD with weight decay.
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = (None if stride == 1 and cin == cout else
                      nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                    nn.BatchNorm2d(cout)))

    def forward(self, x):
        h = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(h + (x if self.short is None else self.short(x)))


class ResNet18(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, w, 3, padding=1, bias=False), nn.BatchNorm2d(w),
                                  nn.ReLU())
        blocks, cin = [], w
        for i, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
            blocks += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(8 * w, 10)

    def forward(self, x):
        return self.fc(global_average(self.layers(self.stem(x))))


def _resnet18(c):
    b, s = c["batch"], c["size"]
    x, labels = cluster_task(b, (3, s, s))
    model = ResNet18(c["width"])
    params = model.parameters()
    opt = optim.SGD(params, 0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
    return stepper(params, opt,
                   lambda: _smoothed_cross_entropy(model(_random_flip(x)), labels, 0.1))


# ---------------------------------------------------------------------------------------
# 5. BERT-like masked language model: token and position embeddings, embedding LayerNorm
#    and dropout, `layers` post-norm encoder layers (attention, GELU feed-forward, dropout)
#    under a padding mask (each sequence has a length of its own), then the MLM head (dense,
#    GELU, LayerNorm, the decoder tied to the token embedding plus a bias). Each step 15% of
#    the real tokens are chosen, of them 80% become [MASK], 10% a random token, 10% stay;
#    cross entropy on the chosen ones only. AdamW.
PAD, MASK = 0, 1


class BertLayer(nn.Module):
    def __init__(self, dim, heads, drop):
        super().__init__()
        self.heads = heads
        self.qkv, self.o = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.n1, self.n2 = nn.LayerNorm(dim, eps=1e-12), nn.LayerNorm(dim, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.drop = nn.Dropout(drop)

    def forward(self, x, bias):
        q, k, v = F.split(self.qkv(x), 3, axis=-1)
        x = self.n1(x + self.drop(self.o(_attention(q, k, v, self.heads, bias))))
        return self.n2(x + self.drop(self.ff(x)))


class BertMLM(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.tok.weight = nn.Parameter(imp.random.normal(0, 0.02, (vocab, dim)))   # BERT's init
        self.pos = nn.Parameter(imp.random.normal(0, 0.02, (1, seq, dim)))
        self.norm, self.drop = nn.LayerNorm(dim, eps=1e-12), nn.Dropout(0.1)
        self.layers = nn.ModuleList([BertLayer(dim, heads, 0.1) for _ in range(layers)])
        self.transform = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.LayerNorm(dim))
        self.out_bias = nn.Parameter(np.zeros(vocab, np.float32))

    def forward(self, tokens, pad):
        b, s = tokens.shape
        bias = F.reshape(pad * NEG, (b, 1, 1, s))               # no attention to padding
        h = self.drop(self.norm(self.tok(tokens) + self.pos))
        for layer in self.layers:
            h = layer(h, bias)
        return F.matmul(self.transform(h), self.tok.weight, transpose_b=True) + self.out_bias


def _bertmlm(c):
    rng = np.random.default_rng(71)
    b, s, v = c["batch"], c["seq"], c["vocab"]
    # sentences from a bigram chain over the real tokens (2 .. v - 1), lengths s/2 .. s
    nxt = rng.integers(2, v, (v, 4))
    tokens = np.zeros((b, s), np.int32)
    for i in range(b):
        n, t = rng.integers(s // 2, s + 1), rng.integers(2, v)
        for j in range(n):
            tokens[i, j] = t
            t = nxt[t, rng.integers(0, 4)]
    real = tokens != PAD
    tokens_t = imp.Tensor(tokens)
    real_t = imp.Tensor(real.astype(np.float32))
    pad = imp.Tensor((~real).astype(np.float32))
    model = BertMLM(v, c["dim"], c["heads"], c["layers"], s)
    opt = optim.AdamW(model.parameters(), 5e-4, weight_decay=0.01)

    def loss_of():
        u = imp.random.uniform(size=(b, s))
        chosen = (u < 0.15).astype("float32") * real_t
        kind = imp.random.uniform(size=(b, s))
        masked = F.where(kind < 0.8, F.full((b, s), MASK, dtype="int32"),
                         F.where(kind < 0.9, imp.random.randint(2, v, size=(b, s)), tokens_t))
        inputs = F.where(chosen > 0.5, masked, tokens_t)
        logits = model(inputs, pad)
        per_token = F.cross_entropy(logits, tokens_t, reduction="none")
        return F.sum(per_token * chosen) / (F.sum(chosen) + 1.0)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 6. VAE-GAN (Larsen et al.): a conv encoder to a Gaussian posterior, a decoder of nearest
#    upsamplings and convs, a conv discriminator whose third layer's features are the
#    reconstruction loss. Each step the discriminator learns real against reconstructed
#    and prior samples (the fakes detached), then encoder and decoder learn KL + feature
#    reconstruction + fooling the discriminator (whose weights they do not update).
class VAEGAN(nn.Module):
    def __init__(self, ch, latent, size):
        super().__init__()
        self.ch, self.s8 = ch, size // 8
        flat = 4 * ch * self.s8 ** 2

        def down(cin, cout):
            return [nn.Conv2d(cin, cout, 5, stride=2, padding=2, bias=False),
                    nn.BatchNorm2d(cout), nn.ReLU()]

        def up(cin, cout):
            return [nn.Conv2d(cin, cout, 5, padding=2, bias=False), nn.BatchNorm2d(cout),
                    nn.ReLU()]
        self.enc = nn.Sequential(*down(3, ch), *down(ch, 2 * ch), *down(2 * ch, 4 * ch),
                                 nn.Flatten())
        self.mu, self.logvar = nn.Linear(flat, latent), nn.Linear(flat, latent)
        self.dec_in = nn.Linear(latent, flat)
        self.dec_bn = BatchNorm1d(flat)
        self.dec = nn.ModuleList([nn.Sequential(*up(4 * ch, 2 * ch)),
                                  nn.Sequential(*up(2 * ch, ch)),
                                  nn.Sequential(*up(ch, ch // 2))])
        self.dec_out = nn.Conv2d(ch // 2, 3, 5, padding=2)
        self.d_feat = nn.Sequential(nn.Conv2d(3, ch // 2, 5, padding=2), nn.ReLU(),
                                    *down(ch // 2, ch), *down(ch, 2 * ch))
        self.d_rest = nn.Sequential(*down(2 * ch, 4 * ch), nn.Flatten(), nn.Linear(flat, 128),
                                    BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 1))

    def decode(self, z):
        h = F.relu(self.dec_bn(self.dec_in(z)))
        h = F.reshape(h, (z.shape[0], 4 * self.ch, self.s8, self.s8))
        for block in self.dec:
            h = block(upsample_nearest(h))
        return F.tanh(self.dec_out(h))

    def discriminate(self, x):
        feat = self.d_feat(x)
        return feat, self.d_rest(feat)

    def generator_parameters(self):
        return [p for m in (self.enc, self.mu, self.logvar, self.dec_in, self.dec_bn,
                            self.dec, self.dec_out) for p in m.parameters()]

    def discriminator_parameters(self):
        return self.d_feat.parameters() + self.d_rest.parameters()


def _vaegan(c):
    b, s, latent = c["batch"], c["size"], c["latent"]
    x, _ = cluster_task(b, (3, s, s))
    x = F.tanh(x)
    model = VAEGAN(c["ch"], latent, s)
    gen_p, disc_p = model.generator_parameters(), model.discriminator_parameters()
    opt_g = optim.Adam(gen_p, 3e-4, betas=(0.5, 0.999))
    opt_d = optim.Adam(disc_p, 3e-4, betas=(0.5, 0.999))
    gm_g, gm_d = GradManager().attach(gen_p), GradManager().attach(disc_p)
    ones = imp.Tensor(np.ones((b, 1), np.float32))
    zeros = imp.Tensor(np.zeros((b, 1), np.float32))

    def step():
        with gm_g:
            h = model.enc(x)
            mu, logvar = model.mu(h), model.logvar(h)
            z = mu + F.exp(0.5 * logvar) * imp.random.normal(size=mu.shape)
            recon = model.decode(z)
            prior = model.decode(imp.random.normal(size=mu.shape))
            with gm_d:
                _, d_real = model.discriminate(x)
                _, d_rec = model.discriminate(recon.detach())
                _, d_prior = model.discriminate(prior.detach())
                loss_d = (bce_with_logits(d_real, ones) + bce_with_logits(d_rec, zeros)
                          + bce_with_logits(d_prior, zeros))
                gm_d.backward(loss_d)
            opt_d.step()
            opt_d.clear_grad()
            f_real, _ = model.discriminate(x)
            f_rec, d_rec = model.discriminate(recon)
            _, d_prior = model.discriminate(prior)
            kl = -0.5 * F.mean(F.sum(1.0 + logvar - mu * mu - F.exp(logvar), axis=1))
            feature = F.mse_loss(f_rec, f_real.detach())
            fool = bce_with_logits(d_rec, ones) + bce_with_logits(d_prior, ones)
            loss_g = 0.01 * kl + 10.0 * feature + 0.1 * fool
            gm_g.backward(loss_g)
        opt_g.step()
        opt_g.clear_grad()
        return loss_g
    return step


# ---------------------------------------------------------------------------------------
# 7. wide-and-deep CTR model (Cheng et al.): `fields` categorical fields (ids hashed into
#    `buckets` each) and 13 dense features. Wide: a weight per id and per hashed cross of
#    neighbouring fields (an embedding of width 1, summed). Deep: a 16-wide embedding per
#    field, concatenated with the dense features, an MLP 1024-512-256 with batch norm and
#    ReLU. The logit is their sum, under a binary cross entropy. The click labels come from
#    a hidden logistic model of the ids.
class WideDeep(nn.Module):
    def __init__(self, fields, buckets, crosses, embed, dense, hidden):
        super().__init__()
        self.wide = nn.Embedding(fields * buckets + crosses, 1)
        self.wide.weight = nn.Parameter(np.zeros((fields * buckets + crosses, 1), np.float32))
        self.deep_embed = nn.Embedding(fields * buckets, embed)
        layers, d = [], fields * embed + dense
        for h in hidden:
            layers += [nn.Linear(d, h), BatchNorm1d(h), nn.ReLU()]
            d = h
        self.deep = nn.Sequential(*layers, nn.Linear(d, 1))

    def forward(self, ids, crosses, dense):
        b = ids.shape[0]
        wide = F.sum(F.squeeze(self.wide(F.concat([ids, crosses], axis=1)), 2), axis=1,
                     keepdims=True)
        deep_in = F.concat([F.reshape(self.deep_embed(ids), (b, -1)), dense], axis=1)
        return wide + self.deep(deep_in)


def _widedeep(c):
    rng = np.random.default_rng(73)
    b, fields, buckets = c["batch"], c["fields"], c["buckets"]
    n_cross = fields - 1
    crosses = c["cross_buckets"]
    raw = np.minimum(rng.zipf(1.3, (b, fields)) - 1, buckets - 1)
    ids = raw + np.arange(fields) * buckets                     # one table, offset per field
    cross = ((raw[:, :-1] * 1000003 + raw[:, 1:]) % crosses) + fields * buckets
    dense = rng.standard_normal((b, 13)).astype(np.float32)
    w_id = rng.standard_normal(fields * buckets) * 0.5
    w_cross = rng.standard_normal(crosses) * 0.5
    logit = (w_id[ids].sum(1) + w_cross[cross - fields * buckets].sum(1) / math.sqrt(n_cross)
             + dense[:, 0] - 0.5 * dense[:, 1])
    clicks = (rng.random(b) < 1 / (1 + np.exp(-logit / math.sqrt(fields)))).astype(np.float32)
    ids_t, cross_t = imp.Tensor(ids.astype(np.int32)), imp.Tensor(cross.astype(np.int32))
    dense_t, clicks_t = imp.Tensor(dense), imp.Tensor(clicks[:, None])
    model = WideDeep(fields, buckets, crosses, c["embed"], 13, c["hidden"])
    opt = optim.Adam(model.parameters(), 1e-3)
    return stepper(model.parameters(), opt,
                   lambda: bce_with_logits(model(ids_t, cross_t, dense_t), clicks_t))


# ---------------------------------------------------------------------------------------
# 8. temporal convolutional network (Bai et al.) on the adding problem: a sequence of
#    (value, marker) pairs, two markers set; the target is the sum of the two marked values.
#    `levels` residual blocks, each two weight-normed causal convs of kernel `k` dilated by
#    2^level, ReLU and dropout, a 1x1 conv on the skip where the width changes; a linear
#    layer reads the last time step. Adam, MSE.
class TemporalBlock(nn.Module):
    def __init__(self, cin, cout, k, dilation, drop):
        super().__init__()
        self.c1 = CausalConv1d(cin, cout, k, dilation)
        self.c2 = CausalConv1d(cout, cout, k, dilation)
        self.drop = nn.Dropout(drop)
        self.down = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.drop(F.relu(self.c1(x)))
        h = self.drop(F.relu(self.c2(h)))
        return F.relu(h + (x if self.down is None else self.down(x)))


class TCN(nn.Module):
    def __init__(self, ch, levels, k):
        super().__init__()
        self.blocks = nn.Sequential(*[TemporalBlock(2 if i == 0 else ch, ch, k, 2 ** i, 0.1)
                                      for i in range(levels)])
        self.head = nn.Linear(ch, 1)

    def forward(self, x):                                       # (b, 2, 1, t)
        return self.head(self.blocks(x)[:, :, 0, -1])


def _tcn(c):
    rng = np.random.default_rng(79)
    b, t = c["batch"], c["length"]
    values = rng.random((b, t)).astype(np.float32)
    markers = np.zeros((b, t), np.float32)
    first = rng.integers(0, t // 2, b)
    second = rng.integers(t // 2, t, b)
    markers[np.arange(b), first] = markers[np.arange(b), second] = 1.0
    target = (values * markers).sum(1, keepdims=True)
    x = imp.Tensor(np.stack([values, markers], axis=1)[:, :, None, :])
    target = imp.Tensor(target)
    model = TCN(c["ch"], c["levels"], c["k"])
    opt = optim.Adam(model.parameters(), 2e-3)
    return stepper(model.parameters(), opt, lambda: F.mse_loss(model(x), target))


# ---------------------------------------------------------------------------------------
# 9. GraphSAGE (Hamilton et al.) with the mean aggregator, full batch: a graph of
#    communities (adjacency lists of varying degree, CSR), each step `sample` neighbours
#    drawn per node and layer (an index offset + floor(u deg) into the flat lists), their
#    states gathered and averaged, concatenated with the node's own, a linear layer, ReLU
#    and an L2 normalisation; a classifier on the nodes of the training split.
class SAGELayer(nn.Module):
    def __init__(self, cin, cout, last):
        super().__init__()
        self.lin, self.last = nn.Linear(2 * cin, cout), last

    def forward(self, h, neighbours):
        agg = F.mean(h[neighbours], axis=1)                     # (n, sample, d) -> (n, d)
        out = self.lin(F.concat([h, agg], axis=1))
        return out if self.last else l2_normalize(F.relu(out))


def _sage(c):
    rng = np.random.default_rng(83)
    n, f, groups, sample = c["nodes"], c["features"], 10, c["sample"]
    labels = rng.integers(0, groups, n)
    lists = []
    for i in range(n):
        deg = rng.integers(2, c["degree"] * 2)
        same = np.flatnonzero(labels == labels[i])
        near = rng.choice(same, deg)
        far = rng.integers(0, n, deg)
        lists.append(np.where(rng.random(deg) < 0.7, near, far))
    degree = np.array([len(a) for a in lists])
    offsets = np.concatenate([[0], np.cumsum(degree)[:-1]])
    flat = imp.Tensor(np.concatenate(lists).astype(np.int32))
    offsets_t = imp.Tensor(offsets.astype(np.int32)[:, None])
    degree_t = imp.Tensor(degree.astype(np.float32)[:, None])
    centres = rng.standard_normal((groups, f)).astype(np.float32)
    x = imp.Tensor(centres[labels] + 1.5 * rng.standard_normal((n, f)).astype(np.float32))
    train = imp.Tensor((rng.random(n) < 0.5).astype(np.float32))
    labels_t = imp.Tensor(labels.astype(np.int32))
    dims = [f] + [c["hidden"]] * (c["layers"] - 1) + [groups]
    layers = nn.ModuleList([SAGELayer(a, b, i == c["layers"] - 1)
                            for i, (a, b) in enumerate(zip(dims, dims[1:]))])
    opt = optim.Adam(layers.parameters(), 1e-2)

    def loss_of():
        h = x
        for layer in layers:
            pick = (imp.random.uniform(size=(n, sample)) * degree_t).astype("int32")
            h = layer(h, flat[offsets_t + pick])
        per_node = F.cross_entropy(h, labels_t, reduction="none")
        return F.sum(per_node * train) / F.sum(train)
    return stepper(layers.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 10. triplet network with batch-hard mining (Hermans et al., "In defense of the triplet
#     loss"): a conv embedding net (L2-normalised output); each batch has `ids` identities
#     of `per_id` images each, freshly noised; from the (b x b) distance matrix each anchor
#     takes its farthest positive and nearest negative, soft-margin loss softplus(d+ - d-).
def _triplet(c):
    ids, per_id, s, ch = c["ids"], c["per_id"], c["size"], c["ch"]
    b = ids * per_id
    base, _ = cluster_task(b, (3, s, s))
    who = np.repeat(np.arange(ids), per_id)
    rng = np.random.default_rng(89)
    protos = rng.standard_normal((ids, 3, s, s)).astype(np.float32)
    base = base * 0.3 + imp.Tensor(protos[who])
    same = imp.Tensor((who[:, None] == who[None, :]).astype(np.float32))

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.MaxPool2d(2)]
    net = nn.Sequential(*block(3, ch), *block(ch, 2 * ch), *block(2 * ch, 4 * ch),
                        nn.Flatten(), nn.Linear(4 * ch * (s // 8) ** 2, c["dim"]))
    opt = optim.Adam(net.parameters(), 3e-4)

    def loss_of():
        e = l2_normalize(net(base + 0.2 * imp.random.normal(size=base.shape)))
        sq = F.sum(e * e, axis=1, keepdims=True)
        d2 = sq + F.transpose(sq, (1, 0)) - 2.0 * F.matmul(e, e, transpose_b=True)
        dist = F.sqrt(F.clip(d2, 1e-12))
        hardest_pos = F.max(dist * same, axis=1)
        hardest_neg = F.min(dist + 4.0 * same, axis=1)
        return F.mean(F.softplus(hardest_pos - hardest_neg))
    return stepper(net.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "charlstm": dict(vocab=48, embed=64, hidden=256, layers=2, seq=40, batch=32),
    "alexnet": dict(ch=32, fc=512, size=32, batch=32),
    "skipgram": dict(vocab=30000, dim=128, negatives=10, batch=4096, lr=0.025),
    "resnet18": dict(width=16, size=32, batch=16),
    "bertmlm": dict(vocab=2000, dim=128, heads=4, layers=3, seq=64, batch=16),
    "vaegan": dict(ch=24, latent=64, size=32, batch=12),
    "widedeep": dict(fields=26, buckets=1000, cross_buckets=20000, embed=16,
                     hidden=(1024, 512, 256), batch=768),
    "tcn": dict(ch=24, levels=8, k=7, length=400, batch=16),
    "sage": dict(nodes=8192, features=64, hidden=128, layers=2, sample=10, degree=12),
    "triplet": dict(ids=8, per_id=4, ch=16, size=32, dim=64),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "charlstm": dict(vocab=12, embed=8, hidden=16, layers=2, seq=6, batch=4),
    "alexnet": dict(ch=4, fc=16, size=8, batch=4),
    "skipgram": dict(vocab=200, dim=16, negatives=4, batch=64, lr=0.025),
    "resnet18": dict(width=4, size=8, batch=4),
    "bertmlm": dict(vocab=40, dim=16, heads=2, layers=2, seq=8, batch=4),
    "vaegan": dict(ch=4, latent=8, size=8, batch=4),
    "widedeep": dict(fields=4, buckets=20, cross_buckets=30, embed=4, hidden=(16, 8),
                     batch=16),
    "tcn": dict(ch=4, levels=3, k=3, length=16, batch=4),
    "sage": dict(nodes=64, features=8, hidden=16, layers=2, sample=3, degree=4),
    "triplet": dict(ids=3, per_id=2, ch=4, size=8, dim=8),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "charlstm": _charlstm,
    "alexnet": _alexnet,
    "skipgram": _skipgram,
    "resnet18": _resnet18,
    "bertmlm": _bertmlm,
    "vaegan": _vaegan,
    "widedeep": _widedeep,
    "tcn": _tcn,
    "sage": _sage,
    "triplet": _triplet,
}


MODEL_SET = ModelSet(__name__, "tests/ninth_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
