"""Ten more models for the memory manager, ordinary ones as a user would write them from a
PyTorch tutorial or the paper, unlike the zoo and tests/{unseen,fresh,novel,heldout,sixth,
seventh,eighth,ninth,tenth,eleventh,twelfth}_models.py; written in session 49 by a helper
that had not read the memory manager, on the PyTorch-style layers that session added (the
first models trained under DTR with them): a DCGAN (a ConvTranspose2d generator, a
LeakyReLU and BatchNorm2d discriminator, the tutorial's two optimizers and two backward
passes a step), a seq2seq translator with Bahdanau attention (a bidirectional nn.LSTM
encoder, an nn.LSTMCell decoder attending over the padded source at every word, teacher
forcing drawn per word, the model's own argmax otherwise), a GRU forecaster (a two-layer
batch-first nn.GRU encoder with dropout over a window of a seasonal series, an nn.GRUCell
decoder fed its own predictions over the horizon), a denoising autoencoder (GroupNorm and
Mish, ConvTranspose2d upsampling, noise and pixel dropout drawn by imp.random each step),
a transformer text classifier (a stack of nn.TransformerEncoderLayer, pre-norm, GELU,
learned positional embeddings, a key padding mask, masked mean pooling), a 1-D conv audio
classifier (a strided Conv1d stem, residual blocks of dilated reflect-padded Conv1d and
BatchNorm1d, nn.Identity shortcuts, global average pooling), a U-Net segmenter
(InstanceNorm2d, LeakyReLU, ConvTranspose2d upsampling, skip concatenations, cross entropy
per pixel plus a soft Dice loss), SRResNet (residual blocks with PReLU, sub-pixel
upsampling by nn.PixelShuffle, reflection padding, a bilinear F.interpolate skip), a
tiny-YOLOv3 detector (LeakyReLU darknet convs, an nn.Upsample route to a second scale,
anchors assigned by IoU, objectness, box and class losses) and SASRec (causal
self-attention by nn.MultiheadAttention with a bool attn_mask, point-wise Conv1d
feed-forwards, negatives sampled each step, BCE on next items).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/twelfth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import CosineAnnealingLR, StepLR
from eleventh_models import _scenes
from model_sets import ModelSet, bce_with_logits, stepper
from tenth_models import _cycle, _then

# ---------------------------------------------------------------------------------------
# helpers: what a PyTorch user would have taken from torch.nn or torch.nn.functional


def _max_pool1d(x, k):
    """torch.nn.functional.max_pool1d(x, k) over (b, c, length): nn has no MaxPool1d."""
    return F.squeeze(F.max_pool2d(F.expand_dims(x, 2), (1, k)), 2)


def _masked_mean(values, mask):
    """The mean of `values` where the float `mask` (same shape) is 1."""
    return F.sum(values * mask) / F.maximum(F.sum(mask), 1.0)


# ---------------------------------------------------------------------------------------
# 1. DCGAN (Radford et al.; the PyTorch tutorial): a generator of ConvTranspose2d layers
#    (a 4x4 start from the noise vector, then doubling to the image size), BatchNorm2d and
#    ReLU, tanh out; a discriminator of stride-2 convs, BatchNorm2d and LeakyReLU(0.2), a
#    4x4 conv to one logit; DCGAN's weights_init (N(0, 0.02), batch-norm scales N(1,
#    0.02)); per step the discriminator on a real batch and on the detached fakes, then
#    the generator through the updated discriminator; BCE with logits; two Adams at
#    betas (0.5, 0.999). Four batches of scenes scaled to [-1, 1] cycle.
class DCGenerator(nn.Module):
    def __init__(self, nz, ngf, size):
        super().__init__()
        ch = ngf * size // 8
        layers = [nn.ConvTranspose2d(nz, ch, 4, 1, 0, bias=False), nn.BatchNorm2d(ch),
                  nn.ReLU()]
        s = 4
        while s < size // 2:
            layers += [nn.ConvTranspose2d(ch, ch // 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(ch // 2), nn.ReLU()]
            ch, s = ch // 2, 2 * s
        layers += [nn.ConvTranspose2d(ch, 3, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, z):
        return self.main(z)


class DCDiscriminator(nn.Module):
    def __init__(self, ndf, size):
        super().__init__()
        layers = [nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
        ch, s = ndf, size // 2
        while s > 4:
            layers += [nn.Conv2d(ch, 2 * ch, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * ch),
                       nn.LeakyReLU(0.2, inplace=True)]
            ch, s = 2 * ch, s // 2
        layers += [nn.Conv2d(ch, 1, 4, 1, 0, bias=False), nn.Flatten()]
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x)


def _dcgan_init(model):
    """DCGAN's weights_init (torch's model.apply with nn.init.normal_: neither here)."""
    for name, p in model.named_parameters():
        if name.endswith("weight"):
            p[...] = imp.random.normal(1.0 if p.ndim == 1 else 0.0, 0.02, size=p.shape)
        else:
            p[...] = F.zeros(p.shape)


def _dcgan(c):
    rng = np.random.default_rng(401)
    b, nz, size = c["batch"], c["nz"], c["size"]
    reals = [imp.Tensor(2 * _scenes(rng, b, size) - 1) for _ in range(4)]
    net_g, net_d = DCGenerator(nz, c["ngf"], size), DCDiscriminator(c["ndf"], size)
    _dcgan_init(net_g)
    _dcgan_init(net_d)
    gm_g, gm_d = GradManager().attach(net_g.parameters()), GradManager().attach(
        net_d.parameters())
    opt_g = optim.Adam(net_g.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = optim.Adam(net_d.parameters(), 2e-4, betas=(0.5, 0.999))
    next_real = _cycle(reals)

    def bce(logits, label):
        return bce_with_logits(logits, F.full_like(logits, label))

    def step():
        real = next_real()
        noise = imp.random.normal(size=(b, nz, 1, 1))
        with gm_g:
            fake = net_g(noise)
            with gm_d:
                loss_d = bce(net_d(real), 1.0) + bce(net_d(fake.detach()), 0.0)
                gm_d.backward(loss_d)
            opt_d.step()
            opt_d.clear_grad()
            loss_g = bce(net_d(fake), 1.0)
            gm_g.backward(loss_g)
        opt_g.step()
        opt_g.clear_grad()
        return loss_d
    return step


# ---------------------------------------------------------------------------------------
# 2. Seq2seq with Bahdanau attention (Bahdanau et al.; the PyTorch translation tutorial):
#    source and target token embeddings, a bidirectional nn.LSTM encoder (batch first)
#    whose final states are bridged by linear layers into the decoder's first state, an
#    nn.LSTMCell decoder that at every target word scores every source position
#    additively (v^T tanh(W_k keys + W_q h)), the padding masked out, feeds the context
#    with the previous word, and predicts from state, context and word (dropout on the
#    embeddings); the next input is the true word with probability 1/2 (teacher forcing,
#    drawn per word) else the model's own argmax. The task: variable-length sequences
#    reversed and mapped through a fixed permutation of the vocabulary, EOS-terminated;
#    cross entropy over the real target words; Adam, gradients clipped to 1.
class BahdanauEncoder(nn.Module):
    def __init__(self, vocab, emb, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.bridge_h = nn.Linear(2 * hidden, hidden)
        self.bridge_c = nn.Linear(2 * hidden, hidden)

    def forward(self, src):
        out, (h, c) = self.rnn(self.embed(src))                   # (b, L, 2H), (2, b, H)
        h0 = F.tanh(self.bridge_h(F.concat([h[0], h[1]], axis=1)))
        c0 = self.bridge_c(F.concat([c[0], c[1]], axis=1))
        return out, (h0, c0)


class AdditiveAttention(nn.Module):
    def __init__(self, enc_dim, dec_dim, att):
        super().__init__()
        self.key = nn.Linear(enc_dim, att, bias=False)
        self.query = nn.Linear(dec_dim, att)
        self.v = nn.Linear(att, 1, bias=False)

    def forward(self, keys, values, h, pad_bias):
        scores = F.squeeze(self.v(F.tanh(keys + F.expand_dims(self.query(h), 1))), 2)
        alpha = F.softmax(scores + pad_bias, axis=1)                      # (b, L)
        return F.sum(F.expand_dims(alpha, 2) * values, axis=1)


class AttnDecoder(nn.Module):
    def __init__(self, vocab, emb, hidden, enc_dim, att):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.attention = AdditiveAttention(enc_dim, hidden, att)
        self.cell = nn.LSTMCell(emb + enc_dim, hidden)
        self.out = nn.Linear(hidden + enc_dim + emb, vocab)
        self.drop = nn.Dropout(0.1)

    def forward(self, word, state, keys, values, pad_bias):
        e = self.drop(self.embed(word))
        context = self.attention(keys, values, state[0], pad_bias)
        h, cc = self.cell(F.concat([e, context], axis=1), state)
        return self.out(F.concat([h, context, e], axis=1)), (h, cc)


class Seq2Seq(nn.Module):
    def __init__(self, vocab, emb, hidden, att):
        super().__init__()
        self.encoder = BahdanauEncoder(vocab, emb, hidden)
        self.decoder = AttnDecoder(vocab, emb, hidden, 2 * hidden, att)

    def forward(self, src, pad_bias, targets, forcing):
        enc, state = self.encoder(src)
        keys = self.decoder.attention.key(enc)                      # once per sentence
        word = F.full((src.shape[0],), 1, "int32")                  # BOS
        outputs = []
        for t, teach in enumerate(forcing):
            logits, state = self.decoder(word, state, keys, enc, pad_bias)
            outputs.append(logits)
            word = targets[:, t] if teach else F.argmax(logits, axis=1).astype("int32")
        return F.stack(outputs, axis=1)


def _reversal_pairs(rng, n, length, vocab):
    """Tokens 0 pad, 1 BOS, 2 EOS; sources of 3 .. length content words, targets the
    source reversed through a permutation, then EOS."""
    perm = rng.permutation(np.arange(3, vocab))
    src = np.zeros((n, length), np.int32)
    tgt = np.zeros((n, length + 1), np.int32)
    for i in range(n):
        k = rng.integers(3, length + 1)
        words = rng.integers(3, vocab, k)
        src[i, :k] = words
        tgt[i, :k] = perm[words[::-1] - 3]
        tgt[i, k] = 2
    pad_bias = np.where(src == 0, -1e30, 0.0).astype(np.float32)
    return imp.Tensor(src), imp.Tensor(pad_bias), imp.Tensor(tgt), imp.Tensor(
        (tgt != 0).astype(np.float32))


def _seq2seq(c):
    rng = np.random.default_rng(409)
    batches = [_reversal_pairs(rng, c["batch"], c["length"], c["vocab"]) for _ in range(4)]
    model = Seq2Seq(c["vocab"], c["emb"], c["hidden"], c["att"])
    params = model.parameters()
    gm, opt = GradManager().attach(params), optim.Adam(params, 2e-3)
    next_batch = _cycle(batches)

    def step():
        src, pad_bias, tgt, mask = next_batch()
        forcing = rng.random(tgt.shape[1]) < 0.5
        with gm:
            logits = model(src, pad_bias, tgt, forcing)
            loss = _masked_mean(F.cross_entropy(logits, tgt, reduction="none"), mask)
            gm.backward(loss)
        optim.clip_grad_norm(params, 1.0)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 3. A GRU forecaster (the usual encoder-decoder of time-series tutorials): a window of a
#    seasonal series (daily and weekly cycles, a trend and noise) with the time of day as
#    sin/cos covariates into a two-layer batch-first nn.GRU with dropout 0.2; an
#    nn.GRUCell from the top layer's final state runs over the horizon, fed its own
#    previous prediction and the future covariates; MSE; AdamW, the rate halved every 50
#    steps (StepLR).
class GRUForecaster(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.encoder = nn.GRU(3, hidden, num_layers=2, batch_first=True, dropout=0.2)
        self.decoder = nn.GRUCell(3, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, history, future_time):
        _, h_n = self.encoder(history)                        # (2, b, hidden)
        h = h_n[-1]
        value = history[:, -1, :1]
        preds = []
        for t in range(future_time.shape[1]):
            h = self.decoder(F.concat([value, future_time[:, t]], axis=1), h)
            value = self.head(h)
            preds.append(value)
        return F.concat(preds, axis=1)


def _seasonal_windows(rng, n, past, horizon):
    t0 = rng.integers(0, 24 * 7, n)[:, None] + np.arange(past + horizon)[None]
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    level = (np.sin(2 * np.pi * t0 / 24 + phase) + 0.5 * np.sin(2 * np.pi * t0 / 168)
             + 0.002 * t0 + 0.1 * rng.standard_normal(t0.shape))
    clock = np.stack([np.sin(2 * np.pi * t0 / 24), np.cos(2 * np.pi * t0 / 24)], axis=2)
    history = np.concatenate([level[:, :past, None], clock[:, :past]], axis=2)
    return (imp.Tensor(history.astype(np.float32)),
            imp.Tensor(clock[:, past:].astype(np.float32)),
            imp.Tensor(level[:, past:].astype(np.float32)))


def _gru_forecast(c):
    rng = np.random.default_rng(419)
    batches = [_seasonal_windows(rng, c["batch"], c["past"], c["horizon"]) for _ in range(4)]
    model = GRUForecaster(c["hidden"])
    opt = optim.AdamW(model.parameters(), 3e-3, weight_decay=1e-2)
    schedule = StepLR(opt, 50, gamma=0.5)
    next_batch = _cycle(batches)

    def loss_of():
        history, future_time, target = next_batch()
        return F.mse_loss(model(history, future_time), target)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 4. A denoising convolutional autoencoder: stride-2 convs with GroupNorm (8 channels a
#    group) and Mish down by 4, ConvTranspose2d layers back up, a sigmoid out; each step
#    the clean scenes get Gaussian noise and 10% of their pixels zeroed (imp.random),
#    clipped to [0, 1]; MSE against the clean images; SGD with Nesterov momentum and
#    weight decay, a warm-up and cosine decay.
def _conv_gn_mish(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.GroupNorm(cout // 8, cout),
                         nn.Mish())


def _up_gn_mish(cin, cout):
    return nn.Sequential(nn.ConvTranspose2d(cin, cout, 4, 2, 1), nn.GroupNorm(cout // 8, cout),
                         nn.Mish())


class DenoisingAE(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.encoder = nn.Sequential(_conv_gn_mish(3, ch, 1), _conv_gn_mish(ch, 2 * ch, 2),
                                     _conv_gn_mish(2 * ch, 4 * ch, 2),
                                     _conv_gn_mish(4 * ch, 4 * ch, 1))
        self.decoder = nn.Sequential(_up_gn_mish(4 * ch, 2 * ch), _up_gn_mish(2 * ch, ch),
                                     nn.Conv2d(ch, 3, 3, padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


def _denoise_ae(c):
    rng = np.random.default_rng(421)
    batches = [imp.Tensor(_scenes(rng, c["batch"], c["size"])) for _ in range(4)]
    model = DenoisingAE(c["ch"])
    opt = optim.SGD(model.parameters(), 0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    schedule = CosineAnnealingLR(opt, 300, warmup_steps=5)
    next_batch = _cycle(batches)

    def loss_of():
        clean = next_batch()
        keep = (imp.random.uniform(size=clean.shape) > 0.1).astype("float32")
        noisy = F.clip((clean + 0.2 * imp.random.normal(size=clean.shape)) * keep, 0.0, 1.0)
        return F.mse_loss(model(noisy), clean)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 5. A transformer text classifier: token embeddings scaled by sqrt(d) plus learned
#    position embeddings (nn.Embedding of positions), a stack of nn.TransformerEncoderLayer
#    (batch first, pre-norm, GELU, dropout 0.1) given the padding as
#    src_key_padding_mask, a final LayerNorm, the mean over the real tokens, dropout and a
#    linear classifier. The task: variable-length reviews whose label is which of three
#    sentiment word groups occurs most; AdamW, a warm-up and cosine decay.
class TextTransformer(nn.Module):
    def __init__(self, vocab, length, dim, heads, layers, classes=3):
        super().__init__()
        self.dim = dim
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(length, dim)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(dim, classes)
        self.positions = imp.Tensor(np.arange(length, dtype=np.int32))

    def forward(self, tokens, padding):
        x = self.embed(tokens) * math.sqrt(self.dim) + self.pos(self.positions)
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=padding)
        keep = F.expand_dims(1.0 - padding.astype("float32"), 2)
        pooled = F.sum(self.norm(x) * keep, axis=1) / F.sum(keep, axis=1)
        return self.head(self.drop(pooled))


def _reviews(rng, n, length, vocab):
    """Token 0 pad; 1-9 three groups of sentiment words; the label the group seen most."""
    tokens = np.zeros((n, length), np.int32)
    labels = rng.integers(0, 3, n)
    for i in range(n):
        k = rng.integers(length // 2, length + 1)
        tokens[i, :k] = rng.integers(10, vocab, k)
        counts = rng.permutation(3) + 1
        counts[labels[i]], counts[np.argmax(counts)] = counts.max() + 1, counts[labels[i]]
        words = np.concatenate([3 * g + 1 + rng.integers(0, 3, m) for g, m in enumerate(counts)])
        tokens[i, rng.choice(k, len(words), replace=False)] = words
    return (imp.Tensor(tokens), imp.Tensor(tokens == 0),
            imp.Tensor(labels.astype(np.int32)))


def _text_transformer(c):
    rng = np.random.default_rng(431)
    batches = [_reviews(rng, c["batch"], c["length"], c["vocab"]) for _ in range(4)]
    model = TextTransformer(c["vocab"], c["length"], c["dim"], c["heads"], c["layers"])
    opt = optim.AdamW(model.parameters(), 1e-3, weight_decay=0.01)
    schedule = CosineAnnealingLR(opt, 500, warmup_steps=10)
    next_batch = _cycle(batches)

    def loss_of():
        tokens, padding, labels = next_batch()
        return F.cross_entropy(model(tokens, padding), labels)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 6. A 1-D conv audio classifier (M5-like front end, dilated residual blocks as in
#    speech-command nets): raw waveforms into a strided Conv1d stem, BatchNorm1d, ReLU
#    and a max-pool; residual blocks of two dilated (1, 2, 4, 8) reflect-padded Conv1d
#    with BatchNorm1d and an nn.Identity shortcut; a strided Conv1d; global average over
#    time, dropout, a linear classifier. The clips: four keywords, each a pattern of tone
#    bursts at its own pitches, at random offsets and gains, in noise; SGD with momentum
#    and weight decay, StepLR.
class DilatedBlock(nn.Module):
    def __init__(self, ch, dilation):
        super().__init__()
        self.conv1 = nn.Conv1d(ch, ch, 3, padding=dilation, dilation=dilation, bias=False,
                               padding_mode="reflect")
        self.bn1 = nn.BatchNorm1d(ch)
        self.conv2 = nn.Conv1d(ch, ch, 3, padding=dilation, dilation=dilation, bias=False,
                               padding_mode="reflect")
        self.bn2 = nn.BatchNorm1d(ch)
        self.shortcut = nn.Identity()

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + self.shortcut(x))


class AudioNet(nn.Module):
    def __init__(self, ch, stem, classes=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(1, ch, stem, stride=stem // 4, padding=stem // 2),
                                  nn.BatchNorm1d(ch), nn.ReLU())
        self.blocks = nn.Sequential(*[DilatedBlock(ch, d) for d in (1, 2, 4, 8)])
        self.reduce = nn.Sequential(nn.Conv1d(ch, 2 * ch, 3, stride=2, padding=1),
                                    nn.BatchNorm1d(2 * ch), nn.ReLU())
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(2 * ch, classes)

    def forward(self, wave):
        h = self.reduce(self.blocks(_max_pool1d(self.stem(wave), 4)))
        return self.fc(self.drop(F.mean(h, axis=2)))


def _keyword_clips(rng, n, length):
    pitches = [(0.02, 0.05), (0.05, 0.02), (0.03, 0.08), (0.08, 0.03)]
    labels = rng.integers(0, 4, n)
    t = np.arange(length)
    clips = 0.3 * rng.standard_normal((n, length))
    for i, k in enumerate(labels):
        start, burst = rng.integers(0, length // 3), length // 4
        for j, f in enumerate(pitches[k]):
            span = slice(start + j * burst, start + (j + 1) * burst)
            clips[i, span] += rng.uniform(0.5, 1.5) * np.sin(2 * np.pi * f * t[span]
                                                           + rng.uniform(0, 6))
    return (imp.Tensor(clips[:, None].astype(np.float32)),
            imp.Tensor(labels.astype(np.int32)))


def _audio_cnn(c):
    rng = np.random.default_rng(433)
    batches = [_keyword_clips(rng, c["batch"], c["length"]) for _ in range(4)]
    model = AudioNet(c["ch"], c["stem"])
    opt = optim.SGD(model.parameters(), 0.02, momentum=0.9, weight_decay=1e-4)
    schedule = StepLR(opt, 100, gamma=0.1)
    next_batch = _cycle(batches)

    def loss_of():
        wave, labels = next_batch()
        return F.cross_entropy(model(wave), labels)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 7. A U-Net (Ronneberger et al.) segmenter: double 3x3 convs with InstanceNorm2d
#    (affine) and LeakyReLU, max-pool down `depth` times, ConvTranspose2d (2x2, stride 2)
#    up, the skip concatenated, a 1x1 conv to the classes; cross entropy per pixel plus a
#    soft Dice loss over the softmax; Adam with weight decay. The images: disks and
#    squares (the classes besides the background) over gratings.
def _double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                         nn.InstanceNorm2d(cout, affine=True), nn.LeakyReLU(0.01),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                         nn.InstanceNorm2d(cout, affine=True), nn.LeakyReLU(0.01))


class UNet(nn.Module):
    def __init__(self, ch, depth, classes=3):
        super().__init__()
        widths = [ch * 2 ** i for i in range(depth + 1)]
        self.inc = _double_conv(3, ch)
        self.downs = nn.ModuleList([_double_conv(a, b) for a, b in zip(widths, widths[1:])])
        self.ups = nn.ModuleList([nn.ConvTranspose2d(b, a, 2, stride=2)
                                  for a, b in zip(widths, widths[1:])])
        self.up_convs = nn.ModuleList([_double_conv(2 * a, a) for a in widths[:-1]])
        self.pool = nn.MaxPool2d(2)
        self.outc = nn.Conv2d(ch, classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(self.pool(skips[-1])))
        h = skips.pop()
        for i in reversed(range(len(self.ups))):
            h = self.up_convs[i](F.concat([skips.pop(), self.ups[i](h)], axis=1))
        return self.outc(h)


def _shapes_scene(rng, n, size):
    yy, xx = np.mgrid[0:size, 0:size] / size
    images = 0.5 + 0.15 * np.sin(2 * np.pi * (rng.uniform(2, 8, (n, 1, 1, 1)) * xx
                                              + rng.uniform(0, 6, (n, 1, 1, 1))))
    images = np.repeat(images, 3, axis=1) + 0.05 * rng.standard_normal((n, 3, size, size))
    labels = np.zeros((n, size, size), np.int32)
    for i in range(n):
        for _ in range(rng.integers(2, 5)):
            cy, cx, r = rng.uniform(0.15, 0.85, 2).tolist() + [rng.uniform(0.06, 0.15)]
            kind = rng.integers(1, 3)
            inside = ((yy - cy) ** 2 + (xx - cx) ** 2 < r * r if kind == 1
                      else (np.abs(yy - cy) < r) & (np.abs(xx - cx) < r))
            labels[i, inside] = kind
            images[i][:, inside] = rng.uniform(0, 1, (3, 1))
    return imp.Tensor(images.astype(np.float32)), imp.Tensor(labels)


def _unet(c):
    rng = np.random.default_rng(439)
    batches = [_shapes_scene(rng, c["batch"], c["size"]) for _ in range(4)]
    model = UNet(c["ch"], c["depth"])
    opt = optim.Adam(model.parameters(), 2e-3, weight_decay=1e-5)
    next_batch = _cycle(batches)

    def loss_of():
        x, labels = next_batch()
        logits = model(x)
        probs = F.softmax(logits, axis=1)
        onehot = F.transpose(F.one_hot(labels, 3), (0, 3, 1, 2)).astype("float32")
        inter = F.sum(probs * onehot, axis=(0, 2, 3))
        dice = 1.0 - F.mean((2 * inter + 1.0) / (F.sum(probs + onehot, axis=(0, 2, 3)) + 1.0))
        return F.cross_entropy(logits, labels, axis=1) + dice
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 8. SRResNet (Ledig et al.): a reflection-padded 9x9 conv and PReLU, residual blocks
#    (conv, BatchNorm2d, PReLU, conv, BatchNorm2d, the input added), a conv and batch norm
#    with the long skip, sub-pixel upsampling (a conv to 4x the channels, nn.PixelShuffle(2)
#    and PReLU, once per factor 2), a 9x9 conv out, plus the bilinear upsampling of the
#    input (F.interpolate); the low-resolution images the scenes resized down by
#    F.interpolate; MSE; Adam.
class SRResBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1), nn.BatchNorm2d(ch),
                                  nn.PReLU(), nn.Conv2d(ch, ch, 3, padding=1),
                                  nn.BatchNorm2d(ch))

    def forward(self, x):
        return x + self.body(x)


class SRResNet(nn.Module):
    def __init__(self, ch, blocks, scale):
        super().__init__()
        self.scale = scale
        self.head = nn.Sequential(nn.ReflectionPad2d(4), nn.Conv2d(3, ch, 9), nn.PReLU())
        self.body = nn.Sequential(*[SRResBlock(ch) for _ in range(blocks)],
                                  nn.Conv2d(ch, ch, 3, padding=1), nn.BatchNorm2d(ch))
        ups = []
        for _ in range(int(math.log2(scale))):
            ups += [nn.Conv2d(ch, 4 * ch, 3, padding=1), nn.PixelShuffle(2), nn.PReLU()]
        self.upsample = nn.Sequential(*ups)
        self.tail = nn.Sequential(nn.ReflectionPad2d(4), nn.Conv2d(ch, 3, 9))

    def forward(self, lr):
        h = self.head(lr)
        out = self.tail(self.upsample(h + self.body(h)))
        return out + F.interpolate(lr, scale_factor=self.scale, mode="bilinear",
                                   align_corners=False)


def _srresnet(c):
    rng = np.random.default_rng(443)
    s = c["scale"]
    pairs = []
    for _ in range(4):
        hr = imp.Tensor(_scenes(rng, c["batch"], c["size"]))
        pairs.append((F.interpolate(hr, scale_factor=1 / s, mode="bilinear"), hr))
    model = SRResNet(c["ch"], c["blocks"], s)
    opt = optim.Adam(model.parameters(), 1e-3)
    next_pair = _cycle(pairs)

    def loss_of():
        lr, hr = next_pair()
        return F.mse_loss(model(lr), hr)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 9. A tiny-YOLOv3 detector (Redmon and Farhadi): darknet convs (conv, BatchNorm2d,
#    LeakyReLU(0.1)) and max-pools to strides 8 and 16; a head at stride 16, and a route
#    that reduces it by a 1x1 conv, doubles it by nn.Upsample and concatenates the stride-8
#    features for a second head; three anchors a scale, each ground-truth box assigned to
#    the anchor of best IoU over the six (its scale and cell then fixed); losses: BCE of
#    the objectness everywhere, squared errors of the sigmoid offsets and log size ratios
#    and cross entropy of the class at the assigned anchors. The images: one to three
#    coloured rectangles (the colour the class) on noise; SGD with momentum and weight
#    decay, a warm-up, gradients clipped to 10.
ANCHORS = np.array([[0.12, 0.12], [0.22, 0.12], [0.12, 0.22],         # stride 8
                    [0.35, 0.35], [0.5, 0.25], [0.25, 0.5]])          # stride 16


def _darknet_conv(cin, cout, k=3):
    return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))


class TinyYOLO(nn.Module):
    def __init__(self, w, classes=3, anchors=3):
        super().__init__()
        out = anchors * (5 + classes)
        self.backbone = nn.Sequential(_darknet_conv(3, w), nn.MaxPool2d(2),
                                      _darknet_conv(w, 2 * w), nn.MaxPool2d(2),
                                      _darknet_conv(2 * w, 4 * w), nn.MaxPool2d(2),
                                      _darknet_conv(4 * w, 8 * w))
        self.deeper = nn.Sequential(nn.MaxPool2d(2), _darknet_conv(8 * w, 16 * w),
                                    _darknet_conv(16 * w, 8 * w, 1))
        self.head16 = nn.Sequential(_darknet_conv(8 * w, 16 * w), nn.Conv2d(16 * w, out, 1))
        self.route = nn.Sequential(_darknet_conv(8 * w, 4 * w, 1),
                                   nn.Upsample(scale_factor=2, mode="nearest"))
        self.head8 = nn.Sequential(_darknet_conv(12 * w, 8 * w), nn.Conv2d(8 * w, out, 1))

    def forward(self, x):
        fine = self.backbone(x)
        coarse = self.deeper(fine)
        return (self.head8(F.concat([self.route(coarse), fine], axis=1)),
                self.head16(coarse))


def _wh_iou(wh, anchors):
    inter = np.minimum(wh[0], anchors[:, 0]) * np.minimum(wh[1], anchors[:, 1])
    return inter / (wh[0] * wh[1] + anchors[:, 0] * anchors[:, 1] - inter)


def _detection_batch(rng, n, size, classes=3):
    """Images and, per scale (strides 8, 16), the targets: mask (n, 3, g, g), offsets and
    log sizes (n, 3, 4, g, g), classes (n, 3, g, g)."""
    images = 0.2 * rng.standard_normal((n, 3, size, size)) + 0.3
    targets = []
    for stride in (8, 16):
        g = size // stride
        targets.append([np.zeros((n, 3, g, g), np.float32), np.zeros((n, 3, 4, g, g),
                       np.float32), np.zeros((n, 3, g, g), np.int32)])
    for i in range(n):
        for _ in range(rng.integers(1, 4)):
            wh = rng.uniform(0.1, 0.55, 2)
            cy, cx = rng.uniform(wh[1] / 2, 1 - wh[1] / 2), rng.uniform(wh[0] / 2, 1 - wh[0] / 2)
            k = rng.integers(0, classes)
            y0, y1 = int((cy - wh[1] / 2) * size), int((cy + wh[1] / 2) * size)
            x0, x1 = int((cx - wh[0] / 2) * size), int((cx + wh[0] / 2) * size)
            images[i, :, y0:y1, x0:x1] = 0.1
            images[i, k, y0:y1, x0:x1] = 0.9
            best = int(np.argmax(_wh_iou(wh, ANCHORS)))
            mask, box, cls = targets[best // 3]
            a, g = best % 3, mask.shape[-1]
            gy, gx = int(cy * g), int(cx * g)
            mask[i, a, gy, gx] = 1.0
            box[i, a, :, gy, gx] = [cx * g - gx, cy * g - gy,
                                    *np.log(wh / ANCHORS[best])]
            cls[i, a, gy, gx] = k
    return (imp.Tensor(images.astype(np.float32)),
            [tuple(imp.Tensor(t) for t in scale) for scale in targets])


def _yolo_loss(pred, targets, n):
    mask, box, cls = targets
    b, _, g, _ = pred.shape
    p = F.reshape(pred, (b, 3, -1, g, g))                          # (b, anchors, 5 + C, g, g)
    m4 = F.expand_dims(mask, 2)
    xy = F.sum(m4[:, :, :1] * (F.sigmoid(p[:, :, 0:2]) - box[:, :, 0:2]) ** 2)
    wh = F.sum(m4[:, :, :1] * (p[:, :, 2:4] - box[:, :, 2:4]) ** 2)
    obj = F.sum(bce_with_logits(p[:, :, 4], mask, reduction="none"))
    ce = F.sum(mask * F.cross_entropy(p[:, :, 5:], cls, axis=2, reduction="none"))
    return (xy + wh + obj + ce) / n


def _yolo(c):
    rng = np.random.default_rng(449)
    batches = [_detection_batch(rng, c["batch"], c["size"]) for _ in range(4)]
    model = TinyYOLO(c["width"])
    params = model.parameters()
    gm = GradManager().attach(params)
    opt = optim.SGD(params, 5e-3, momentum=0.9, weight_decay=5e-4)
    schedule = StepLR(opt, 200, gamma=0.1, warmup_steps=5)
    next_batch = _cycle(batches)

    def step():
        x, targets = next_batch()
        with gm:
            preds = model(x)
            loss = sum(_yolo_loss(p, t, x.shape[0]) for p, t in zip(preds, targets))
            gm.backward(loss)
        optim.clip_grad_norm(params, 10.0)
        opt.step()
        opt.clear_grad()
        schedule.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 10. SASRec (Kang and McAuley; the common PyTorch port): item embeddings scaled by
#     sqrt(d) plus learned position embeddings, dropout, the left padding zeroed;
#     blocks of LayerNorm, causal self-attention by nn.MultiheadAttention (batch first,
#     a bool attn_mask above the diagonal, dropout) added to the normed queries, LayerNorm
#     and a point-wise feed-forward of two kernel-1 Conv1d, the padding zeroed again; the
#     final states scored against the next item's embedding and a negative drawn each
#     step; BCE on the real positions; Adam at betas (0.9, 0.98). The sequences: walks of
#     a sparse Markov chain over the items, of varying lengths.
class SASRecBlock(nn.Module):
    def __init__(self, dim, heads, drop):
        super().__init__()
        self.attn_norm = nn.LayerNorm(dim, eps=1e-8)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=drop, batch_first=True)
        self.ffn_norm = nn.LayerNorm(dim, eps=1e-8)
        self.conv1, self.conv2 = nn.Conv1d(dim, dim, 1), nn.Conv1d(dim, dim, 1)
        self.drop = nn.Dropout(drop)

    def forward(self, x, causal, keep):
        q = self.attn_norm(x)
        y, _ = self.attn(q, x, x, attn_mask=causal, need_weights=False)
        x = self.ffn_norm(q + y)
        f = self.conv2(self.drop(F.relu(self.drop(self.conv1(F.transpose(x, (0, 2, 1)))))))
        return (x + self.drop(F.transpose(f, (0, 2, 1)))) * keep


class SASRec(nn.Module):
    def __init__(self, items, length, dim, heads, blocks, drop=0.2):
        super().__init__()
        self.dim = dim
        self.item_emb = nn.Embedding(items + 1, dim)
        self.pos_emb = nn.Embedding(length, dim)
        self.drop = nn.Dropout(drop)
        self.blocks = nn.ModuleList([SASRecBlock(dim, heads, drop) for _ in range(blocks)])
        self.last_norm = nn.LayerNorm(dim, eps=1e-8)
        self.positions = imp.Tensor(np.arange(length, dtype=np.int32))
        self.causal = imp.Tensor(np.triu(np.ones((length, length), bool), 1))

    def forward(self, seqs, pos, neg):
        keep = F.expand_dims((seqs != 0).astype("float32"), 2)
        x = self.drop(self.item_emb(seqs) * math.sqrt(self.dim) + self.pos_emb(self.positions))
        x = x * keep
        for block in self.blocks:
            x = block(x, self.causal, keep)
        h = self.last_norm(x)
        return (F.sum(h * self.item_emb(pos), axis=2), F.sum(h * self.item_emb(neg), axis=2))


def _item_walks(rng, n, length, items):
    following = rng.integers(1, items + 1, (items + 1, 3))
    walks = np.zeros((n, length + 1), np.int32)
    for i in range(n):
        k = rng.integers(length // 3, length + 2)
        w = [rng.integers(1, items + 1)]
        for _ in range(k - 1):
            w.append(following[w[-1], rng.integers(0, 3)] if rng.random() < 0.8
                     else rng.integers(1, items + 1))
        walks[i, length + 1 - k:] = w
    return walks


def _sasrec(c):
    rng = np.random.default_rng(457)
    items, length = c["items"], c["length"]
    walks = [_item_walks(rng, c["batch"], length, items) for _ in range(4)]
    model = SASRec(items, length, c["dim"], c["heads"], c["blocks"])
    params = model.parameters()
    gm, opt = GradManager().attach(params), optim.Adam(params, 1e-3, betas=(0.9, 0.98))
    next_walks = _cycle(walks)

    def step():
        w = next_walks()
        seqs, pos = w[:, :-1], w[:, 1:]
        neg = np.where(pos != 0, rng.integers(1, items + 1, pos.shape), 0).astype(np.int32)
        real = imp.Tensor((pos != 0).astype(np.float32))
        with gm:
            pos_logits, neg_logits = model(imp.Tensor(seqs), imp.Tensor(pos), imp.Tensor(neg))
            loss = _masked_mean(bce_with_logits(pos_logits, real, reduction="none")
                                + F.softplus(neg_logits), real)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return step


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "dcgan": dict(nz=64, ngf=16, ndf=16, size=32, batch=32),
    "bahdanau": dict(vocab=200, emb=48, hidden=64, att=48, length=12, batch=48),
    "gru_forecast": dict(hidden=64, past=32, horizon=8, batch=64),
    "denoise_ae": dict(ch=16, size=48, batch=8),
    "text_transformer": dict(vocab=2000, length=64, dim=64, heads=4, layers=2, batch=16),
    "audio_cnn": dict(ch=32, stem=32, length=4000, batch=16),
    "unet_seg": dict(ch=8, depth=3, size=48, batch=4),
    "srresnet": dict(ch=16, blocks=3, scale=2, size=32, batch=12),
    "yolo": dict(width=8, size=96, batch=5),
    "sasrec": dict(items=2000, length=50, dim=64, heads=2, blocks=2, batch=32),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "dcgan": dict(nz=8, ngf=4, ndf=4, size=16, batch=4),
    "bahdanau": dict(vocab=16, emb=8, hidden=12, att=8, length=5, batch=4),
    "gru_forecast": dict(hidden=12, past=12, horizon=4, batch=8),
    "denoise_ae": dict(ch=8, size=16, batch=2),
    "text_transformer": dict(vocab=40, length=12, dim=16, heads=2, layers=2, batch=8),
    "audio_cnn": dict(ch=8, stem=8, length=256, batch=8),
    "unet_seg": dict(ch=4, depth=2, size=16, batch=2),
    "srresnet": dict(ch=4, blocks=2, scale=2, size=12, batch=2),
    "yolo": dict(width=4, size=32, batch=2),
    "sasrec": dict(items=30, length=10, dim=16, heads=2, blocks=2, batch=8),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps:
# none here (every model has its own data and step)
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "dcgan": _dcgan,
    "bahdanau": _seq2seq,
    "gru_forecast": _gru_forecast,
    "denoise_ae": _denoise_ae,
    "text_transformer": _text_transformer,
    "audio_cnn": _audio_cnn,
    "unet_seg": _unet,
    "srresnet": _srresnet,
    "yolo": _yolo,
    "sasrec": _sasrec,
}


MODEL_SET = ModelSet(__name__, "tests/thirteenth_models.py", CONFIGS, BENCH_SIZES, BUILDERS,
                     STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
