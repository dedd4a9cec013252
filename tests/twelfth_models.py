"""Ten more models for the memory manager, ordinary ones as a user would write them from a
PyTorch tutorial or the paper, unlike the zoo and tests/{unseen,fresh,novel,heldout,sixth,
seventh,eighth,ninth,tenth,eleventh}_models.py; written in session 48 by a helper that had
not read the memory manager: a VQ-VAE (a codebook looked up by the argmin of distances, the
straight-through estimator, a commitment loss, the codebook moved by exponential moving
averages in place and its dead codes restarted from encoder outputs read back), SwAV
(multi-crop views drawn each step, Sinkhorn-Knopp iterations on the prototype scores, a
swapped prediction, prototypes renormalised in place and frozen at first), a ShuffleNet v2
(channel split, depthwise convs, channel shuffle by reshape and transpose; the plain
training step), DeepFM (one embedding table of all fields, the factorisation machine's
pairwise term, a deep MLP with dropout), PPO on vectorised CartPole (a rollout sampled
outside the recording, GAE, several epochs of minibatches of the clipped objective, each
its own backward pass, stopped early on the approximate KL read back), SchNet (RBF
expansions of interatomic distances, continuous-filter convolutions, a cosine cutoff,
energies of made-up molecules), TabNet (sequential attentive masks by a hand-written
sparsemax, a prior of used features, GLU feature transformers shared across steps), a
CycleGAN (two generators, two PatchGAN discriminators, instance norm, reflection padding,
cycle and identity losses, an image pool, two optimizers and two backward passes a step),
a Longformer classifier (sliding-window attention by chunks, a global CLS token with its
own projections) and Kim et al.'s character-aware language model (char CNN of several
widths, highway, a two-layer LSTM, truncated BPTT, plain SGD with clipping).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/eleventh_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import CosineAnnealingLR, StepLR
from imperative.models import conv_bn_relu, global_average, upsample_nearest
from eleventh_models import _gumbel, _scenes
from model_sets import LSTMCell, ModelSet, bce_with_logits, l2_normalize, mlp, split_heads, \
    merge_heads, stepper
from ninth_models import BatchNorm1d
from tenth_models import Highway, _cycle, _then

# ---------------------------------------------------------------------------------------
# helpers: what a PyTorch user would have taken from torch.nn, torch.optim or torch


def _instance_norm(x, eps=1e-5):
    """torch.nn.InstanceNorm2d (affine=False): each sample's channels normalised alone."""
    mean = F.mean(x, axis=(2, 3), keepdims=True)
    var = F.var(x, axis=(2, 3), keepdims=True)
    return (x - mean) * F.rsqrt(var + eps)


def _reflection_pad(x, p):
    """torch.nn.ReflectionPad2d(p) over (b, c, h, w) (F.pad has the constant mode only)."""
    x = F.concat([x[:, :, p:0:-1], x, x[:, :, -2:-2 - p:-1]], axis=2)
    return F.concat([x[..., p:0:-1], x, x[..., -2:-2 - p:-1]], axis=3)


def _l1(a, b):
    """torch.nn.functional.l1_loss."""
    return F.mean(F.abs(a - b))


def _shifted_softplus(x):
    """SchNet's ssp(x) = softplus(x) - log 2 (zero at zero)."""
    return F.softplus(x) - math.log(2.0)


def _glu(x):
    """torch.nn.functional.glu over the last axis: the first half gated by the second's
    sigmoid."""
    a, b = F.split(x, 2, axis=-1)
    return a * F.sigmoid(b)


def _sparsemax(z):
    """Sparsemax (Martins and Astudillo; the entmax package, torch has none) over axis 1 of
    (b, d): the Euclidean projection onto the simplex, relu(z - tau). The threshold tau
    from the support without a sort: z_j is in it when 1 + k_j z_j > the sum of the k_j
    entries >= z_j, pairwise comparisons of the detached scores giving k_j and that sum."""
    zd = z.detach()
    above = F.greater_equal(F.expand_dims(zd, 1), F.expand_dims(zd, 2)).astype("float32")
    k = F.sum(above, axis=2)
    total = F.sum(above * F.expand_dims(zd, 1), axis=2)
    support = F.greater(1.0 + k * zd, total).astype("float32")
    tau = ((F.sum(z * support, axis=1, keepdims=True) - 1.0)
           / F.sum(support, axis=1, keepdims=True))
    return F.relu(z - tau)


def _flip_some(rng, x):
    """Each image of (b, c, h, w) flipped left-right with probability 1/2 (a numpy mask)."""
    flip = imp.Tensor(rng.random((x.shape[0], 1, 1, 1)) < 0.5)
    return F.where(flip, x[..., ::-1], x)


# ---------------------------------------------------------------------------------------
# 1. VQ-VAE (van den Oord et al.): a conv encoder downsampling by 4 to `dim` channels, each
#    position replaced by its nearest of `codes` codebook vectors (argmin of the squared
#    distances), the straight-through estimator into a decoder (nearest upsampling and
#    convs: nn has no ConvTranspose2d), MSE plus 0.25 times the commitment loss; the
#    codebook is no parameter but moved by exponential moving averages of the assigned
#    encoder outputs (the paper's appendix, Laplace-smoothed counts), in place after each
#    step; codes whose average count falls below 0.05 (read back) restart at random encoder
#    outputs of the batch. Four batches of scenes cycle; Adam.
class VQResBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.conv2 = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        return x + self.conv2(F.relu(self.conv1(F.relu(x))))


class VQVAE(nn.Module):
    def __init__(self, ch, dim):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, ch, 4, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv2d(ch, ch, 4, stride=2, padding=1),
                                     VQResBlock(ch), nn.ReLU(), nn.Conv2d(ch, dim, 1))
        self.decode_in = nn.Sequential(nn.Conv2d(dim, ch, 3, padding=1), VQResBlock(ch),
                                       nn.ReLU())
        self.up1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.up2 = nn.Conv2d(ch, 3, 3, padding=1)

    def decode(self, z):
        h = F.relu(self.up1(upsample_nearest(self.decode_in(z))))
        return self.up2(upsample_nearest(h))


def _vqvae(c):
    rng = np.random.default_rng(211)
    k, d, decay, eps = c["codes"], c["dim"], 0.99, 1e-5
    batches = [imp.Tensor(_scenes(rng, c["batch"], c["size"])) for _ in range(4)]
    model = VQVAE(c["ch"], d)
    codebook = imp.random.normal(size=(k, d))
    counts_ema = F.ones((k,))
    sums_ema = codebook * 1.0
    params = model.parameters()
    gm, opt = GradManager().attach(params), optim.Adam(params, 2e-3)
    next_batch = _cycle(batches)

    def step():
        x = next_batch()
        with gm:
            z = model.encoder(x)
            b, _, h, w = z.shape
            flat = F.reshape(F.transpose(z, (0, 2, 3, 1)), (b * h * w, d))
            fd = flat.detach()
            dist = (F.sum(fd * fd, axis=1, keepdims=True) - 2.0 * F.matmul(fd, codebook,
                                                                            transpose_b=True)
                    + F.sum(codebook * codebook, axis=1))
            idx = F.argmin(dist, axis=1)
            zq = F.transpose(F.reshape(F.embedding(idx, codebook), (b, h, w, d)), (0, 3, 1, 2))
            recon = model.decode(z + (zq - z).detach())
            loss = F.mse_loss(recon, x) + 0.25 * F.mse_loss(z, zq.detach())
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        onehot = F.one_hot(idx, k)
        counts_ema[...] = decay * counts_ema + (1 - decay) * F.sum(onehot, axis=0)
        sums_ema[...] = decay * sums_ema + (1 - decay) * F.matmul(F.transpose(onehot, (1, 0)),
                                                                  fd)
        n = F.sum(counts_ema)
        smoothed = (counts_ema + eps) / (n + k * eps) * n
        codebook[...] = sums_ema / F.expand_dims(smoothed, 1)
        dead = counts_ema.numpy() < 0.05
        if dead.any():
            picks = imp.Tensor(rng.integers(0, b * h * w, k).astype(np.int32))
            mask = imp.Tensor(dead[:, None])
            codebook[...] = F.where(mask, fd[picks], codebook)
            sums_ema[...] = F.where(mask, fd[picks], sums_ema)
            counts_ema[...] = F.where(imp.Tensor(dead), 1.0, counts_ema)
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 2. SwAV (Caron et al.): per step two global crops (`size` pixels, from images a quarter
#    larger) and two small crops (half the size) of the batch, each crop at a random offset
#    of its own, the images flipped and colour-jittered at random; a conv encoder with
#    global average pooling and an MLP projection, L2-normalised, scored against `protos`
#    prototypes (a bias-free linear layer whose rows are renormalised in place before each
#    step); codes for the global crops by three Sinkhorn-Knopp iterations on the detached
#    scores (eps 0.05); every other crop predicts each global crop's codes (softmax at
#    temperature 0.1); the prototypes' gradients dropped for the first `freeze` steps; SGD
#    with a warm-up and cosine decay.
class SwAVNet(nn.Module):
    def __init__(self, ch, hidden, dim, protos):
        super().__init__()
        self.body = nn.Sequential(conv_bn_relu(3, ch), nn.MaxPool2d(2), conv_bn_relu(ch, 2 * ch),
                                  nn.MaxPool2d(2), conv_bn_relu(2 * ch, 4 * ch))
        self.proj = nn.Sequential(nn.Linear(4 * ch, hidden), BatchNorm1d(hidden), nn.ReLU(),
                                  nn.Linear(hidden, dim))
        self.prototypes = nn.Linear(dim, protos, bias=False)

    def forward(self, x):
        return self.prototypes(l2_normalize(self.proj(global_average(self.body(x)))))


def _sinkhorn(scores, eps=0.05, iters=3):
    """SwAV's distributed_sinkhorn on one worker: equal-partition soft codes (B, K)."""
    q = F.exp(scores / eps)
    q = q / F.sum(q)
    b, k = q.shape
    for _ in range(iters):
        q = q / (F.sum(q, axis=0, keepdims=True) * k)
        q = q / (F.sum(q, axis=1, keepdims=True) * b)
    return q * b


def _swav(c):
    rng = np.random.default_rng(223)
    size, big = c["size"], c["size"] + c["size"] // 4
    images = [imp.Tensor(_scenes(rng, c["batch"], big)) for _ in range(4)]
    model = SwAVNet(c["ch"], c["hidden"], c["dim"], c["protos"])
    params = model.parameters()
    gm, opt = GradManager().attach(params), optim.SGD(params, 0.05, momentum=0.9)
    schedule = CosineAnnealingLR(opt, 500, warmup_steps=10)
    protos = model.prototypes.weight
    next_images = _cycle(images)
    state = {"n": 0}

    def crop(x, s):
        i, j = rng.integers(0, big - s + 1, 2)
        v = _flip_some(rng, x[:, :, i:i + s, j:j + s])
        gain = imp.random.uniform(0.7, 1.3, size=(x.shape[0], 1, 1, 1))
        return v * gain + imp.random.uniform(-0.2, 0.2, size=(x.shape[0], 3, 1, 1))

    def step():
        x = next_images()
        protos[...] = l2_normalize(protos, axis=1)
        with gm:
            views = [F.concat([crop(x, size), crop(x, size)]),
                     F.concat([crop(x, size // 2), crop(x, size // 2)])]
            scores = F.split(F.concat([model(v) for v in views]), 4)
            loss = 0.0
            for i in range(2):
                q = _sinkhorn(scores[i].detach())
                for j in range(4):
                    if j != i:
                        loss = loss - F.mean(F.sum(q * F.log_softmax(scores[j] / 0.1, axis=1),
                                                   axis=1))
            loss = loss / 6
            gm.backward(loss)
        if state["n"] < c["freeze"]:
            protos.grad = None
        state["n"] += 1
        opt.step()
        opt.clear_grad()
        schedule.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 3. ShuffleNet v2 (Ma et al.) for small images: a 3x3 stem, three stages of units (the
#    first of each downsamples with both branches, the others split the channels in two
#    and transform one half: 1x1 conv, 3x3 depthwise conv, 1x1 conv, batch norm after
#    each), the halves concatenated and shuffled (reshape, transpose, reshape), a 1x1 conv,
#    global pooling and a classifier; the plain training step on the clustered task, SGD
#    with momentum.
def _channel_shuffle(x, groups=2):
    """ShuffleNet's channel shuffle (torchvision's channel_shuffle)."""
    b, ch, h, w = x.shape
    x = F.reshape(x, (b, groups, ch // groups, h, w))
    return F.reshape(F.transpose(x, (0, 2, 1, 3, 4)), (b, ch, h, w))


def _dw_bn(ch, stride):
    return nn.Sequential(nn.Conv2d(ch, ch, 3, stride=stride, padding=1, groups=ch, bias=False),
                         nn.BatchNorm2d(ch))


def _pw_bn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class ShuffleUnit(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        half = cout // 2
        self.left = (nn.Sequential(_dw_bn(cin, 2), _pw_bn_relu(cin, half)) if stride == 2
                     else None)
        self.right = nn.Sequential(_pw_bn_relu(cin if stride == 2 else half, half),
                                   _dw_bn(half, stride), _pw_bn_relu(half, half))

    def forward(self, x):
        if self.stride == 2:
            out = F.concat([self.left(x), self.right(x)], axis=1)
        else:
            keep, change = F.split(x, 2, axis=1)
            out = F.concat([keep, self.right(change)], axis=1)
        return _channel_shuffle(out)


class ShuffleNetV2(nn.Module):
    def __init__(self, widths, repeats, classes=10):
        super().__init__()
        self.stem = conv_bn_relu(3, widths[0])
        units = []
        for cin, cout, n in zip(widths, widths[1:], repeats):
            units += [ShuffleUnit(cin, cout, 2)] + [ShuffleUnit(cout, cout, 1)
                                                    for _ in range(n - 1)]
        self.units = nn.Sequential(*units)
        self.last = _pw_bn_relu(widths[-1], 4 * widths[-1])
        self.fc = nn.Linear(4 * widths[-1], classes)

    def forward(self, x):
        return self.fc(global_average(self.last(self.units(self.stem(x)))))


def _shufflenet(c):
    w = c["width"]
    model = ShuffleNetV2([w, 2 * w, 4 * w, 8 * w], [2, c["depth"], 2])
    return model, (3, c["size"], c["size"]), "sgd", 0.05


# ---------------------------------------------------------------------------------------
# 4. DeepFM (Guo et al.) for click-through rates: `fields` categorical fields of `vocab`
#    values each in one embedding table (offsets per field), a first-order weight per
#    value, the factorisation machine's pairwise term 0.5 ((sum v)^2 - sum v^2), and a deep
#    MLP with dropout over the concatenated embeddings, summed into one logit; binary cross
#    entropy plus a small L2 on the embeddings looked up; Adam. Clicks drawn from a hidden
#    FM of its own (a few interacting fields); eight batches cycle.
class DeepFM(nn.Module):
    def __init__(self, fields, vocab, dim, hidden):
        super().__init__()
        self.offsets = imp.Tensor((np.arange(fields) * vocab).astype(np.int32))
        self.embed = nn.Embedding(fields * vocab, dim)
        self.first = nn.Embedding(fields * vocab, 1)
        for table in (self.embed, self.first):             # nn.init.normal_(std=0.01)
            table.weight[...] = imp.random.normal(0.0, 0.01, size=table.weight.shape)
        self.bias = nn.Parameter(np.zeros((1,), np.float32))
        self.deep = nn.Sequential(nn.Linear(fields * dim, hidden), nn.ReLU(), nn.Dropout(0.2),
                                  nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(0.2),
                                  nn.Linear(hidden, 1))

    def forward(self, x):
        ids = x + self.offsets
        v = self.embed(ids)                                         # (b, fields, dim)
        first = F.sum(F.squeeze(self.first(ids), 2), axis=1)
        s = F.sum(v, axis=1)
        fm = 0.5 * F.sum(s * s - F.sum(v * v, axis=1), axis=1)
        deep = F.squeeze(self.deep(F.reshape(v, (v.shape[0], -1))), 1)
        return self.bias + first + fm + deep, v


def _clicks(rng, n, fields, vocab):
    true_v = rng.normal(0, 0.6, (fields, vocab, 4)) * (rng.random((fields, 1, 1)) < 0.5)
    true_w = rng.normal(0, 0.5, (fields, vocab))
    zipf = 1.0 / np.arange(1, vocab + 1)
    x = rng.choice(vocab, (n, fields), p=zipf / zipf.sum())
    v = true_v[np.arange(fields), x]                            # (n, fields, 4)
    s = v.sum(1)
    logit = 0.5 * ((s * s).sum(1) - (v * v).sum((1, 2))) + true_w[np.arange(fields), x].sum(1)
    y = rng.random(n) < 1.0 / (1.0 + np.exp(-(logit - np.median(logit))))
    return x.astype(np.int32), y.astype(np.float32)


def _deepfm(c):
    rng = np.random.default_rng(227)
    b, fields, vocab = c["batch"], c["fields"], c["vocab"]
    x, y = _clicks(rng, 8 * b, fields, vocab)
    batches = [(imp.Tensor(x[i * b:(i + 1) * b]), imp.Tensor(y[i * b:(i + 1) * b]))
               for i in range(8)]
    model = DeepFM(fields, vocab, c["dim"], c["hidden"])
    next_batch = _cycle(batches)

    def loss_of():
        xb, yb = next_batch()
        logits, v = model(xb)
        return bce_with_logits(logits, yb) + 1e-5 * F.sum(v * v) / b
    return stepper(model.parameters(), optim.Adam(model.parameters(), 1e-3), loss_of)


# ---------------------------------------------------------------------------------------
# 5. PPO (Schulman et al.) on `envs` vectorised CartPoles (the classic control equations,
#    Euler steps of 0.02 s, done past 12 degrees, 2.4 m or 200 moves, restarted at once):
#    separate tanh MLPs for the policy and the value; each step a rollout of `horizon`
#    moves outside the recording (actions by Gumbel-max, read back, with their log-
#    probabilities and values), GAE (gamma 0.99, lambda 0.95) in numpy, normalised
#    advantages; then up to `epochs` epochs of shuffled minibatches, each its own backward
#    pass of the clipped surrogate (0.2), half the value loss and an entropy bonus,
#    gradients clipped to 0.5, Adam; the epochs stop early when the approximate KL to the
#    rollout's policy (read back by float()) passes 0.03. The step returns the rollout's
#    rate of falls (episodes ended per move, 200-move successes not counted), which falls
#    as the agent learns (PPO's loss is no measure of progress).
class CartPole:
    def __init__(self, rng, n):
        self.rng, self.n = rng, n
        self.s = rng.uniform(-0.05, 0.05, (n, 4))
        self.t = np.zeros(n, np.int64)

    def step(self, actions):
        """(rewards, fell, done) after `actions` in {0, 1}; fallen poles restart."""
        x, x_dot, theta, theta_dot = self.s.T
        force = np.where(actions == 1, 10.0, -10.0)
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.s = np.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc,
                           theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc], axis=1)
        self.t += 1
        fell = (np.abs(self.s[:, 0]) > 2.4) | (np.abs(self.s[:, 2]) > 12 * math.pi / 180)
        done = fell | (self.t >= 200)
        self.s[done] = self.rng.uniform(-0.05, 0.05, (int(done.sum()), 4))
        self.t[done] = 0
        return np.ones(self.n, np.float32), fell, done


def _ppo(c):
    rng = np.random.default_rng(229)
    env, hidden, horizon = CartPole(rng, c["envs"]), c["hidden"], c["horizon"]
    policy, value = mlp([4, hidden, hidden, 2], nn.Tanh), mlp([4, hidden, hidden, 1], nn.Tanh)
    params = policy.parameters() + value.parameters()
    gm, opt = GradManager().attach(params), optim.Adam(params, c["lr"])
    gamma, lam, clip = 0.99, 0.95, 0.2

    def step():
        obs, acts, logps, vals, rews, dones, falls = [], [], [], [], [], [], 0
        for _ in range(horizon):
            o = imp.Tensor(env.s.astype(np.float32))
            logits = policy(o)
            a = F.argmax(logits + _gumbel(logits.shape), axis=1)
            log_p = F.sum(F.log_softmax(logits, axis=1) * F.one_hot(a, 2), axis=1)
            obs.append(env.s.astype(np.float32))
            acts.append(a.numpy())
            logps.append(log_p.numpy())
            vals.append(F.squeeze(value(o), 1).numpy())
            r, fell, done = env.step(acts[-1])
            rews.append(r)
            dones.append(done)
            falls += int(fell.sum())
        last = F.squeeze(value(imp.Tensor(env.s.astype(np.float32))), 1).numpy()
        adv, gae = np.zeros((horizon, env.n), np.float32), 0.0
        for t in reversed(range(horizon)):
            following = last if t == horizon - 1 else vals[t + 1]
            delta = rews[t] + gamma * following * (1 - dones[t]) - vals[t]
            gae = delta + gamma * lam * (1 - dones[t]) * gae
            adv[t] = gae
        ret = (adv + np.stack(vals)).reshape(-1)
        adv = adv.reshape(-1)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        obs, acts, logps = np.concatenate(obs), np.concatenate(acts), np.concatenate(logps)
        size = len(adv) // c["minibatches"]
        for _ in range(c["epochs"]):
            order = rng.permutation(len(adv))
            kls = []
            for m in range(c["minibatches"]):
                i = order[m * size:(m + 1) * size]
                o, old = imp.Tensor(obs[i]), imp.Tensor(logps[i])
                a, ad = imp.Tensor(acts[i].astype(np.int32)), imp.Tensor(adv[i])
                with gm:
                    log_all = F.log_softmax(policy(o), axis=1)
                    log_p = F.sum(log_all * F.one_hot(a, 2), axis=1)
                    ratio = F.exp(log_p - old)
                    surrogate = F.minimum(ratio * ad, F.clip(ratio, 1 - clip, 1 + clip) * ad)
                    v_loss = F.mse_loss(F.squeeze(value(o), 1), imp.Tensor(ret[i]))
                    entropy = -F.mean(F.sum(F.exp(log_all) * log_all, axis=1))
                    loss = -F.mean(surrogate) + 0.5 * v_loss - 0.01 * entropy
                    gm.backward(loss)
                optim.clip_grad_norm(params, 0.5)
                opt.step()
                opt.clear_grad()
                kls.append(float(F.mean(old - log_p)))
            if np.mean(kls) > 0.03:
                break
        return imp.Tensor(np.float32(falls / (horizon * env.n)))
    return step


# ---------------------------------------------------------------------------------------
# 6. SchNet (Schütt et al.) on made-up molecules of `atoms` atoms of four elements
#    (positions at least 0.9 apart; the energy a sum of Morse pair potentials whose depth
#    and length depend on the elements, standardised): atom-type embeddings, interatomic
#    distances expanded in `rbf` Gaussians (gamma 10) inside the recording, `blocks`
#    interaction blocks (a filter network of the expansion times a cosine cutoff of 5,
#    the continuous-filter convolution summing the neighbours' features times their
#    filters, an atom-wise MLP with shifted softplus, a residual), an atom-wise readout
#    summed into the energy; MSE; Adam, the rate halved every 200 steps.
class _SSP(nn.Module):
    """The shifted softplus as a module, for nn.Sequential."""

    def forward(self, x):
        return _shifted_softplus(x)


class Interaction(nn.Module):
    def __init__(self, features, rbf):
        super().__init__()
        self.filter = nn.Sequential(nn.Linear(rbf, features), _SSP(),
                                    nn.Linear(features, features))
        self.in2f = nn.Linear(features, features, bias=False)
        self.f2out = nn.Linear(features, features)
        self.dense = nn.Linear(features, features)

    def forward(self, x, expansion, cutoff):
        w = self.filter(expansion) * F.expand_dims(cutoff, 3)            # (b, n, n, f)
        y = F.sum(w * F.expand_dims(self.in2f(x), 1), axis=2)            # (b, n, f)
        return x + self.dense(_shifted_softplus(self.f2out(y)))


class SchNet(nn.Module):
    def __init__(self, features, rbf, blocks, elements=4, cutoff=5.0):
        super().__init__()
        self.cutoff = cutoff
        self.centres = imp.Tensor(np.linspace(0.0, cutoff, rbf).astype(np.float32))
        self.embed = nn.Embedding(elements, features)
        self.blocks = nn.ModuleList([Interaction(features, rbf) for _ in range(blocks)])
        self.readout = nn.Sequential(nn.Linear(features, features // 2), _SSP(),
                                     nn.Linear(features // 2, 1))

    def forward(self, z, pos):
        n = pos.shape[1]
        diff = F.expand_dims(pos, 2) - F.expand_dims(pos, 1)
        d = F.sqrt(F.sum(diff * diff, axis=3) + 1e-9)                     # (b, n, n)
        gap = F.expand_dims(d, 3) - self.centres
        expansion = F.exp(-10.0 * gap * gap)
        others = imp.Tensor(1.0 - np.eye(n, dtype=np.float32))
        cutoff = (0.5 * (F.cos(d * (math.pi / self.cutoff)) + 1.0)
                  * F.less(d, self.cutoff).astype("float32") * others)
        x = self.embed(z)
        for block in self.blocks:
            x = block(x, expansion, cutoff)
        return F.sum(F.squeeze(self.readout(x), 2), axis=1)


def _molecules(rng, n, atoms):
    side = 1.1 * atoms ** (1 / 3) + 1.0
    pos = np.zeros((n, atoms, 3))
    for m in range(n):
        k = 0
        while k < atoms:
            p = rng.uniform(0, side, 3)
            if k == 0 or np.min(np.linalg.norm(pos[m, :k] - p, axis=1)) > 0.9:
                pos[m, k] = p
                k += 1
    z = rng.integers(0, 4, (n, atoms))
    depth = np.array([0.3, 0.5, 0.8, 1.0])
    length = np.array([1.0, 1.2, 1.4, 1.6])
    d = np.linalg.norm(pos[:, :, None] - pos[:, None], axis=3)
    dd = np.sqrt(depth[z][:, :, None] * depth[z][:, None])
    r0 = 0.5 * (length[z][:, :, None] + length[z][:, None])
    morse = dd * ((1 - np.exp(-1.5 * (d - r0))) ** 2 - 1)
    energy = np.triu(morse, 1).sum((1, 2))
    return z.astype(np.int32), pos.astype(np.float32), energy


def _schnet(c):
    rng = np.random.default_rng(233)
    b = c["batch"]
    z, pos, energy = _molecules(rng, 4 * b, c["atoms"])
    energy = ((energy - energy.mean()) / energy.std()).astype(np.float32)
    batches = [tuple(imp.Tensor(a[i * b:(i + 1) * b]) for a in (z, pos, energy))
               for i in range(4)]
    model = SchNet(c["features"], c["rbf"], c["blocks"])
    opt = optim.Adam(model.parameters(), 1e-3)
    schedule = StepLR(opt, 200, 0.5)
    next_batch = _cycle(batches)

    def loss_of():
        zb, pb, eb = next_batch()
        return F.mse_loss(model(zb, pb), eb)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 7. TabNet (Arik and Pfister) on a synthetic tabular task whose useful features depend on
#    the sample (the paper's Syn4-like: the sign of the last feature picks which four of
#    the others decide the label): batch norm of the inputs, then `steps` decision steps,
#    each an attentive transformer (a linear layer and batch norm of the previous step's
#    attention features, times the prior of unused features, through a sparsemax) whose
#    mask selects the features for a feature transformer (two GLU layers shared by all
#    steps, two of the step's own, residuals scaled by sqrt(1/2)); the decision outputs'
#    ReLUs summed into a classifier; cross entropy plus 1e-3 times the masks' entropy;
#    Adam, the rate decayed by 0.9 every 50 steps. Eight batches cycle.
class GLULayer(nn.Module):
    def __init__(self, cin, cout, shared=None):
        super().__init__()
        self.fc = shared if shared is not None else nn.Linear(cin, 2 * cout, bias=False)
        self.bn = BatchNorm1d(2 * cout)

    def forward(self, x):
        return _glu(self.bn(self.fc(x)))


class FeatureTransformer(nn.Module):
    def __init__(self, cin, cout, shared):
        super().__init__()
        self.layers = nn.ModuleList([GLULayer(cin, cout, shared[0]),
                                     GLULayer(cout, cout, shared[1]),
                                     GLULayer(cout, cout), GLULayer(cout, cout)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) if i == 0 else (x + layer(x)) * math.sqrt(0.5)
        return x


class TabNet(nn.Module):
    def __init__(self, features, n_d, n_a, steps, classes=2, gamma=1.3):
        super().__init__()
        self.n_d, self.steps, self.gamma = n_d, steps, gamma
        self.bn = BatchNorm1d(features)
        shared = nn.ModuleList([nn.Linear(features, 2 * (n_d + n_a), bias=False),
                                nn.Linear(n_d + n_a, 2 * (n_d + n_a), bias=False)])
        self.shared = shared
        self.initial = FeatureTransformer(features, n_d + n_a, shared)
        self.transformers = nn.ModuleList([FeatureTransformer(features, n_d + n_a, shared)
                                           for _ in range(steps)])
        self.attentive = nn.ModuleList([nn.Sequential(nn.Linear(n_a, features, bias=False),
                                                      BatchNorm1d(features))
                                        for _ in range(steps)])
        self.head = nn.Linear(n_d, classes)

    def forward(self, x):
        x = self.bn(x)
        prior = F.ones_like(x)
        att = self.initial(x)[:, self.n_d:]
        out, entropy = 0.0, 0.0
        for attentive, transformer in zip(self.attentive, self.transformers):
            mask = _sparsemax(attentive(att) * prior)
            prior = prior * (self.gamma - mask)
            entropy = entropy + F.mean(F.sum(-mask * F.log(mask + 1e-10), axis=1))
            h = transformer(mask * x)
            out = out + F.relu(h[:, :self.n_d])
            att = h[:, self.n_d:]
        return self.head(out), entropy / self.steps


def _syn4(rng, n, features):
    x = rng.standard_normal((n, features)).astype(np.float32)
    first = x[:, 0] * x[:, 1] + np.abs(x[:, 2]) - x[:, 3] ** 2
    second = np.sin(2 * x[:, 4]) + x[:, 5] - np.abs(x[:, 6] * x[:, 7])
    score = np.where(x[:, -1] > 0, first, second)
    return x, (score > np.median(score)).astype(np.int32)


def _tabnet(c):
    rng = np.random.default_rng(239)
    b = c["batch"]
    x, y = _syn4(rng, 8 * b, c["features"])
    batches = [(imp.Tensor(x[i * b:(i + 1) * b]), imp.Tensor(y[i * b:(i + 1) * b]))
               for i in range(8)]
    model = TabNet(c["features"], c["n_d"], c["n_d"], c["steps"])
    opt = optim.Adam(model.parameters(), 2e-2)
    schedule = StepLR(opt, 50, 0.9)
    next_batch = _cycle(batches)

    def loss_of():
        xb, yb = next_batch()
        logits, entropy = model(xb)
        return F.cross_entropy(logits, yb) + 1e-3 * entropy
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 8. CycleGAN (Zhu et al.) between unpaired scenes and scenes with their colour channels
#    rotated and posterised: two ResNet generators (reflection-padded 7x7 conv, two strided
#    convs, `blocks` residual blocks, nearest upsampling and convs back, tanh; instance
#    norm throughout), two PatchGAN discriminators (4x4 convs, leaky ReLU, a map of
#    logits); least-squares GAN losses, cycle losses (weight 10) and identity losses
#    (5); per step one backward pass for both generators (the discriminators not
#    attached), then one for both discriminators on the real images and on fakes drawn
#    from a pool of 50 earlier fakes half the time (Python's choice); an Adam for each
#    pair (0.5, 0.999). The step returns the generators' loss.
class CycleResBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(ch, ch, 3), nn.Conv2d(ch, ch, 3)

    def forward(self, x):
        h = F.relu(_instance_norm(self.conv1(_reflection_pad(x, 1))))
        return x + _instance_norm(self.conv2(_reflection_pad(h, 1)))


class CycleGenerator(nn.Module):
    def __init__(self, ch, blocks):
        super().__init__()
        self.first = nn.Conv2d(3, ch, 7)
        self.down = nn.ModuleList([nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1),
                                   nn.Conv2d(2 * ch, 4 * ch, 3, stride=2, padding=1)])
        self.blocks = nn.Sequential(*[CycleResBlock(4 * ch) for _ in range(blocks)])
        self.up = nn.ModuleList([nn.Conv2d(4 * ch, 2 * ch, 3, padding=1),
                                 nn.Conv2d(2 * ch, ch, 3, padding=1)])
        self.last = nn.Conv2d(ch, 3, 7)

    def forward(self, x):
        h = F.relu(_instance_norm(self.first(_reflection_pad(x, 3))))
        for conv in self.down:
            h = F.relu(_instance_norm(conv(h)))
        h = self.blocks(h)
        for conv in self.up:
            h = F.relu(_instance_norm(conv(upsample_nearest(h))))
        return F.tanh(self.last(_reflection_pad(h, 3)))


class PatchDiscriminator(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(3, ch, 4, stride=2, padding=1),
                                    nn.Conv2d(ch, 2 * ch, 4, stride=2, padding=1),
                                    nn.Conv2d(2 * ch, 4 * ch, 4, padding=1)])
        self.out = nn.Conv2d(4 * ch, 1, 4, padding=1)

    def forward(self, x):
        for i, conv in enumerate(self.convs):
            h = conv(x)
            x = F.leaky_relu(h if i == 0 else _instance_norm(h), 0.2)
        return self.out(x)


class ImagePool:
    """CycleGAN's ImagePool: up to `size` earlier fakes; each new fake goes in, and half
    the time an older one is handed back instead (and replaced)."""

    def __init__(self, rng, size):
        self.rng, self.size, self.images = rng, size, []

    def query(self, fakes):
        out = []
        for f in F.split(fakes.detach(), fakes.shape[0]):
            if len(self.images) < self.size:
                self.images.append(f)
                out.append(f)
            elif self.rng.random() < 0.5:
                i = self.rng.integers(0, self.size)
                out.append(self.images[i])
                self.images[i] = f
            else:
                out.append(f)
        return F.concat(out)


def _cyclegan(c):
    rng = np.random.default_rng(241)
    b, size = c["batch"], c["size"]
    domain_a = [imp.Tensor(2 * _scenes(rng, b, size) - 1) for _ in range(4)]
    domain_b = [imp.Tensor(2 * np.round(3 * _scenes(rng, b, size)[:, [1, 2, 0]]) / 3 - 1)
                for _ in range(4)]
    g_ab, g_ba = CycleGenerator(c["ch"], c["blocks"]), CycleGenerator(c["ch"], c["blocks"])
    d_a, d_b = PatchDiscriminator(c["ch"]), PatchDiscriminator(c["ch"])
    g_params = g_ab.parameters() + g_ba.parameters()
    d_params = d_a.parameters() + d_b.parameters()
    gm_g, gm_d = GradManager().attach(g_params), GradManager().attach(d_params)
    opt_g = optim.Adam(g_params, 2e-4, betas=(0.5, 0.999))
    opt_d = optim.Adam(d_params, 2e-4, betas=(0.5, 0.999))
    pool_a, pool_b = ImagePool(rng, 50), ImagePool(rng, 50)
    next_a, next_b = _cycle(domain_a), _cycle(domain_b)

    def gan(pred, real):
        return F.mse_loss(pred, F.full_like(pred, 1.0 if real else 0.0))

    def step():
        a, bb = next_a(), next_b()
        with gm_g:
            fake_b, fake_a = g_ab(a), g_ba(bb)
            cycle = _l1(g_ba(fake_b), a) + _l1(g_ab(fake_a), bb)
            identity = _l1(g_ab(bb), bb) + _l1(g_ba(a), a)
            loss_g = gan(d_b(fake_b), True) + gan(d_a(fake_a), True) + 10 * cycle + 5 * identity
            gm_g.backward(loss_g)
        opt_g.step()
        opt_g.clear_grad()
        with gm_d:
            loss_d = 0.5 * (gan(d_a(a), True) + gan(d_a(pool_a.query(fake_a)), False)
                            + gan(d_b(bb), True) + gan(d_b(pool_b.query(fake_b)), False))
            gm_d.backward(loss_d)
        opt_d.step()
        opt_d.clear_grad()
        return loss_g
    return step


# ---------------------------------------------------------------------------------------
# 9. A Longformer (Beltagy et al.) classifier of long sequences: token and learned
#    position embeddings, `layers` pre-norm blocks whose attention is a sliding window
#    (each token sees `window` tokens either side: queries in chunks of `window`, keys and
#    values of the chunk and its two neighbours concatenated, a band mask) plus the global
#    CLS token (every token attends to it; it attends to every token with projections of
#    its own), a GELU MLP; the CLS output classified. The label: which of four signal
#    tokens is the most frequent; AdamW, a warm-up and cosine decay.
class SlidingWindowAttention(nn.Module):
    def __init__(self, dim, heads, window):
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv = nn.Linear(dim, 3 * dim)
        self.global_qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def band(self, chunks):
        """(chunks, w, 3w) additive mask: key j of the three chunks is seen by query i when
        |i - (j - w)| <= w, it is no padding and not the CLS (attended separately)."""
        w = self.window
        i, j = np.arange(w)[:, None], np.arange(3 * w)[None, :]
        pos = np.arange(chunks)[:, None, None] * w + j[None] - w          # key positions
        ok = (np.abs(i - (j - w))[None] <= w) & (pos >= 1) & (pos < chunks * w)
        return imp.Tensor(np.where(ok, 0.0, -1e30).astype(np.float32))

    def forward(self, x):
        b, n, dim = x.shape
        w, h = self.window, self.heads
        nc, e = n // w, dim // h
        q, k, v = (split_heads(t, h) for t in F.split(self.qkv(x), 3, axis=2))
        q = q * (1.0 / math.sqrt(e))

        def windows(t):
            t = F.pad(F.reshape(t, (b, h, nc, w, e)), [0, 0, 0, 0, 1, 1])
            return F.concat([t[:, :, :-2], t[:, :, 1:-1], t[:, :, 2:]], axis=3)
        qc = F.reshape(q, (b, h, nc, w, e))
        local = F.matmul(qc, windows(k), transpose_b=True) + self.band(nc)
        to_cls = F.matmul(qc, F.expand_dims(k[:, :, :1], 2), transpose_b=True)
        p = F.softmax(F.concat([local, to_cls], axis=4), axis=4)
        out = (F.matmul(p[..., :3 * w], windows(v))
               + p[..., 3 * w:] * F.expand_dims(v[:, :, :1], 2))
        out = merge_heads(F.reshape(out, (b, h, n, e)))
        gq, gk, gv = (split_heads(t, h) for t in F.split(self.global_qkv(x), 3, axis=2))
        scores = F.matmul(gq[:, :, :1], gk, transpose_b=True) * (1.0 / math.sqrt(e))
        cls = merge_heads(F.matmul(F.softmax(scores, axis=-1), gv))
        return self.out(F.concat([cls, out[:, 1:]], axis=1))


class LongformerBlock(nn.Module):
    def __init__(self, dim, heads, window):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = SlidingWindowAttention(dim, heads, window)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class Longformer(nn.Module):
    def __init__(self, vocab, length, dim, heads, window, layers, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(0.02 * np.random.default_rng(0).standard_normal(
            (length, dim)).astype(np.float32))
        self.blocks = nn.Sequential(*[LongformerBlock(dim, heads, window)
                                      for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        x = self.blocks(self.embed(tokens) + self.pos)
        return self.head(self.norm(x)[:, 0])


def _signal_sequences(rng, n, length, vocab):
    """Token 0 the CLS, 1-4 the signals (each sequence's counts of them differ), the rest
    filler; the label the most frequent signal."""
    tokens = rng.integers(5, vocab, (n, length))
    labels = rng.integers(0, 4, n)
    for i in range(n):
        counts = rng.permutation(4) + 1
        counts[labels[i]], counts[np.argmax(counts)] = counts.max(), counts[labels[i]]
        places = rng.choice(np.arange(1, length), counts.sum(), replace=False)
        tokens[i, places] = np.repeat(np.arange(1, 5), counts)
    tokens[:, 0] = 0
    return imp.Tensor(tokens.astype(np.int32)), imp.Tensor(labels.astype(np.int32))


def _longformer(c):
    rng = np.random.default_rng(251)
    batches = [_signal_sequences(rng, c["batch"], c["length"], c["vocab"]) for _ in range(4)]
    model = Longformer(c["vocab"], c["length"], c["dim"], c["heads"], c["window"], c["layers"])
    opt = optim.AdamW(model.parameters(), 1e-3)
    schedule = CosineAnnealingLR(opt, 1000, warmup_steps=10)
    next_batch = _cycle(batches)

    def loss_of():
        tokens, labels = next_batch()
        return F.cross_entropy(model(tokens), labels)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 10. Kim et al.'s character-aware language model: each word's characters (start and end
#     marks, padded) looked up in a table of spellings by the word ids, embedded, convs of
#     widths 1 to `widths` (25 filters a width, (1, k) kernels over the characters), tanh,
#     a max over the characters, one highway layer, a two-layer LSTM with dropout, a
#     softmax over the words; truncated BPTT over a stream cut into `batch` rows, the
#     state carried (detached) between steps; plain SGD at rate 1, gradients clipped to 5.
#     The text: a bigram language over made-up words (each word a few likely successors).
class CharAwareLM(nn.Module):
    def __init__(self, spellings, chars, char_dim, widths, hidden, layers=2):
        super().__init__()
        self.spellings = spellings
        self.char_embed = nn.Embedding(chars, char_dim)
        self.convs = nn.ModuleList([nn.Conv2d(char_dim, 25 * k, (1, k))
                                    for k in range(1, widths + 1)])
        width = 25 * widths * (widths + 1) // 2
        self.highway = Highway(width, 1)
        self.cells = nn.ModuleList([LSTMCell(width if i == 0 else hidden, hidden)
                                    for i in range(layers)])
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(hidden, spellings.shape[0])

    def forward(self, words, state):
        b, t = words.shape
        chars = self.char_embed(self.spellings[words])                  # (b, t, len, dim)
        chars = F.expand_dims(F.transpose(F.reshape(chars, (b * t,) + chars.shape[2:]),
                                          (0, 2, 1)), 2)                  # (bt, dim, 1, len)
        x = F.concat([F.max(F.tanh(conv(chars)), axis=(2, 3)) for conv in self.convs], axis=1)
        x = F.reshape(self.highway(x), (b, t, -1))
        carried = []
        for cell, (h, c) in zip(self.cells, state):
            outs = []
            for gx in cell.project(self.drop(x)):
                h, c = cell.step(gx, h, c)
                outs.append(h)
            carried.append((h, c))
            x = F.stack(outs, axis=1)
        return self.head(self.drop(x)), carried


def _bigram_text(rng, words, length, chars, max_len):
    spellings = np.zeros((words, max_len), np.int32)             # 0 pad, 1 start, 2 end
    for w in range(words):
        n = rng.integers(2, max_len - 1)
        spellings[w, :n + 2] = [1] + list(rng.integers(3, chars, n)) + [2]
    following = rng.integers(0, words, (words, 4))
    text = np.zeros(length, np.int64)
    for i in range(1, length):
        text[i] = (following[text[i - 1], rng.integers(0, 4)] if rng.random() < 0.9
                   else rng.integers(0, words))
    return spellings, text


def _charcnn(c):
    rng = np.random.default_rng(257)
    b, t, hidden = c["batch"], c["seq"], c["hidden"]
    chunks = 8
    spellings, text = _bigram_text(rng, c["words"], b * (chunks * t + 1), c["chars"],
                                   c["max_len"])
    streams = text.reshape(b, chunks * t + 1)
    data = [(imp.Tensor(streams[:, k * t:(k + 1) * t].astype(np.int32)),
             imp.Tensor(streams[:, k * t + 1:(k + 1) * t + 1].astype(np.int32)))
            for k in range(chunks)]
    model = CharAwareLM(imp.Tensor(spellings), c["chars"], c["char_dim"], c["widths"], hidden)
    params = model.parameters()
    gm, opt = GradManager().attach(params), optim.SGD(params, 1.0)
    zeros = [(F.zeros((b, hidden)), F.zeros((b, hidden))) for _ in range(2)]
    state = {"k": 0, "hc": zeros}

    def step():
        k = state["k"]
        words, targets = data[k]
        with gm:
            logits, carried = model(words, zeros if k == 0 else state["hc"])
            loss = F.cross_entropy(F.reshape(logits, (b * t, -1)), F.reshape(targets, (b * t,)))
            gm.backward(loss)
        optim.clip_grad_norm(params, 5.0)
        opt.step()
        opt.clear_grad()
        state["hc"] = [(h.detach(), cc.detach()) for h, cc in carried]
        state["k"] = (k + 1) % chunks
        return loss
    return step


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "vqvae": dict(ch=64, dim=32, codes=128, size=64, batch=12),
    "swav": dict(ch=32, hidden=128, dim=64, protos=100, size=32, batch=32, freeze=5),
    "shufflenet": dict(width=24, depth=3, size=32, batch=32),
    "deepfm": dict(fields=24, vocab=1000, dim=16, hidden=400, batch=4096),
    "ppo": dict(envs=64, horizon=64, hidden=64, epochs=4, minibatches=4, lr=3e-4),
    "schnet": dict(features=96, rbf=50, blocks=3, atoms=24, batch=32),
    "tabnet": dict(features=32, n_d=32, steps=4, batch=1024),
    "cyclegan": dict(ch=16, blocks=3, size=64, batch=2),
    "longformer": dict(vocab=500, length=1024, dim=64, heads=4, window=32, layers=2, batch=4),
    "charcnn": dict(words=2000, chars=30, max_len=12, char_dim=15, widths=6, hidden=200,
                    seq=35, batch=20),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "vqvae": dict(ch=8, dim=4, codes=16, size=16, batch=2),
    "swav": dict(ch=4, hidden=16, dim=8, protos=10, size=8, batch=8, freeze=2),
    "shufflenet": dict(width=4, depth=2, size=16, batch=8),
    "deepfm": dict(fields=6, vocab=20, dim=4, hidden=16, batch=64),
    "ppo": dict(envs=8, horizon=16, hidden=16, epochs=3, minibatches=2, lr=3e-3),
    "schnet": dict(features=16, rbf=12, blocks=2, atoms=6, batch=4),
    "tabnet": dict(features=10, n_d=8, steps=3, batch=64),
    "cyclegan": dict(ch=4, blocks=1, size=16, batch=1),
    "longformer": dict(vocab=30, length=32, dim=16, heads=2, window=4, layers=2, batch=4),
    "charcnn": dict(words=60, chars=12, max_len=8, char_dim=6, widths=3, hidden=24, seq=6,
                    batch=4),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps
BUILDERS = {
    "shufflenet": _shufflenet,
}

# name -> config -> step(): models with their own training step
STEPS = {
    "vqvae": _vqvae,
    "swav": _swav,
    "deepfm": _deepfm,
    "ppo": _ppo,
    "schnet": _schnet,
    "tabnet": _tabnet,
    "cyclegan": _cyclegan,
    "longformer": _longformer,
    "charcnn": _charcnn,
}


MODEL_SET = ModelSet(__name__, "tests/twelfth_models.py", CONFIGS, BENCH_SIZES, BUILDERS, STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
