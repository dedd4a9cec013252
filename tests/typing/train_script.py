"""A small user script that trains a model; `mypy --strict` must accept it (issue 13)."""
import io

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.data import ArrayLoader
from imperative.lr_scheduler import CosineAnnealingLR


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x: imp.Tensor) -> imp.Tensor:
        return F.softmax(self.body(x), axis=-1)


def main() -> float:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = rng.integers(0, 3, 64)
    model = Net()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = CosineAnnealingLR(opt, T_max=2)
    gm = GradManager().attach(model.parameters())
    loss = imp.Tensor(0.0)
    for _ in range(2):
        for xb, yb in ArrayLoader(x, y, batch_size=16, shuffle=True, seed=0):
            with gm:
                loss = F.cross_entropy(model(xb), yb)
                gm.backward(loss)
            optim.clip_grad_norm(model.parameters(), 1.0)
            opt.step()
            opt.clear_grad()
        sched.step()
    checkpoint = io.BytesIO()
    imp.save(model.state_dict(), checkpoint)
    checkpoint.seek(0)
    model.load_state_dict(imp.load(checkpoint))
    value: float = loss.item()
    print(f"{loss:.4f}", value)
    return value


if __name__ == "__main__":
    main()
