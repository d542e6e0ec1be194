"""The model of the tcompile train example: an MLP on the digits (8x8
images, 10 classes) with its cross-entropy loss, so that torch.export
records the loss and tcompile train can train it without Python.

    python3 model.py prepare DIGITS.csv.gz OUTDIR   # train.npz, test.npz
    python3 model.py check WEIGHTS.safetensors TEST.npz MIN_ACCURACY
(model.py:factory is what torch2graph.py exports.)
"""
import gzip
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

BATCH = 32


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 10)

    def logits(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

    def forward(self, x, y):
        return F.cross_entropy(self.logits(x), y)


def factory():
    torch.manual_seed(0)
    return Net(), (torch.zeros(BATCH, 64), torch.zeros(BATCH, dtype=torch.long))


def prepare(csv, out):
    rows = np.loadtxt(gzip.open(csv, "rt"), delimiter=",", dtype=np.int64)
    x, y = (rows[:, :64] / 16.0).astype(np.float32), rows[:, 64]
    perm = np.random.RandomState(0).permutation(len(rows))
    cut = len(rows) * 4 // 5
    np.savez(out + "/train.npz", x=x[perm[:cut]], y=y[perm[:cut]])
    np.savez(out + "/test.npz", x=x[perm[cut:]], y=y[perm[cut:]])


def check(weights, test, minimum):
    from safetensors.torch import load_file
    net = Net()
    sd = load_file(weights)  # tckpt convert --keys 'model.*' keeps the prefix
    net.load_state_dict({k.removeprefix("model."): v for k, v in sd.items()})
    d = np.load(test)
    with torch.no_grad():
        pred = net.logits(torch.from_numpy(d["x"])).argmax(1)
    acc = (pred == torch.from_numpy(d["y"])).float().mean().item()
    print("PyTorch: test accuracy %.4f of the trained weights" % acc)
    sys.exit(0 if acc >= float(minimum) else 1)


if __name__ == "__main__":
    {"prepare": prepare, "check": check}[sys.argv[1]](*sys.argv[2:])
