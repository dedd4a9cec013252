"""Ten more models for the memory manager, structurally different from the zoo and
tests/{unseen,fresh,novel,heldout,sixth,seventh,eighth,ninth,tenth,eleventh,twelfth,
thirteenth,fourteenth,fifteenth}_models.py; written after session 58 by a helper that had
not read the memory manager, picked for graph shapes the other sets lack: a Hamiltonian
neural network (the learned energy's gradient with respect to the state from a GradManager
nested in the training recording, three times a leapfrog step through an unrolled rollout,
so that the loss's backward differentiates through thirty-odd backward passes; Adam,
exponential decay), a neural ODE trained by the adjoint method written out by hand (RK4
forward outside any recording, then RK4 backward in time on the state and its adjoint, each
stage a short recording of its own whose backward pass with a given output gradient adds
the parameters' share straight into .grad: no graph longer than one evaluation; Nesterov
SGD, MultiStepLR), a forecaster trained by soft-DTW (the soft minimum's dynamic program run
along the antidiagonals of the cost matrix, a wavefront that reads the two before it, each
antidiagonal's costs gathered by index_select; Adadelta), a ConvLSTM encoder-forecaster on
bouncing squares (convolutions inside the recurrence over space-to-depth frames, the
forecaster started from the encoder's states and fed nothing; RMSprop, clipped), an
attentive neural process on Gaussian-process curves (self- and cross-attention over sets
whose sizes differ from one step to the next, a latent path with a reparameterised sample
and a KL between the target and context posteriors), a differentiable bitonic sorting
network (soft compare-swaps layer by layer, values and the relaxed permutation matrix
mixed with their partners by index_select; AdamW under OneCycleLR), deep-kernel regression
by unrolled conjugate gradients (a learned feature map, an RBF kernel per task, the kernel
matrix read by every one of twenty-odd CG iterations of small vectors; Adagrad), a
recurrent attention model (glimpses at locations sampled each step cut out by F.gather at
indices computed from them at three scales, a plain RNN core, REINFORCE with a learned
baseline beside the classification loss; SGD with momentum, StepLR), sharpness-aware
minimisation of a pre-activation wide ResNet (two forward and backward passes a step, the
parameters moved in place along the normalised gradient between them and moved back
before the update; cosine-annealed SGD) and a ladder network (a noisy and a clean pass of
one encoder, a decoder whose every layer combines the noisy lateral activation with the
layer above, a denoising cost per layer against the clean pass's batch-normalised
activations beside cross entropy on the labelled part of the batch; Adam, LambdaLR).

The set's layout (CONFIGS, BENCH_SIZES, BUILDERS, STEPS) is tests/model_sets.py's
ModelSet's, as in tests/fifteenth_models.py.

Public API only: imperative, F, nn, optim, GradManager, imp.random, imp.lr_scheduler.
"""
import math

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.lr_scheduler import (CosineAnnealingLR, ExponentialLR, LambdaLR, MultiStepLR,
                                     OneCycleLR, StepLR)
from fifteenth_models import _clusters, _step_with_clip
from model_sets import ModelSet, attention, mlp, stepper
from tenth_models import _cycle, _then

BIG = 1e10       # an unreachable cell's soft-DTW cost: finite, so that no inf - inf is NaN


# ---------------------------------------------------------------------------------------
# 1. A Hamiltonian neural network (Greydanus et al.) on a chain of pendulums coupled by
#    springs: an MLP (tanh) gives the energy H(q, p); its gradient with respect to the
#    state, from a GradManager nested in the training recording, gives the learned
#    dynamics (dq/dt = dH/dp, dp/dt = -dH/dq). Two losses: the dynamics against the true
#    time derivatives at states along the true trajectories, and a rollout of `rollout`
#    leapfrog steps of the learned dynamics (three gradient evaluations a step) against the
#    true trajectory; the loss's backward pass differentiates through every one of those
#    gradients (second order). Adam, the rate decayed by 0.99 a step. Trajectories by a
#    fine leapfrog in numpy; four batches cycle.
def _energy_gradient(net, q, p):
    """(dH/dq, dH/dp) at (q, p), differentiable again (second order)."""
    gm = GradManager().attach([q, p])
    with gm:
        gm.backward(F.sum(net(F.concat([q, p], axis=1))))
    dq, dp = q.grad, p.grad
    q.grad = p.grad = None
    return dq, dp


def _pendulum_forces(q, kappa):
    """-dV/dq of the coupled chain: V = sum(1 - cos q) + kappa / 2 sum (q_i+1 - q_i)^2."""
    diff = np.diff(q, axis=1)
    spring = np.zeros_like(q)
    spring[:, :-1] += kappa * diff
    spring[:, 1:] -= kappa * diff
    return -np.sin(q) + spring


def _pendulum_chain(rng, n, bodies, steps, dt, kappa=0.5, fine=10):
    q = rng.uniform(-1.5, 1.5, (n, bodies))
    p = 0.7 * rng.standard_normal((n, bodies))
    qs, ps = [q], [p]
    h = dt / fine
    for _ in range(steps):
        for _ in range(fine):
            p = p + 0.5 * h * _pendulum_forces(q, kappa)
            q = q + h * p
            p = p + 0.5 * h * _pendulum_forces(q, kappa)
        qs.append(q)
        ps.append(p)
    qs, ps = np.stack(qs, axis=1), np.stack(ps, axis=1)              # (n, steps + 1, bodies)
    flat_q, flat_p = qs.reshape(-1, bodies), ps.reshape(-1, bodies)
    pick = rng.choice(len(flat_q), n, replace=False)
    states_q, states_p = flat_q[pick], flat_p[pick]
    dq_dt, dp_dt = states_p, _pendulum_forces(states_q, kappa)

    def tensor(a):
        return imp.Tensor(a.astype(np.float32))
    return (tensor(qs), tensor(ps), tensor(states_q), tensor(states_p), tensor(dq_dt),
            tensor(dp_dt))


def _leapfrog_rollout(net, q, p, dt, steps):
    """The learned dynamics' trajectory: (b, steps, bodies) positions and momenta."""
    qs, ps = [], []
    for _ in range(steps):
        dhdq, _ = _energy_gradient(net, q, p)
        p_half = p - (0.5 * dt) * dhdq
        _, dhdp = _energy_gradient(net, q, p_half)
        q = q + dt * dhdp
        dhdq, _ = _energy_gradient(net, q, p_half)
        p = p_half - (0.5 * dt) * dhdq
        qs.append(q)
        ps.append(p)
    return F.stack(qs, axis=1), F.stack(ps, axis=1)


def _hnn(c):
    rng = np.random.default_rng(701)
    bodies, steps, dt = c["bodies"], c["rollout"], c["dt"]
    batches = [_pendulum_chain(rng, c["batch"], bodies, steps, dt) for _ in range(4)]
    net = mlp([2 * bodies, c["hidden"], c["hidden"], 1], nn.Tanh)
    opt = optim.Adam(net.parameters(), 1e-3)
    schedule = ExponentialLR(opt, 0.99)
    next_batch = _cycle(batches)

    def loss_of():
        qs, ps, sq, sp, dq_dt, dp_dt = next_batch()
        dhdq, dhdp = _energy_gradient(net, sq, sp)
        dynamics = F.mean((dhdp - dq_dt) ** 2) + F.mean((dhdq + dp_dt) ** 2)
        q_path, p_path = _leapfrog_rollout(net, qs[:, 0], ps[:, 0], dt, steps)
        rollout = F.mean((q_path - qs[:, 1:]) ** 2) + F.mean((p_path - ps[:, 1:]) ** 2)
        return dynamics + rollout
    return _then(stepper(net.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 2. A neural ODE trained by the adjoint method (Chen et al.), written out by hand, on
#    three concentric rings in the plane, augmented with zero dimensions (Dupont et al.):
#    z(1) by RK4 from z(0) = [x, 0] outside any recording; a linear head's loss and its
#    gradient a(1) with respect to z(1) from a short recording; then RK4 backward in time
#    on z and its adjoint a (da/dt = -a df/dz), each stage's vector-Jacobian products from
#    a recording of one evaluation of f, whose backward pass with the output gradient
#    (dt / 6) w a (w the stage's RK4 weight) adds the parameters' share of the integral of
#    a df/dtheta straight into their .grad. No graph outlives one evaluation of f. SGD with
#    Nesterov momentum, the rate cut tenfold at steps 100 and 200.
class ODEFunc(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.inp, self.mid = nn.Linear(dim + 1, hidden), nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, dim)

    def forward(self, z, t):
        h = F.tanh(self.inp(F.concat([z, F.full((z.shape[0], 1), t)], axis=1)))
        return self.out(F.tanh(self.mid(h)))


def _rk4_forward(func, z, steps):
    dt, t = 1.0 / steps, 0.0
    for _ in range(steps):
        k1 = func(z, t)
        k2 = func(z + (0.5 * dt) * k1, t + 0.5 * dt)
        k3 = func(z + (0.5 * dt) * k2, t + 0.5 * dt)
        k4 = func(z + dt * k3, t + dt)
        z = z + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
        t += dt
    return z


def _adjoint_stage(func, params, z, a, t, weight):
    """f(z, t) and -a df/dz at one RK4 stage of the backward pass; a (weight x) df/dtheta
    lands in the parameters' .grad."""
    gm = GradManager().attach([z] + params)
    with gm:
        out = func(z, t)
        gm.backward(out, weight * a)
    vjp = z.grad
    z.grad = None
    return out.detach(), vjp * (-1.0 / weight)


def _adjoint_backward(func, params, z, a, steps):
    dt, t = 1.0 / steps, 1.0
    h = -dt
    for _ in range(steps):
        kz1, ka1 = _adjoint_stage(func, params, z, a, t, dt / 6)
        kz2, ka2 = _adjoint_stage(func, params, z + (0.5 * h) * kz1, a + (0.5 * h) * ka1,
                                  t + 0.5 * h, dt / 3)
        kz3, ka3 = _adjoint_stage(func, params, z + (0.5 * h) * kz2, a + (0.5 * h) * ka2,
                                  t + 0.5 * h, dt / 3)
        kz4, ka4 = _adjoint_stage(func, params, z + h * kz3, a + h * ka3, t + h, dt / 6)
        z = z + (h / 6) * (kz1 + 2 * kz2 + 2 * kz3 + kz4)
        a = a + (h / 6) * (ka1 + 2 * ka2 + 2 * ka3 + ka4)
        t += h


def _rings(rng, n, aug):
    labels = rng.integers(0, 3, n)
    radius = 0.5 + labels + 0.25 * rng.standard_normal(n)
    angle = rng.uniform(0, 2 * np.pi, n)
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1) / 2
    z0 = np.concatenate([x, np.zeros((n, aug))], axis=1)
    return imp.Tensor(z0.astype(np.float32)), imp.Tensor(labels.astype(np.int32))


def _adjoint_ode(c):
    rng = np.random.default_rng(703)
    dim, steps = 2 + c["aug"], c["steps"]
    batches = [_rings(rng, c["batch"], c["aug"]) for _ in range(4)]
    func, head = ODEFunc(dim, c["hidden"]), nn.Linear(dim, 3)
    func_params = func.parameters()
    opt = optim.SGD(func_params + head.parameters(), 0.05, momentum=0.9, nesterov=True)
    schedule = MultiStepLR(opt, [100, 200], gamma=0.1)
    next_batch = _cycle(batches)

    def step():
        z0, labels = next_batch()
        z1 = _rk4_forward(func, z0, steps)
        gm = GradManager().attach(head.parameters() + [z1])
        with gm:
            loss = F.cross_entropy(head(z1), labels)
            gm.backward(loss)
        a1 = z1.grad
        z1.grad = None
        _adjoint_backward(func, func_params, z1, a1, steps)
        opt.step()
        opt.clear_grad()
        schedule.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 3. A forecaster trained by soft-DTW (Cuturi & Blondel): pulse trains of random period
#    and phase, their pulses jittered in time; a Conv1d encoder of the history and an MLP
#    giving the whole horizon at once; the loss soft-DTW (gamma 0.1) between forecast and
#    truth, its dynamic program R(i, j) = cost(i, j) + softmin(R(i-1, j-1), R(i-1, j),
#    R(i, j-1)) run one antidiagonal at a time (each from the two before it, shifted by a
#    concat; its costs gathered from the flattened cost matrix by index_select; cells off
#    the matrix masked by where). Adadelta. Four batches cycle.
def _antidiagonals(n, m):
    """Per antidiagonal k = 2 .. n + m of the (n + 1, m + 1) DP table, indexed by the row
    i = 0 .. n: (positions in the flattened (n, m) cost matrix, mask of cells on it)."""
    i = np.arange(n + 1)
    out = []
    for k in range(2, n + m + 1):
        j = k - i
        valid = (i >= 1) & (j >= 1) & (j <= m)
        out.append((imp.Tensor(np.where(valid, (i - 1) * m + j - 1, 0).astype(np.int32)),
                    imp.Tensor(valid)))
    return out


def _soft_dtw(x, y, gamma, diagonals):
    b, n = x.shape
    cost = F.reshape((F.expand_dims(x, 2) - F.expand_dims(y, 1)) ** 2, (b, -1))
    edge = F.full((b, 1), BIG)
    start = np.full(n + 1, BIG, np.float32)
    start[0] = 0.0
    before, last = F.broadcast_to(imp.Tensor(start), (b, n + 1)), F.full((b, n + 1), BIG)
    for index, valid in diagonals:
        diag = F.concat([edge, before[:, :-1]], axis=1)
        up = F.concat([edge, last[:, :-1]], axis=1)
        soft = F.logsumexp(F.stack([diag, up, last], axis=2) * (-1.0 / gamma), axis=2)
        cell = F.index_select(cost, 1, index) - gamma * soft
        before, last = last, F.where(valid, cell, F.full_like(cell, BIG))
    return last[:, n]


def _pulse_trains(rng, n, hist, horizon):
    t = np.arange(hist + horizon)
    period = rng.uniform(7, 15, n)
    phase = rng.uniform(0, 15, n)
    out = 0.1 * rng.standard_normal((n, hist + horizon))
    for s in range(n):
        for centre in np.arange(-phase[s], hist + horizon + 3, period[s]):
            centre += rng.normal(0, 0.8)
            out[s] += np.exp(-0.5 * ((t - centre) / 1.2) ** 2)
    out = out.astype(np.float32)
    return imp.Tensor(out[:, None, :hist]), imp.Tensor(out[:, hist:])


def _soft_dtw_forecast(c):
    rng = np.random.default_rng(705)
    hist, horizon, ch = c["hist"], c["horizon"], c["ch"]
    batches = [_pulse_trains(rng, c["batch"], hist, horizon) for _ in range(4)]
    model = nn.Sequential(
        nn.Conv1d(1, ch, 5, padding=2), nn.ReLU(),
        nn.Conv1d(ch, ch, 5, stride=2, padding=2), nn.ReLU(),
        nn.Conv1d(ch, ch, 5, stride=2, padding=2), nn.ReLU(), nn.Flatten(),
        mlp([ch * (-(-hist // 4)), c["hidden"], horizon]))
    diagonals = _antidiagonals(horizon, horizon)
    opt = optim.Adadelta(model.parameters(), 1.0)
    next_batch = _cycle(batches)

    def loss_of():
        past, future = next_batch()
        return F.mean(_soft_dtw(model(past), future, 0.1, diagonals)) / horizon
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 4. A ConvLSTM encoder-forecaster (Shi et al.) on bouncing squares: frames to half
#    resolution by space-to-depth (pixel_unshuffle), two ConvLSTM layers (one convolution
#    over the input and hidden state gives the four gates) read `past` frames; the
#    forecaster's two layers start from the encoder's last states and get no input, the
#    bottom one's hidden state the top one's input; per future frame a 1x1 convolution over
#    both layers' states and pixel_shuffle back to full resolution, BCE against the frame.
#    RMSprop, the gradient clipped. Four batches of videos cycle.
class ConvLSTMCell(nn.Module):
    def __init__(self, cin, hidden, k):
        super().__init__()
        self.hidden = hidden
        self.conv = nn.Conv2d(cin + hidden, 4 * hidden, k, padding=k // 2)

    def forward(self, x, state):
        h, c = state
        i, f, g, o = F.split(self.conv(h if x is None else F.concat([x, h], axis=1)), 4,
                             axis=1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        return F.sigmoid(o) * F.tanh(c), c


class EncoderForecaster(nn.Module):
    def __init__(self, hidden, k):
        super().__init__()
        self.enc1, self.enc2 = ConvLSTMCell(4, hidden, k), ConvLSTMCell(hidden, hidden, k)
        self.dec1, self.dec2 = ConvLSTMCell(0, hidden, k), ConvLSTMCell(hidden, hidden, k)
        self.out = nn.Conv2d(2 * hidden, 4, 1)

    def forward(self, frames, future):                                # frames (b, t, s, s)
        b, t, s = frames.shape[0], frames.shape[1], frames.shape[2]
        zero = F.zeros((b, self.enc1.hidden, s // 2, s // 2))
        s1 = s2 = (zero, zero)
        for x in F.split(frames, t, axis=1):
            s1 = self.enc1(F.pixel_unshuffle(x, 2), s1)
            s2 = self.enc2(s1[0], s2)
        outs = []
        for _ in range(future):
            s1 = self.dec1(None, s1)
            s2 = self.dec2(s1[0], s2)
            outs.append(F.pixel_shuffle(self.out(F.concat([s1[0], s2[0]], axis=1)), 2))
        return F.concat(outs, axis=1)                                  # (b, future, s, s)


def _bouncing_squares(rng, n, length, size):
    video = np.zeros((n, length, size, size), np.float32)
    for v in range(n):
        for _ in range(2):
            side = rng.integers(2, max(3, size // 6) + 1)
            pos = rng.uniform(0, size - side, 2)
            vel = rng.uniform(-1.5, 1.5, 2)
            for t in range(length):
                y, x = np.round(pos).astype(int)
                video[v, t, y:y + side, x:x + side] = 1.0
                pos = pos + vel
                for d in range(2):
                    if not 0 <= pos[d] <= size - side:
                        vel[d] = -vel[d]
                        pos[d] = np.clip(pos[d], 0, size - side)
    return video


def _convlstm(c):
    rng = np.random.default_rng(707)
    past, future, size = c["past"], c["future"], c["size"]
    videos = [_bouncing_squares(rng, c["batch"], past + future, size) for _ in range(4)]
    batches = [(imp.Tensor(v[:, :past]), imp.Tensor(v[:, past:])) for v in videos]
    model = EncoderForecaster(c["hidden"], c["k"])
    opt = optim.RMSprop(model.parameters(), 1e-3, alpha=0.9)
    next_batch = _cycle(batches)

    def loss_of():
        seen, target = next_batch()
        return F.binary_cross_entropy_with_logits(model(seen, future), target)
    return _step_with_clip(model.parameters(), opt, loss_of, 1.0)


# ---------------------------------------------------------------------------------------
# 5. An attentive neural process (Kim et al.) on curves drawn from Gaussian processes of
#    random length scales: a deterministic path (an MLP over the context's (x, y) pairs,
#    multi-head self-attention, then cross-attention from the targets' x through an MLP
#    shared by queries and keys) and a latent path (an MLP, a mean over the set, a Gaussian
#    over z: the context's as the prior, the targets' as the posterior, z sampled from the
#    latter by the reparameterisation); a decoder MLP of (r*, z, x) gives a Gaussian over y;
#    the loss its negative log-likelihood plus the KL, per target point. The four batches
#    that cycle have `context` and half as many context points in turn (and `extra` target
#    points more), so that the shapes change from one step to the next and back. Adam.
class AttentiveNP(nn.Module):
    def __init__(self, hidden, latent, heads):
        super().__init__()
        self.heads = heads
        self.det = mlp([2, hidden, hidden])
        self.self_q, self.self_k, self.self_v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.x_embed = mlp([1, hidden, hidden])
        self.cross_v = nn.Linear(hidden, hidden)
        self.lat = mlp([2, hidden, hidden])
        self.lat_out = mlp([hidden, hidden, 2 * latent])
        self.dec = mlp([hidden + latent + 1, hidden, hidden, 2])

    def _latent(self, x, y):
        mu, raw = F.split(self.lat_out(F.mean(self.lat(F.concat([x, y], axis=2)), axis=1)),
                          2, axis=1)
        return mu, 0.1 + 0.9 * F.sigmoid(raw)

    def forward(self, xc, yc, xt, yt):
        r = self.det(F.concat([xc, yc], axis=2))
        r = r + attention(self.self_q(r), self.self_k(r), self.self_v(r), self.heads)
        r_star = attention(self.x_embed(xt), self.x_embed(xc), self.cross_v(r), self.heads)
        mu_c, sigma_c = self._latent(xc, yc)
        mu_t, sigma_t = self._latent(xt, yt)
        z = mu_t + sigma_t * imp.random.normal(size=mu_t.shape)
        n = xt.shape[1]
        zs = F.broadcast_to(F.expand_dims(z, 1), (z.shape[0], n, z.shape[1]))
        mean, raw = F.split(self.dec(F.concat([r_star, zs, xt], axis=2)), 2, axis=2)
        sigma = 0.1 + 0.9 * F.softplus(raw)
        nll = F.mean(0.5 * ((yt - mean) / sigma) ** 2 + F.log(sigma)) + 0.5 * math.log(2 * math.pi)
        kl = F.sum(F.log(sigma_c / sigma_t)
                   + (sigma_t ** 2 + (mu_t - mu_c) ** 2) / (2 * sigma_c ** 2) - 0.5, axis=1)
        return nll + F.mean(kl) / n


def _gp_curves(rng, n, context, targets):
    x = rng.uniform(-2, 2, (n, targets, 1))
    y = np.empty_like(x)
    for s in range(n):
        scale = rng.uniform(0.3, 1.0)
        gram = np.exp(-0.5 * (x[s] - x[s].T) ** 2 / scale ** 2) + 1e-4 * np.eye(targets)
        y[s, :, 0] = np.linalg.cholesky(gram) @ rng.standard_normal(targets)
    y += 0.02 * rng.standard_normal(y.shape)
    x, y = x.astype(np.float32), y.astype(np.float32)
    return (imp.Tensor(x[:, :context]), imp.Tensor(y[:, :context]), imp.Tensor(x),
            imp.Tensor(y))


def _anp(c):
    rng = np.random.default_rng(709)
    ctx, extra = c["context"], c["extra"]
    batches = [_gp_curves(rng, c["batch"], max(2, int(ctx * f)), max(2, int(ctx * f)) + extra)
               for f in (1.0, 0.5, 1.0, 0.5)]
    model = AttentiveNP(c["hidden"], c["latent"], c["heads"])
    opt = optim.Adam(model.parameters(), 5e-4)
    next_batch = _cycle(batches)
    return stepper(model.parameters(), opt, lambda: model(*next_batch()))


# ---------------------------------------------------------------------------------------
# 6. A differentiable bitonic sorting network (Petersen et al.) with ranking supervision:
#    sets of `items` numbers of three digits, each digit shown as a noisy prototype
#    vector; a digit MLP shared by all digits and an MLP over the three give each item a
#    score; the bitonic network's layers (log2(n) (log2(n) + 1) / 2 of them) each pair
#    every position with a partner, the soft minimum (or maximum) of the two by a logistic
#    of their difference, the scores and the rows of the relaxed permutation matrix mixed
#    with their partners' (index_select of both); the loss BCE between that matrix and the
#    true ranking's permutation matrix. AdamW under a one-cycle schedule. Four batches
#    cycle.
def _bitonic_layers(n):
    """Per layer of the bitonic network on n = 2^k wires: (each wire's partner, +1 where
    the wire takes the smaller of the two, -1 where it takes the larger)."""
    layers = []
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            partner, sign = np.arange(n), np.ones(n)
            for i in range(n):
                other = i ^ j
                if other > i:
                    ascending = (i & k) == 0
                    partner[i], partner[other] = other, i
                    sign[i], sign[other] = (1, -1) if ascending else (-1, 1)
            layers.append((imp.Tensor(partner.astype(np.int32)),
                           imp.Tensor(sign.astype(np.float32))))
            j //= 2
        k *= 2
    return layers


def _soft_sort(scores, layers, steepness):
    """(the softly sorted scores, the relaxed permutation matrix (b, n, n): row r the
    weights of the items at rank r, ascending)."""
    b, n = scores.shape
    perm = F.broadcast_to(imp.Tensor(np.eye(n, dtype=np.float32)), (b, n, n))
    x = scores
    for partner, sign in layers:
        other = F.index_select(x, 1, partner)
        keep = F.sigmoid(steepness * sign * (other - x))
        x = keep * x + (1 - keep) * other
        keep = F.expand_dims(keep, 2)
        perm = keep * perm + (1 - keep) * F.index_select(perm, 1, partner)
    return x, perm


def _digit_sets(rng, sets, items, protos, noise=0.6):
    digits = rng.integers(0, 10, (sets, items, 3))
    feats = protos[digits] + noise * rng.standard_normal(digits.shape + (protos.shape[1],))
    value = digits @ np.array([100, 10, 1]) + rng.uniform(0, 0.5, (sets, items))
    rank = np.argsort(value, axis=1, kind="stable")
    target = np.zeros((sets, items, items), np.float32)
    target[np.arange(sets)[:, None], np.arange(items)[None], rank] = 1.0
    return imp.Tensor(feats.astype(np.float32)), imp.Tensor(target)


class ItemScorer(nn.Module):
    def __init__(self, feat, hidden):
        super().__init__()
        self.digit = mlp([feat, hidden, hidden])
        self.number = mlp([3 * hidden, hidden, 1])

    def forward(self, feats):                                        # (sets, items, 3, feat)
        s, n = feats.shape[0], feats.shape[1]
        h = F.relu(self.digit(feats))
        return F.reshape(self.number(F.reshape(h, (s, n, -1))), (s, n))


def _diffsort(c):
    rng = np.random.default_rng(711)
    protos = rng.standard_normal((10, c["feat"]))
    batches = [_digit_sets(rng, c["sets"], c["items"], protos) for _ in range(4)]
    layers = _bitonic_layers(c["items"])
    model = ItemScorer(c["feat"], c["hidden"])
    opt = optim.AdamW(model.parameters(), 1e-3, weight_decay=0.01)
    schedule = OneCycleLR(opt, 3e-3, total_steps=400)
    next_batch = _cycle(batches)

    def loss_of():
        feats, target = next_batch()
        _, perm = _soft_sort(model(feats), layers, c["steepness"])
        perm = F.clip(perm, 1e-6, 1 - 1e-6)
        return -F.mean(target * F.log(perm) + (1 - target) * F.log(1 - perm))
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 7. Deep-kernel regression by unrolled conjugate gradients: tasks of random sums of
#    sinusoids over R^d, each with a support and a query set; a feature MLP, an RBF kernel
#    on the features (learned length scale, output scale and noise) giving each task's
#    (n, n) support kernel matrix K; K alpha = y solved by `iters` conjugate-gradient
#    iterations unrolled (each a batched matrix-vector product with the same K and a few
#    small vector updates, all differentiated through); the query predictions K_qs alpha,
#    MSE. Adagrad. Four batches of tasks cycle.
def _sq_dists(a, b):
    return (F.sum(a * a, axis=2, keepdims=True) + F.transpose(F.sum(b * b, axis=2, keepdims=True),
                                                              (0, 2, 1))
            - 2 * F.matmul(a, b, transpose_b=True))


class DeepKernel(nn.Module):
    def __init__(self, dim, hidden, feat):
        super().__init__()
        self.features = mlp([dim, hidden, hidden, feat])
        self.log_scale = imp.Parameter(np.zeros(1, np.float32))
        self.log_out = imp.Parameter(np.zeros(1, np.float32))
        self.raw_noise = imp.Parameter(np.full(1, -2.0, np.float32))

    def kernel(self, a, b):
        return F.exp(self.log_out - 0.5 * _sq_dists(a, b) * F.exp(-2 * self.log_scale))

    def forward(self, xs, ys, xq, iters):
        fs, fq = self.features(xs), self.features(xq)
        n = xs.shape[1]
        gram = (self.kernel(fs, fs)
                + (F.softplus(self.raw_noise) + 1e-3) * imp.Tensor(np.eye(n, dtype=np.float32)))
        alpha, r = F.zeros(ys.shape), ys
        p, rs = r, F.sum(r * r, axis=1, keepdims=True)
        for _ in range(iters):
            kp = F.matmul(gram, p)
            step = rs / (F.sum(p * kp, axis=1, keepdims=True) + 1e-12)
            alpha = alpha + step * p
            r = r - step * kp
            rs_next = F.sum(r * r, axis=1, keepdims=True)
            p = r + (rs_next / (rs + 1e-12)) * p
            rs = rs_next
        return F.matmul(self.kernel(fq, fs), alpha)


def _sine_tasks(rng, tasks, support, query, dim, terms=3):
    x = rng.uniform(-1, 1, (tasks, support + query, dim))
    freq = rng.normal(0, 2.0, (tasks, terms, dim))
    amp, phase = rng.uniform(0.5, 1.5, (tasks, terms)), rng.uniform(0, 2 * np.pi, (tasks, terms))
    y = np.sum(amp[:, None] * np.sin(np.einsum("tnd,tkd->tnk", x, freq) + phase[:, None]),
               axis=2, keepdims=True)
    y += 0.05 * rng.standard_normal(y.shape)
    x, y = x.astype(np.float32), y.astype(np.float32)
    return (imp.Tensor(x[:, :support]), imp.Tensor(y[:, :support]), imp.Tensor(x[:, support:]),
            imp.Tensor(y[:, support:]))


def _cg_kernel(c):
    rng = np.random.default_rng(713)
    batches = [_sine_tasks(rng, c["tasks"], c["support"], c["query"], c["dim"])
               for _ in range(4)]
    model = DeepKernel(c["dim"], c["hidden"], c["feat"])
    opt = optim.Adagrad(model.parameters(), 0.02)
    next_batch = _cycle(batches)

    def loss_of():
        xs, ys, xq, yq = next_batch()
        return F.mse_loss(model(xs, ys, xq, c["iters"]), yq)
    return stepper(model.parameters(), opt, loss_of)


# ---------------------------------------------------------------------------------------
# 8. A recurrent attention model (Mnih et al.) on cluttered glyphs: per glimpse, patches
#    of three sizes around a location cut out of the padded image by F.gather at indices
#    computed from the location (rounded to a pixel, as int32 tensors; no read-back) and
#    pooled to one size; a glimpse network of the patches and the location, a plain ReLU
#    RNN core, a location network whose Gaussian policy gives the next location (sampled
#    each step, detached) and a baseline; after the last glimpse a classifier. The loss
#    cross entropy plus REINFORCE on the reward (a correct answer) less the baseline plus
#    the baseline's squared error. SGD with momentum, the rate halved every 50 steps. Four
#    batches cycle.
class RecurrentAttention(nn.Module):
    def __init__(self, size, glimpse, scales, hidden, classes, std=0.15):
        super().__init__()
        self.size, self.glimpse, self.scales, self.std = size, glimpse, scales, std
        self.pad = glimpse * 2 ** (scales - 1) // 2
        self.wide = size + 2 * self.pad
        self.offsets = []
        for s in range(scales):
            side = glimpse * 2 ** s
            r, cc = np.mgrid[0:side, 0:side]
            self.offsets.append((side, imp.Tensor((r * self.wide + cc).reshape(1, -1)
                                                  .astype(np.int32))))
        self.what = nn.Linear(scales * glimpse * glimpse, hidden)
        self.where = nn.Linear(2, hidden // 2)
        self.g_what, self.g_where = nn.Linear(hidden, hidden), nn.Linear(hidden // 2, hidden)
        self.core_h, self.core_g = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.locate, self.baseline = nn.Linear(hidden, 2), nn.Linear(hidden, 1)
        self.classify = nn.Linear(hidden, classes)

    def _patches(self, flat, loc):
        b = flat.shape[0]
        centre = F.round((loc + 1) * (0.5 * (self.size - 1))).astype("int32") + self.pad
        cy, cx = F.split(centre, 2, axis=1)
        out = []
        for s, (side, offsets) in enumerate(self.offsets):
            corner = (cy - side // 2) * self.wide + (cx - side // 2)            # (b, 1)
            patch = F.reshape(F.gather(flat, 1, corner + offsets), (b, 1, side, side))
            if s:
                patch = F.avg_pool2d(patch, 2 ** s)
            out.append(F.reshape(patch, (b, -1)))
        return F.concat(out, axis=1)

    def forward(self, images, labels, glimpses):
        b = images.shape[0]
        flat = F.reshape(F.pad(images, (self.pad, self.pad, self.pad, self.pad)), (b, -1))
        loc = imp.random.uniform(-1.0, 1.0, size=(b, 2))
        h = F.zeros((b, self.core_h.weight.shape[0]))
        log_pi, baselines = [], []
        for t in range(glimpses):
            what = F.relu(self.what(self._patches(flat, loc)))
            where = F.relu(self.where(loc))
            g = F.relu(self.g_what(what) + self.g_where(where))
            h = F.relu(self.core_h(h) + self.core_g(g))
            baselines.append(F.squeeze(self.baseline(h.detach()), 1))
            if t + 1 < glimpses:
                mean = F.tanh(self.locate(h.detach()))
                loc = F.clip(mean + self.std * imp.random.normal(size=(b, 2)), -1.0, 1.0).detach()
                log_pi.append(F.sum(-((loc - mean) ** 2) / (2 * self.std ** 2), axis=1))
        logits = self.classify(h)
        reward = (F.argmax(logits, axis=1) == labels).astype("float32")
        base = F.stack(baselines, axis=1)
        advantage = (F.expand_dims(reward, 1) - base).detach()[:, :-1]
        reinforce = -F.mean(F.sum(advantage * F.stack(log_pi, axis=1), axis=1))
        return (F.cross_entropy(logits, labels) + 0.01 * reinforce
                + F.mean((base - F.expand_dims(reward, 1)) ** 2))


def _cluttered_glyphs(rng, n, size, glyphs, clutter=4):
    side = glyphs.shape[1]
    images = np.zeros((n, 1, size, size), np.float32)
    labels = rng.integers(0, len(glyphs), n)
    for s in range(n):
        for _ in range(clutter):
            piece = glyphs[rng.integers(len(glyphs))]
            y0, x0 = rng.integers(0, side - side // 2, 2)
            y, x = rng.integers(0, size - side // 2, 2)
            images[s, 0, y:y + side // 2, x:x + side // 2] += piece[y0:y0 + side // 2,
                                                                    x0:x0 + side // 2]
        y, x = rng.integers(0, size - side, 2)
        images[s, 0, y:y + side, x:x + side] += glyphs[labels[s]]
    return imp.Tensor(np.clip(images, 0, 1)), imp.Tensor(labels.astype(np.int32))


def _ram(c):
    rng = np.random.default_rng(715)
    side = max(4, c["size"] // 5)
    glyphs = (rng.uniform(0, 1, (c["classes"], side, side)) < 0.45).astype(np.float32)
    batches = [_cluttered_glyphs(rng, c["batch"], c["size"], glyphs) for _ in range(4)]
    model = RecurrentAttention(c["size"], c["glimpse"], 3, c["hidden"], c["classes"])
    opt = optim.SGD(model.parameters(), 0.01, momentum=0.9)
    schedule = StepLR(opt, 50, gamma=0.5)
    next_batch = _cycle(batches)

    def loss_of():
        images, labels = next_batch()
        return model(images, labels, c["glimpses"])
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------
# 9. Sharpness-aware minimisation (Foret et al.) of a pre-activation wide ResNet on
#    textures of ten classes (coloured gratings of a class's orientation and frequency,
#    random phase, noise): per step a forward and backward pass, every parameter moved in
#    place by rho times the gradient over the gradients' global norm, a second forward and
#    backward pass at the moved parameters, the parameters moved back in place, and the
#    update with the second gradients; label smoothing; SGD with momentum and weight
#    decay, cosine-annealed after a warm-up. Four batches cycle.
class PreActBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(cin), nn.BatchNorm2d(cout)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.short = (nn.Conv2d(cin, cout, 1, stride, bias=False)
                      if stride != 1 or cin != cout else None)

    def forward(self, x):
        o = F.relu(self.bn1(x))
        y = self.conv2(F.relu(self.bn2(self.conv1(o))))
        return y + (x if self.short is None else self.short(o))


class WideResNet(nn.Module):
    def __init__(self, width, widen, classes):
        super().__init__()
        w1, w2 = width * widen, 2 * width * widen
        self.stem = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.blocks = nn.Sequential(PreActBlock(width, w1, 1), PreActBlock(w1, w1, 1),
                                    PreActBlock(w1, w2, 2), PreActBlock(w2, w2, 1))
        self.bn = nn.BatchNorm2d(w2)
        self.head = nn.Linear(w2, classes)

    def forward(self, x):
        h = F.relu(self.bn(self.blocks(self.stem(x))))
        return self.head(F.mean(h, axis=(2, 3)))


def _textures(rng, n, size, classes=10):
    yy, xx = np.mgrid[0:size, 0:size] / size
    angle = np.arange(classes) * np.pi / classes
    freq = 3 + 2 * (np.arange(classes) % 3)
    colour = rng.uniform(0.3, 1.0, (classes, 3, 1, 1))
    labels = rng.integers(0, classes, n)
    images = np.empty((n, 3, size, size))
    for s, k in enumerate(labels):
        wave = np.sin(2 * np.pi * freq[k] * (np.cos(angle[k]) * xx + np.sin(angle[k]) * yy)
                      + rng.uniform(0, 2 * np.pi))
        images[s] = colour[k] * wave + 0.8 * rng.standard_normal((3, size, size))
    return imp.Tensor(images.astype(np.float32)), imp.Tensor(labels.astype(np.int32))


def _sam(c):
    rng = np.random.default_rng(717)
    batches = [_textures(rng, c["batch"], c["size"]) for _ in range(4)]
    model = WideResNet(c["width"], c["widen"], 10)
    params = model.parameters()
    gm = GradManager().attach(params)
    opt = optim.SGD(params, 0.05, momentum=0.9, weight_decay=5e-4)
    schedule = CosineAnnealingLR(opt, 300, warmup_steps=5)
    next_batch = _cycle(batches)
    rho = c["rho"]

    def forward_backward(x, labels):
        with gm:
            loss = F.cross_entropy(model(x), labels, label_smoothing=0.1)
            gm.backward(loss)
        return loss

    def step():
        x, labels = next_batch()
        loss = forward_backward(x, labels)
        grads = [p.grad for p in params]
        norm = F.sqrt(sum(F.sum(g * g) for g in grads))
        scale = rho / (norm + 1e-12)
        moves = [g * scale for g in grads]
        for p, e in zip(params, moves):
            p += e
        opt.clear_grad()
        forward_backward(x, labels)
        for p, e in zip(params, moves):
            p -= e
        opt.step()
        opt.clear_grad()
        schedule.step()
        return loss
    return step


# ---------------------------------------------------------------------------------------
# 10. A ladder network (Rasmus et al.) for semi-supervised classification of Gaussian
#     blobs, a few rows of each batch labelled: one MLP encoder run twice, clean and with
#     Gaussian noise added to the input and to every batch-normalised pre-activation; a
#     decoder from the top, each layer's estimate by the vanilla combinator of the noisy
#     lateral activation and the batch-normalised projection of the layer above (ten
#     learned vectors a layer); a denoising cost per layer (weighted 10, 1, then 0.1)
#     between the estimate, normalised by the clean pass's batch statistics, and the clean
#     activation; cross entropy of the noisy pass on the labelled rows. Adam, the rate
#     decayed linearly by LambdaLR. Four batches cycle.
def _batch_normalise(x):
    mean = F.mean(x, axis=0, keepdims=True)
    var = F.var(x, axis=0, keepdims=True)
    return (x - mean) * F.rsqrt(var + 1e-5), mean, var


class Ladder(nn.Module):
    def __init__(self, sizes, noise):
        super().__init__()
        self.sizes, self.noise = sizes, noise
        pairs = list(zip(sizes, sizes[1:]))
        self.enc = nn.ModuleList([nn.Linear(a, b, bias=False) for a, b in pairs])
        self.dec = nn.ModuleList([nn.Linear(b, a, bias=False) for a, b in pairs])
        for i, size in enumerate(sizes):
            if i:
                setattr(self, f"beta{i}", imp.Parameter(np.zeros(size, np.float32)))
            init = np.array([0, 1, 0, 0, 0, 0, 1, 0, 0, 0], np.float32)[:, None]
            setattr(self, f"comb{i}", imp.Parameter(np.repeat(init, size, axis=1)))
        self.gamma = imp.Parameter(np.ones(sizes[-1], np.float32))

    def encode(self, x, noisy):
        def corrupt(t):
            return t + self.noise * imp.random.normal(size=t.shape) if noisy else t
        h = corrupt(x)
        zs, stats = [h], [None]
        for i, lin in enumerate(self.enc):
            z, mean, var = _batch_normalise(lin(h))
            z = corrupt(z)
            zs.append(z)
            stats.append((mean, var))
            beta = getattr(self, f"beta{i + 1}")
            h = self.gamma * (z + beta) if i + 1 == len(self.enc) else F.relu(z + beta)
        return h, zs, stats

    @staticmethod
    def _combine(a, z, u):
        a = F.split(a, 10, axis=0)
        mu = a[0] * F.sigmoid(a[1] * u + a[2]) + a[3] * u + a[4]
        v = a[5] * F.sigmoid(a[6] * u + a[7]) + a[8] * u + a[9]
        return (z - mu) * v + mu

    def forward(self, x, labels, labelled, weights):
        logits, noisy, _ = self.encode(x, True)
        _, clean, stats = self.encode(x, False)
        cost = F.cross_entropy(logits[:labelled], labels[:labelled])
        top, z_hat = len(self.sizes) - 1, None
        for i in range(top, -1, -1):
            u = _batch_normalise(logits if i == top else self.dec[i](z_hat))[0]
            z_hat = self._combine(getattr(self, f"comb{i}"), noisy[i], u)
            target = z_hat
            if stats[i] is not None:
                target = (z_hat - stats[i][0]) * F.rsqrt(stats[i][1] + 1e-5)
            cost = cost + weights[i] * F.mean((target - clean[i]) ** 2)
        return cost


def _ladder(c):
    rng = np.random.default_rng(719)
    sizes = [c["dim"]] + list(c["hidden"]) + [c["classes"]]
    batches = [_clusters(rng, c["batch"], c["dim"], c["classes"], spread=0.4)
               for _ in range(4)]
    batches = [(imp.Tensor(x), imp.Tensor(y)) for x, y in batches]
    weights = [10.0, 1.0] + [0.1] * (len(sizes) - 2)
    model = Ladder(sizes, 0.3)
    opt = optim.Adam(model.parameters(), 2e-3)
    schedule = LambdaLR(opt, lambda s: max(0.1, 1.0 - s / 500))
    next_batch = _cycle(batches)

    def loss_of():
        x, labels = next_batch()
        return model(x, labels, c["labelled"], weights)
    return _then(stepper(model.parameters(), opt, loss_of), schedule.step)


# ---------------------------------------------------------------------------------------

BENCH_SIZES = {
    "hnn": dict(bodies=8, hidden=256, rollout=8, dt=0.1, batch=256),
    "adjoint_ode": dict(aug=6, hidden=128, steps=6, batch=2048),
    "soft_dtw": dict(hist=96, horizon=48, ch=32, hidden=256, batch=128),
    "convlstm": dict(size=32, hidden=24, k=3, past=5, future=5, batch=8),
    "anp": dict(hidden=128, latent=64, heads=8, context=96, extra=64, batch=32),
    "diffsort": dict(items=32, feat=32, hidden=128, steepness=8.0, sets=128),
    "cg_kernel": dict(dim=6, hidden=256, feat=32, support=256, query=128, iters=24, tasks=16),
    "ram": dict(size=48, glimpse=8, hidden=256, classes=10, glimpses=6, batch=256),
    "sam": dict(width=16, widen=2, size=16, rho=0.05, batch=32),
    "ladder": dict(dim=256, hidden=(512, 256, 128), classes=10, labelled=64, batch=512),
}
# the tests' sizes: a step of a few milliseconds
CONFIGS = {
    "hnn": dict(bodies=3, hidden=32, rollout=4, dt=0.1, batch=16),
    "adjoint_ode": dict(aug=2, hidden=32, steps=4, batch=64),
    "soft_dtw": dict(hist=24, horizon=12, ch=8, hidden=32, batch=16),
    "convlstm": dict(size=12, hidden=6, k=3, past=3, future=3, batch=2),
    "anp": dict(hidden=16, latent=8, heads=2, context=12, extra=8, batch=4),
    "diffsort": dict(items=8, feat=8, hidden=16, steepness=8.0, sets=8),
    "cg_kernel": dict(dim=3, hidden=16, feat=8, support=32, query=16, iters=6, tasks=4),
    "ram": dict(size=20, glimpse=4, hidden=32, classes=4, glimpses=3, batch=16),
    "sam": dict(width=4, widen=2, size=8, rho=0.05, batch=8),
    "ladder": dict(dim=16, hidden=(32, 16), classes=3, labelled=8, batch=32),
}

# name -> config -> (model, one input's shape, optimizer name, lr) for plain training steps:
# none here (every model has its own data and step)
BUILDERS = {}

# name -> config -> step(): models with their own training step
STEPS = {
    "hnn": _hnn,
    "adjoint_ode": _adjoint_ode,
    "soft_dtw": _soft_dtw_forecast,
    "convlstm": _convlstm,
    "anp": _anp,
    "diffsort": _diffsort,
    "cg_kernel": _cg_kernel,
    "ram": _ram,
    "sam": _sam,
    "ladder": _ladder,
}


MODEL_SET = ModelSet(__name__, "tests/sixteenth_models.py", CONFIGS, BENCH_SIZES, BUILDERS,
                     STEPS)
trainer, bench_trainer = MODEL_SET.trainer, MODEL_SET.bench_trainer
bench_describe = MODEL_SET.bench_describe
