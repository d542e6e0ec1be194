"""The digits demo's training loop in PyTorch, step for step as
share/examples/digits/train.c runs it: the same seeded split and shuffles
(torch.randperm on a generator seeded with --seed), the same initial
weights (torch.manual_seed(seed) before building the model), the same
batches.  Prints the loss of every step with --log-loss, the test accuracy
at the end, and checks a checkpoint that train.c saved (--check FILE: the
accuracy that file's weights give on the test split).

Used by tests/cli/nn_train.bats (same losses) and bench/nn (steps per
second)."""
import argparse
import gzip
import resource
import sys
import time

import torch


def load(path):
    rows = [list(map(int, l.split(","))) for l in gzip.open(path, "rt") if l.strip()]
    data = torch.tensor(rows, dtype=torch.float32)
    return data[:, :64] / 16.0, data[:, 64].long()


def model():
    nn = torch.nn
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def split(n, g):
    perm = torch.randperm(n, generator=g)
    ntrain = n * 4 // 5
    return perm[:ntrain], perm[ntrain:]


def accuracy(m, x, y):
    with torch.no_grad():
        return (m(x).argmax(1) == y).sum().item() / len(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--optimizer", default="adam", choices=["sgd", "adam", "adamw"])
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--log-loss", action="store_true")
    ap.add_argument("--check", default=None)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    x, y = load(a.data)
    g = torch.Generator().manual_seed(a.seed)
    tr, te = split(len(y), g)
    if a.check:
        m = model()
        m.load_state_dict(torch.load(a.check, weights_only=True))
        print(f"test accuracy {accuracy(m, x[te], y[te]):.4f}")
        return
    torch.manual_seed(a.seed)
    m = model()
    lr = a.lr if a.lr is not None else (0.05 if a.optimizer == "sgd" else 0.003)
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=a.momentum, foreach=False)
    elif a.optimizer == "adam":
        opt = torch.optim.Adam(m.parameters(), lr=lr, foreach=False)
    else:
        opt = torch.optim.AdamW(m.parameters(), lr=lr, foreach=False)
    step = 0
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        order = tr[torch.randperm(len(tr), generator=g)]
        for b in range(0, len(order), a.batch_size):
            idx = order[b:b + a.batch_size]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x[idx]), y[idx])
            loss.backward()
            opt.step()
            step += 1
            if a.log_loss:
                print(f"{loss.item():.9g}")
            if a.max_steps and step >= a.max_steps:
                break
        if a.max_steps and step >= a.max_steps:
            break
    dt = time.perf_counter() - t0
    if not a.log_loss:
        print(f"test accuracy {accuracy(m, x[te], y[te]):.4f}")
        grow = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        print(f"steps {step} seconds {dt:.4f} peak RSS growth {grow} KiB steps/s {step / dt:.1f}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
