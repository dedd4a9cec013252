"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout}_models.py, written in session 43 by a helper that had
not read the memory manager: a conditional GAN (two networks and optimizers, two backward
passes a step, the generator's graph alive across the discriminator's update), SimCLR (two
random views through one conv encoder, a (2B x 2B) similarity, NT-Xent), Swin-like
windowed attention (windows cut by reshapes and transposes, shifted by a roll of
concatenated slices), EfficientNet MBConv blocks (expand, depthwise, squeeze-excite, SiLU,
project), a RevNet (reversible couplings, ordinary autodiff), a Perceiver (latents
cross-attending to a long input), a graph attention network on a dense adjacency,
Transformer-XL segment recurrence (detached states carried from one step to the next), a
SIREN (a sin MLP fitting an image from its coordinates) and a neural Turing machine (a GRU
controller reading and writing a memory matrix by content addressing, erase and add).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/heldout_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.models import Lambda, cluster_task, conv_bn_relu, global_average
from model_sets import ModelSet, stepper
from model_sets import attention as _attention


# ---------------------------------------------------------------------------------------
# helpers

def _mlp(sizes, act=nn.ReLU):
    """Linear layers of `sizes` with `act` between them."""
    layers = [m for a, b in zip(sizes, sizes[1:]) for m in (nn.Linear(a, b), act())]
    return nn.Sequential(*layers[:-1])


def _ffn(dim):
    return nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))


class AttendBlock(nn.Module):
    """Pre-norm: queries from x attend to `other`, then a GELU MLP; both residual."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.nq, self.nkv, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.kv = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim)
        self.proj, self.mlp = nn.Linear(dim, dim), _ffn(dim)

    def forward(self, x, other, kpos=None, bias=None):
        k, v = F.split(self.kv(self.nkv(other)), 2, axis=-1)
        k = k if kpos is None else k + kpos
        x = x + self.proj(_attention(self.q(self.nq(x)), k, v, self.heads, bias))
        return x + self.mlp(self.n2(x))


def _normalize(z, axis=-1):
    return z / F.sqrt(F.sum(z * z, axis=axis, keepdims=True) + 1e-6)


# ---------------------------------------------------------------------------------------
# 1. conditional GAN (pix2pix-like, MLPs): G denoises x; D scores (x, y) pairs. As in the
#    usual PyTorch loop, fake = G(x) is recorded once; D is trained on the real pair and on
#    fake.detach() (a nested `with gm_d:` and its optimizer step while G's recording is
#    open), then G is trained through the updated D: adversarial loss + 10 x MSE to the
#    clean target. Returns G's loss.
def _gan(c):
    rng = np.random.default_rng(3)
    f, b = c["features"], c["batch"]
    clean = rng.standard_normal((10, f)).astype(np.float32)[rng.integers(0, 10, b)]
    y, x = imp.Tensor(clean), imp.Tensor(clean + 0.7 * rng.standard_normal((b, f)))
    gen = _mlp([f, c["hidden"], c["hidden"], f])
    disc = _mlp([2 * f, c["hidden"], c["hidden"], 1], act=nn.GELU)
    opt_g, opt_d = (optim.Adam(m.parameters(), 1e-3, betas=(0.5, 0.999)) for m in (gen, disc))
    gm_g, gm_d = (GradManager().attach(m.parameters()) for m in (gen, disc))

    def step():
        with gm_g:
            fake = gen(x)
            with gm_d:
                real_logit = disc(F.concat([x, y], axis=1))
                fake_logit = disc(F.concat([x, fake.detach()], axis=1))
                loss_d = F.mean(F.softplus(-real_logit)) + F.mean(F.softplus(fake_logit))
                gm_d.backward(loss_d)
            opt_d.step()
            opt_d.clear_grad()
            adv = F.mean(F.softplus(-disc(F.concat([x, fake], axis=1))))
            loss_g = adv + 10.0 * F.mse_loss(fake, y)
            gm_g.backward(loss_g)
        opt_g.step()
        opt_g.clear_grad()
        return loss_g
    return step


# ---------------------------------------------------------------------------------------
# 2. SimCLR: each step two random views of the batch (a horizontal flip gathered by a
#    reversed index and chosen per sample by F.where, a random brightness, Gaussian noise)
#    go through one conv encoder and projection head as one batch of 2B; the (2B x 2B)
#    cosine similarities / tau, the diagonal masked by -1e9, and NT-Xent: cross entropy
#    whose target for view i is the other view of the same image.
def _conv_encoder(ch, out):
    return nn.Sequential(conv_bn_relu(3, ch), nn.MaxPool2d(2), conv_bn_relu(ch, 2 * ch),
                         nn.MaxPool2d(2), conv_bn_relu(2 * ch, 4 * ch), Lambda(global_average),
                         _mlp([4 * ch, 4 * ch, out]))


def _simclr(c):
    b, s = c["batch"], c["size"]
    x, _ = cluster_task(b, (3, s, s))
    flip = imp.Tensor(np.arange(s)[::-1].astype(np.int32))
    mask = imp.Tensor(np.eye(2 * b, dtype=np.float32) * -1e9)
    targets = imp.Tensor(((np.arange(2 * b) + b) % (2 * b)).astype(np.int32))
    model = _conv_encoder(c["ch"], c["out"])
    opt = optim.Adam(model.parameters(), 2e-3)

    def view():
        flipped = F.where(imp.random.uniform(size=(b, 1, 1, 1)) < 0.5, x[:, :, :, flip], x)
        scale = 1.0 + 0.2 * imp.random.normal(size=(b, 1, 1, 1))
        return flipped * scale + 0.3 * imp.random.normal(size=x.shape)

    def nt_xent():
        z = _normalize(model(F.concat([view(), view()], axis=0)))
        sim = F.matmul(z, z, transpose_b=True) * (1.0 / c["tau"]) + mask
        return F.cross_entropy(sim, targets)
    return stepper(model.parameters(), opt, nt_xent)


# ---------------------------------------------------------------------------------------
# 3. Swin-like: a strided-conv patch embedding to channels-last (b, H, W, c); each block
#    cuts the map into w x w windows (reshape, transpose, reshape), attends inside each
#    window with a learned per-head position bias, and merges the windows back; every
#    other block first rolls the map by w / 2 on both axes (concatenated slices) and rolls
#    it back after (no shift mask: a simplification).
def _roll(x, shift, axis):
    n = x.shape[axis]
    head, tail = F.split(x, [n - shift], axis=axis)
    return F.concat([tail, head], axis=axis)


class WindowBlock(nn.Module):
    def __init__(self, dim, heads, window, shift):
        super().__init__()
        self.heads, self.w, self.shift = heads, window, shift
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj, self.mlp = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim), _ffn(dim)
        self.bias = nn.Parameter(np.zeros((heads, window ** 2, window ** 2), np.float32))

    def forward(self, x):
        b, H, W, c = x.shape
        w, s = self.w, self.w // 2
        y = self.n1(x)
        if self.shift:
            y = _roll(_roll(y, H - s, 1), W - s, 2)
        y = F.transpose(F.reshape(y, (b, H // w, w, W // w, w, c)), (0, 1, 3, 2, 4, 5))
        win = F.reshape(y, (-1, w * w, c))                       # (b windows, w w, c)
        q, k, v = F.split(self.qkv(win), 3, axis=-1)
        y = self.proj(_attention(q, k, v, self.heads, self.bias))
        y = F.transpose(F.reshape(y, (b, H // w, W // w, w, w, c)), (0, 1, 3, 2, 4, 5))
        y = F.reshape(y, (b, H, W, c))
        if self.shift:
            y = _roll(_roll(y, s, 1), s, 2)
        x = x + y
        return x + self.mlp(self.n2(x))


class Swin(nn.Module):
    def __init__(self, dim, heads, window, blocks):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, 2, stride=2)
        self.blocks = nn.Sequential(*[WindowBlock(dim, heads, window, i % 2 == 1)
                                      for i in range(blocks)])
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x):
        x = self.blocks(F.transpose(self.embed(x), (0, 2, 3, 1)))
        return self.head(F.mean(self.norm(x), axis=(1, 2)))


# ---------------------------------------------------------------------------------------
# 4. EfficientNet MBConv: 1x1 expand -> BN -> SiLU, depthwise 3x3 (groups = channels,
#    maybe strided) -> BN -> SiLU, squeeze-and-excitation (global average, SiLU
#    bottleneck, sigmoid gate), 1x1 project -> BN, residual when the shape is kept.
class MBConv(nn.Module):
    def __init__(self, cin, cout, expand, stride):
        super().__init__()
        mid = cin * expand
        self.expand = nn.Conv2d(cin, mid, 1, bias=False)
        self.dw = nn.Conv2d(mid, mid, 3, stride=stride, padding=1, groups=mid, bias=False)
        self.se1, self.se2 = nn.Linear(mid, max(cin // 4, 4)), nn.Linear(max(cin // 4, 4), mid)
        self.project = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn1, self.bn2, self.bn3 = (nn.BatchNorm2d(k) for k in (mid, mid, cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = F.silu(self.bn1(self.expand(x)))
        y = F.silu(self.bn2(self.dw(y)))
        gate = F.sigmoid(self.se2(F.silu(self.se1(global_average(y)))))
        y = self.bn3(self.project(y * F.expand_dims(F.expand_dims(gate, 2), 3)))
        return x + y if self.residual else y


class EfficientNet(nn.Module):
    def __init__(self, ch, expand):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch))
        widths = [(ch, ch, 1), (ch, 2 * ch, 2), (2 * ch, 2 * ch, 1), (2 * ch, 3 * ch, 2),
                  (3 * ch, 3 * ch, 1)]
        self.blocks = nn.Sequential(*[MBConv(a, b, expand, s) for a, b, s in widths])
        self.top = nn.Sequential(nn.Conv2d(3 * ch, 6 * ch, 1, bias=False), nn.BatchNorm2d(6 * ch))
        self.head = nn.Linear(6 * ch, 10)

    def forward(self, x):
        x = self.blocks(F.silu(self.stem(x)))
        return self.head(global_average(F.silu(self.top(x))))


# ---------------------------------------------------------------------------------------
# 5. RevNet: channels split in halves, y1 = x1 + F(x2), y2 = x2 + G(y1) with F and G
#    pre-activation conv pairs; trained with ordinary autodiff (nothing reconstructed).
#    Two stages, a strided conv between them.
def _branch(c):
    return nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1),
                         nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))


class RevBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.f, self.g = _branch(ch // 2), _branch(ch // 2)

    def forward(self, x):
        x1, x2 = F.split(x, 2, axis=1)
        y1 = x1 + self.f(x2)
        return F.concat([y1, x2 + self.g(y1)], axis=1)


class RevNet(nn.Module):
    def __init__(self, ch, blocks):
        super().__init__()
        self.stem = conv_bn_relu(3, ch)
        self.stage1 = nn.Sequential(*[RevBlock(ch) for _ in range(blocks)])
        self.down = nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1)
        self.stage2 = nn.Sequential(*[RevBlock(2 * ch) for _ in range(blocks)])
        self.head = nn.Linear(2 * ch, 10)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(global_average(F.relu(x)))


# ---------------------------------------------------------------------------------------
# 6. Perceiver: a learned latent array (broadcast over the batch) cross-attends to a long
#    projected input with a learned position embedding, then self-attends; the cross and
#    latent blocks (shared weights) are applied `repeats` times, every time re-reading the
#    input.
class Perceiver(nn.Module):
    def __init__(self, features, dim, latents, heads, seq, repeats):
        super().__init__()
        self.repeats = repeats
        self.inp = nn.Linear(features, dim)
        self.pos = nn.Parameter(imp.random.normal(0, 0.1, (seq, dim)))
        self.latent = nn.Parameter(imp.random.normal(0, 0.5, (latents, dim)))
        self.cross, self.latent_attn = AttendBlock(dim, heads), AttendBlock(dim, heads)
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x):
        data = self.inp(x) + self.pos
        lat = F.broadcast_to(self.latent, (x.shape[0],) + self.latent.shape)
        for _ in range(self.repeats):
            lat = self.cross(lat, data)
            lat = self.latent_attn(lat, lat)
        return self.head(F.mean(self.norm(lat), axis=1))


# ---------------------------------------------------------------------------------------
# 7. graph attention network on a dense adjacency: per head, e_ij = leaky_relu(a_src h_i
#    + a_dst h_j) from a broadcast pairwise sum (heads, N, N), -1e9 added where there is
#    no edge, softmax over neighbours, dropout on the attention, then att @ h. Two layers
#    (heads concatenated, then averaged); node classification on a stochastic block model
#    whose features are weak hints of the class.
class GATLayer(nn.Module):
    def __init__(self, fin, fout, heads, drop):
        super().__init__()
        self.heads, self.fout, self.drop = heads, fout, drop
        self.w = nn.Linear(fin, heads * fout, bias=False)
        self.a_src, self.a_dst = (nn.Parameter(imp.random.normal(0, 0.3, (heads, fout, 1)))
                                  for _ in range(2))

    def forward(self, x, bias):
        n = x.shape[0]
        h = F.transpose(F.reshape(self.w(x), (n, self.heads, self.fout)), (1, 0, 2))
        e = F.matmul(h, self.a_src) + F.transpose(F.matmul(h, self.a_dst), (0, 2, 1))
        att = F.dropout(F.softmax(F.leaky_relu(e, 0.2) + bias, axis=-1), self.drop)
        return F.matmul(att, h)                                  # (heads, N, fout)


class GAT(nn.Module):
    def __init__(self, features, hidden, heads, drop):
        super().__init__()
        self.l1 = GATLayer(features, hidden, heads, drop)
        self.l2 = GATLayer(heads * hidden, 10, 2, drop)

    def forward(self, x, bias):
        h = self.l1(x, bias)
        h = F.reshape(F.transpose(h, (1, 0, 2)), (x.shape[0], -1))
        h = F.relu(h) + F.exp(F.minimum(h, 0.0)) - 1.0           # ELU
        return F.mean(self.l2(h, bias), axis=0)


def _gat(c):
    n = c["nodes"]
    x, labels = cluster_task(n, (c["features"],))
    lab, rng = labels.numpy(), np.random.default_rng(13)
    adj = rng.random((n, n)) < np.where(lab[:, None] == lab[None, :], c["p_in"], c["p_out"])
    adj = adj | adj.T | np.eye(n, dtype=bool)
    bias = imp.Tensor(np.where(adj, 0.0, -1e9).astype(np.float32))
    x = x + imp.Tensor(2.0 * rng.standard_normal(x.shape))
    model = GAT(c["features"], c["hidden"], c["heads"], 0.1)
    opt = optim.Adam(model.parameters(), 5e-3)
    return stepper(model.parameters(), opt, lambda: F.cross_entropy(model(x, bias), labels))


# ---------------------------------------------------------------------------------------
# 8. Transformer-XL-like segment recurrence: each call of the step trains on the next
#    segment of a token stream; every layer's attention reads the concatenation of that
#    layer's input on the previous segment (detached, kept between calls) and the current
#    one, causally, with a learned key position embedding. Back to the stream's start (and
#    zero memories) after the last segment.
class XLLayer(AttendBlock):
    def __init__(self, dim, heads, seq):
        super().__init__(dim, heads)
        self.kpos = nn.Parameter(imp.random.normal(0, 0.1, (2 * seq, dim)))

    def forward(self, x, mem, bias):
        return super().forward(x, F.concat([mem, x], axis=1), self.kpos, bias)


class TransformerXL(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(imp.random.normal(0, 0.1, (seq, dim)))
        self.layers = nn.ModuleList([XLLayer(dim, heads, seq) for _ in range(layers)])
        self.norm, self.out = nn.LayerNorm(dim), nn.Linear(dim, vocab)
        # query i sees all the memory and keys up to itself
        self.bias = imp.Tensor(np.triu(np.full((seq, 2 * seq), -1e9, np.float32), seq + 1))

    def forward(self, tokens, mems):
        x, new_mems = self.embed(tokens) + self.pos, []
        for layer, mem in zip(self.layers, mems):
            new_mems.append(x.detach())
            x = layer(x, mem, self.bias)
        return self.out(self.norm(x)), new_mems


def _txl(c):
    b, s, v, n = c["batch"], c["seq"], c["vocab"], c["segments"]
    t = np.zeros((b, n * s + 1), np.int64)      # t_i = t_{i-1} + t_{i-2} mod v
    t[:, :2] = np.random.default_rng(17).integers(0, v, (b, 2))
    for i in range(2, n * s + 1):
        t[:, i] = (t[:, i - 1] + t[:, i - 2]) % v
    segs = [(imp.Tensor(t[:, i * s:(i + 1) * s].astype(np.int32)),
             imp.Tensor(t[:, i * s + 1:(i + 1) * s + 1].reshape(-1).astype(np.int32)))
            for i in range(n)]
    model = TransformerXL(v, c["dim"], c["heads"], c["layers"], s)
    opt = optim.Adam(model.parameters(), 2e-3)
    state = {"i": 0, "mems": None}

    def next_segment():
        if state["i"] % n == 0:
            state["mems"] = [F.zeros((b, s, c["dim"])) for _ in range(c["layers"])]
        tokens, target = segs[state["i"] % n]
        logits, state["mems"] = model(tokens, state["mems"])
        state["i"] += 1
        return F.cross_entropy(F.reshape(logits, (-1, v)), target)
    return stepper(model.parameters(), opt, next_segment)


# ---------------------------------------------------------------------------------------
# 9. SIREN: sin(w0 (W x + b)) layers with SIREN's initialisation, fitting a 2-D signal
#    (a product of sines plus a Gaussian bump) from the (res^2, 2) pixel coordinates;
#    full-batch MSE regression.
def _sine_layer(a, b, bound):
    layer = nn.Linear(a, b)
    layer.weight = nn.Parameter(imp.random.uniform(-bound, bound, (b, a)))
    layer.bias = nn.Parameter(imp.random.uniform(-bound, bound, (b,)))
    return layer


class Siren(nn.Module):
    def __init__(self, width, depth, omega):
        super().__init__()
        self.omega = omega
        self.layers = nn.ModuleList([_sine_layer(2, width, 0.5)] + [
            _sine_layer(width, width, math.sqrt(6.0 / width) / omega) for _ in range(depth - 1)])
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        for layer in self.layers:
            x = F.sin(self.omega * layer(x))
        return self.out(x)


def _siren(c):
    g = np.linspace(-1, 1, c["res"], dtype=np.float32)
    yy, xx = np.meshgrid(g, g, indexing="ij")
    signal = np.sin(4 * xx) * np.cos(3 * yy) + np.exp(-((xx - 0.3) ** 2 + (yy + 0.2) ** 2) / 0.05)
    coords = imp.Tensor(np.stack([xx.ravel(), yy.ravel()], axis=1))
    target = imp.Tensor(signal.reshape(-1, 1).astype(np.float32))
    model = Siren(c["width"], c["depth"], 30.0)
    opt = optim.Adam(model.parameters(), 2e-4)
    return stepper(model.parameters(), opt, lambda: F.mse_loss(model(coords), target))


# ---------------------------------------------------------------------------------------
# 10. neural Turing machine: a GRU controller reads (input, last read vector); its output
#     makes a write key, erase and add vectors and a read key (each key with a softplus
#     sharpness); addressing is a softmax over the cosine similarities with the memory's
#     rows; write M <- M (1 - w e^T) + w a^T, then read r = w M. The memory starts from a
#     learned matrix broadcast over the batch; classified from (h, r) after the sequence.
class GRUCell(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.x, self.h = nn.Linear(features, 3 * hidden), nn.Linear(hidden, 3 * hidden)

    def forward(self, x, h):
        xr, xz, xn = F.split(self.x(x), 3, axis=1)
        hr, hz, hn = F.split(self.h(h), 3, axis=1)
        z = F.sigmoid(xz + hz)
        n = F.tanh(xn + F.sigmoid(xr + hr) * hn)
        return n + z * (h - n)


def _address(mem, key, beta):
    """softmax over the rows of mem (b, N, W) of beta * cos(row, key)."""
    sim = F.squeeze(F.matmul(_normalize(mem), F.expand_dims(_normalize(key), 2)), 2)
    return F.softmax((F.softplus(beta) + 1.0) * sim, axis=1)     # (b, N)


class NTM(nn.Module):
    def __init__(self, features, hidden, slots, width):
        super().__init__()
        self.hidden, self.width = hidden, width
        self.cell = GRUCell(features + width, hidden)
        self.ctrl = nn.Linear(hidden, 4 * width + 2)
        self.mem0 = nn.Parameter(imp.random.normal(0, 0.5, (slots, width)))
        self.head = nn.Linear(hidden + width, 10)

    def forward(self, x):
        (b, steps, _), wd = x.shape, self.width
        mem = F.broadcast_to(self.mem0, (b,) + self.mem0.shape)
        h, r = F.zeros((b, self.hidden)), F.zeros((b, wd))
        for xt in F.split(x, steps, axis=1):
            h = self.cell(F.concat([F.squeeze(xt, 1), r], axis=1), h)
            kw, bw, e, a, kr, br = F.split(
                self.ctrl(h), [wd, wd + 1, 2 * wd + 1, 3 * wd + 1, 4 * wd + 1], axis=1)
            ww = F.expand_dims(_address(mem, kw, bw), 2)          # (b, N, 1)
            mem = (mem * (1.0 - ww * F.expand_dims(F.sigmoid(e), 1))
                   + ww * F.expand_dims(F.tanh(a), 1))
            wr = F.expand_dims(_address(mem, kr, br), 1)          # (b, 1, N)
            r = F.squeeze(F.matmul(wr, mem), 1)
        return self.head(F.concat([h, r], axis=1))


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "gan": dict(features=256, hidden=512, batch=384),
    "simclr": dict(ch=16, out=64, size=32, tau=0.2, batch=32),
    "swin": dict(dim=64, heads=4, window=4, blocks=4, size=32, batch=8),
    "mbconv": dict(ch=16, expand=4, size=32, batch=8),
    "revnet": dict(ch=32, blocks=2, size=32, batch=8),
    "perceiver": dict(features=32, dim=128, latents=32, heads=4, seq=512, repeats=2, batch=8),
    "gat": dict(nodes=768, features=64, hidden=16, heads=4, p_in=0.05, p_out=0.005),
    "txl": dict(vocab=64, dim=128, heads=4, layers=3, seq=64, segments=4, batch=12),
    "siren": dict(res=64, width=256, depth=3),
    "ntm": dict(features=16, hidden=128, slots=64, width=32, steps=12, batch=48),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "gan": dict(features=16, hidden=32, batch=32),
    "simclr": dict(ch=8, out=16, size=8, tau=0.2, batch=8),
    "swin": dict(dim=16, heads=2, window=2, blocks=2, size=8, batch=4),
    "mbconv": dict(ch=8, expand=2, size=8, batch=4),
    "revnet": dict(ch=8, blocks=1, size=8, batch=4),
    "perceiver": dict(features=8, dim=16, latents=4, heads=2, seq=16, repeats=2, batch=8),
    "gat": dict(nodes=64, features=8, hidden=8, heads=2, p_in=0.2, p_out=0.02),
    "txl": dict(vocab=16, dim=16, heads=2, layers=2, seq=8, segments=3, batch=8),
    "siren": dict(res=16, width=32, depth=3),
    "ntm": dict(features=8, hidden=16, slots=8, width=8, steps=4, batch=16),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {
    "swin": lambda c: (Swin(c["dim"], c["heads"], c["window"], c["blocks"]),
                       (3, c["size"], c["size"]), "adam", 1e-3),
    "mbconv": lambda c: (EfficientNet(c["ch"], c["expand"]), (3, c["size"], c["size"]),
                         "adam", 2e-3),
    "revnet": lambda c: (RevNet(c["ch"], c["blocks"]), (3, c["size"], c["size"]), "sgd", 0.02),
    "perceiver": lambda c: (Perceiver(c["features"], c["dim"], c["latents"], c["heads"],
                                      c["seq"], c["repeats"]),
                            (c["seq"], c["features"]), "adam", 1e-3),
    "ntm": lambda c: (NTM(c["features"], c["hidden"], c["slots"], c["width"]),
                      (c["steps"], c["features"]), "adam", 2e-3),
}

# name -> config -> step(): models with their own training step
STEPS = {"gan": _gan, "simclr": _simclr, "gat": _gat, "txl": _txl, "siren": _siren}


MODEL_SET = ModelSet(__name__, "tests/sixth_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
