"""bench/compile/train.py: issue 17's figures. A training step (forward,
backward, optimizer) of an MLP with its cross-entropy loss, a CNN (two
conv, batch norm in training mode, relu, max-pool stages and a linear
head, cross-entropy) and a pre-norm transformer encoder block (the
views-and-permutes block of tests/fixtures/graph_joint.py, wider, with an
MSE loss against a target) through `tcompile train` against PyTorch 2.x eager and torch.compile of the same
step, at 1 and 2 threads, with each run's peak RSS. Steps per second are
the best epoch's (tcompile train's JSON lines; PyTorch timed the same way,
after a warm-up epoch), each variant in its own process; ratios are
PyTorch's time over ours. Figures on a shared machine are noisy.

    python3 train.py --tcompile bin/tcompile/tcompile [--epochs E] [--threads 1,2]
                     [--models mlp,cnn,block] [--baseline OTHER/tcompile]

--baseline runs another tcompile (a build of an older commit) on the same
graphs and data right after ours: its row's ratios are ours over it.

--cpu counts steps per second of CPU time instead of wall time (use it
with --threads 1 on a loaded machine, where the wall clock measures the
other processes): ours from two runs, one epoch and 1 + E epochs, the
difference of their CPU times over the E epochs' steps (start-up and
loading left out); PyTorch's over its E epochs after the warm-up.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "fixtures"))
from graph_joint import Block  # noqa: E402

IN, HIDDEN, CLASSES = 64, 256, 10


class MLPLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x, y):
        h = torch.relu(self.fc1(x))
        h = torch.relu(self.fc2(h))
        return F.cross_entropy(self.fc3(h), y)


class CNNLoss(nn.Module):
    """28x28 one-channel images: conv 3x3 (no bias: batch norm follows),
    batch norm, relu, 2x2 max-pool, twice (16 then 32 channels), linear."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 7 * 7, CLASSES)

    def forward(self, x, y):
        h = F.max_pool2d(torch.relu(self.b1(self.c1(x))), 2)
        h = F.max_pool2d(torch.relu(self.b2(self.c2(h))), 2)
        return F.cross_entropy(self.fc(h.flatten(1)), y)


class BlockLoss(Block):
    """tests/fixtures/graph_joint.py's pre-norm encoder block, width 64 and
    4 heads, with the mean squared error to a target as its loss."""

    def __init__(self):
        super().__init__(d=64, heads=4)

    def forward(self, x, y):
        # the MSE written out (F.mse_loss exports aten.broadcast_tensors
        # and e ** 2 pow.Tensor_Scalar, which tcompile train takes since
        # 0737550 but a --baseline build before it refuses)
        e = super().forward(x) - y
        return (e * e).mean()


def _labels(g, n):
    return torch.randint(0, CLASSES, (n,), generator=g)


# name: (module, batch, rows, x's shape after the batch, y from (generator, rows),
#        description)
MODELS = {
    "mlp": (MLPLoss, 64, 64 * 40, (IN,), _labels,
            "MLP %d-%d-%d-%d, cross-entropy" % (IN, HIDDEN, HIDDEN, CLASSES)),
    "cnn": (CNNLoss, 32, 32 * 20, (1, 28, 28), _labels,
            "CNN 1x28x28 conv16-bn-relu-pool conv32-bn-relu-pool linear, cross-entropy"),
    "block": (BlockLoss, 16, 16 * 20, (32, 64),
              lambda g, n: torch.randn(n, 32, 64, generator=g),
              "transformer block width 64, 4 heads, 32 tokens, MSE"),
}
MODEL = "mlp"  # the one factory() builds


def factory():
    cls, batch, _, shape, ys, _ = MODELS[MODEL]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    return cls(), (torch.randn((batch,) + shape, generator=g), ys(g, batch))


def export_train(name, prefix):
    """The model in training mode through torch.export (the training IR:
    batch_norm with training=True, as PyTorch's steps run it), to
    prefix.json and its weights to prefix.pt. share/tools/torch2graph.py
    exports in eval mode, which gave the CNN's batch norm the running
    statistics (a cheaper step than PyTorch's) until this script used
    this."""
    from torch._export.serde.serialize import serialize
    global MODEL
    MODEL = name
    module, inputs = factory()
    ep = torch.export.export(module.train(), inputs)
    doc = json.loads(serialize(ep).exported_program)
    with open(prefix + ".json", "w") as f:
        json.dump(doc, f)
    torch.save({k: v.detach().clone() for k, v in ep.state_dict.items()}, prefix + ".pt")


def torch_worker(d, name, mode, epochs, threads):
    torch.set_num_threads(threads)
    import numpy as np
    cls, BATCH, ROWS = MODELS[name][:3]
    model = cls().train()
    model.load_state_dict(torch.load(os.path.join(d, name + ".pt")))
    data = np.load(os.path.join(d, name + "_data.npz"))
    x, y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    fwd = torch.compile(model) if mode == "compile" else model
    g = torch.Generator().manual_seed(0)
    best, cpu = 0.0, 0.0
    for e in range(epochs + 1):
        perm = torch.randperm(ROWS, generator=g)
        t0, c0 = time.perf_counter(), time.process_time()
        for b in range(ROWS // BATCH):
            idx = perm[b * BATCH:(b + 1) * BATCH]
            opt.zero_grad()
            loss = fwd(x[idx], y[idx])
            loss.backward()
            opt.step()
        dt = time.perf_counter() - t0
        if e:  # the first epoch warms up (and compiles)
            best = max(best, ROWS // BATCH / dt)
            cpu += time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"steps_per_s": best, "steps_per_cpu_s": epochs * (ROWS // BATCH) / cpu,
                      "peak_mib": peak}))


# A fork of this process, torch imported, keeps the peak RSS it had before
# exec (Linux carries the old memory's high-water mark into ru_maxrss): that
# counted ~300-400 MiB of PyTorch against tcompile. A fresh small Python
# starts the command instead and reports the peak its child reached.
LAUNCH = """import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
sys.stderr.write("%.6f\\n%d\\n" % (ru.ru_utime + ru.ru_stime, ru.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_to(cmd, env, path):
    """Runs cmd with its stdout in path; returns (exit status, its peak RSS
    in KiB, its CPU seconds)."""
    p = subprocess.run([sys.executable, "-c", LAUNCH, path] + cmd, env=env,
                       stderr=subprocess.PIPE, text=True)
    lines = p.stderr.splitlines()
    sys.stderr.write("".join(l + "\n" for l in lines[:-2]))
    if len(lines) < 2 or not lines[-1].isdigit():
        return p.returncode, 0, 0.0
    return p.returncode, int(lines[-1]), float(lines[-2])


def run_ours(tcompile, m, env, d, epochs, batch, cpu=False):
    """tcompile train of model prefix m: (best steps/s, peak RSS in MiB),
    (None, None) when it fails; with cpu, steps per CPU second."""
    out = os.path.join(d, "ours.jsonl")
    cmd = [tcompile, "train", m + ".json", "-w", m + ".pt", "--data", m + "_data.npz",
           "--optimizer", "adamw", "--lr", "1e-3"]
    # one step first, untimed, so that the compile cache holds the kernels:
    # wait4's peak RSS counts the C compiler a cold run starts (38 MiB
    # against the MLP's 13), and a build of another commit misses the cache
    run_to(cmd + ["--steps", "1"], env, out)
    if cpu:
        one = run_to(cmd + ["--epochs", "1"], env, out)
    status, peak_kib, secs = run_to(cmd + ["--epochs", str(epochs + 1)], env, out)
    if status or (cpu and one[0]):
        return None, None
    if cpu:
        steps = json.loads(open(out).readline())["step"]  # an epoch's
        return epochs * steps / max(secs - one[2], 1e-9), peak_kib / 1024
    lines = [json.loads(l) for l in open(out)][1:]
    return max(l["examples_per_s"] for l in lines) / batch, peak_kib / 1024


def bench(a, d, name):
    """Prints the rows of one model: ours, then PyTorch eager and torch.compile."""
    cls, BATCH, ROWS, shape, ys, what = MODELS[name]
    m = os.path.join(d, name)
    export_train(name, m)
    g = torch.Generator().manual_seed(1)
    x = torch.randn((ROWS,) + shape, generator=g)
    y = ys(g, ROWS)
    import numpy as np
    np.savez(m + "_data.npz", x=x.numpy(), y=y.numpy())
    print("\n%s: AdamW, batch %d, %d steps/epoch" % (what, BATCH, ROWS // BATCH))
    print("%-8s %-14s %12s %10s %16s" % ("threads", "variant", "steps/cpu-s" if a.cpu else "steps/s",
                                         "peak MiB", "ours vs it"))
    for th in [int(t) for t in a.threads.split(",")]:
        env = dict(os.environ, TN_NUM_THREADS=str(th), OMP_NUM_THREADS=str(th))
        ours, ours_peak = run_ours(a.tcompile, m, env, d, a.epochs, BATCH, a.cpu)
        if ours is None:
            print("%-8d %-14s %12s" % (th, "tcompile", "failed"))
            continue
        print("%-8d %-14s %12.1f %10.1f %16s" % (th, "tcompile", ours, ours_peak, ""))
        if a.baseline:
            base, base_peak = run_ours(a.baseline, m, env, d, a.epochs, BATCH, a.cpu)
            if base is None:
                print("%-8d %-14s %12s" % (th, "baseline", "failed"))
            else:
                print("%-8d %-14s %12.1f %10.1f %9.2fx %4.2fx" % (
                    th, "baseline", base, base_peak, ours / base, ours_peak / base_peak))
        for mode in ("eager", "compile"):
            res = os.path.join(d, mode + ".json")
            cmd = [sys.executable, "-W", "ignore", os.path.abspath(__file__), "--tcompile",
                   a.tcompile, "--epochs", str(a.epochs), "--worker", d, name, mode, str(th)]
            status = run_to(cmd, env, res)[0]
            if status:
                print("%-8d %-14s %12s" % (th, "torch " + mode, "failed"))
                continue
            r = json.loads(open(res).read().strip().splitlines()[-1])
            theirs = r["steps_per_cpu_s" if a.cpu else "steps_per_s"]
            print("%-8d %-14s %12.1f %10.1f %9.2fx %4.2fx" % (
                th, "torch " + mode, theirs, r["peak_mib"], ours / theirs,
                ours_peak / r["peak_mib"]), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tcompile", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default="mlp,cnn,block")
    ap.add_argument("--baseline", help="another tcompile (an older build), run beside ours")
    ap.add_argument("--cpu", action="store_true", help="steps per CPU second, not wall second")
    ap.add_argument("--worker", nargs=4)
    a = ap.parse_args()
    if a.worker:
        return torch_worker(a.worker[0], a.worker[1], a.worker[2], a.epochs, int(a.worker[3]))
    for name in a.models.split(","):
        if name not in MODELS:
            sys.stderr.write("train.py: --models: '%s' is not one of %s\n" % (name, ",".join(MODELS)))
            sys.exit(2)
    d = tempfile.mkdtemp(prefix="tn-bench-train-")
    print("a training step (forward, backward, AdamW) through tcompile train against "
          "PyTorch's eager and torch.compile, best epoch after a warm-up")
    for name in a.models.split(","):
        bench(a, d, name)
    print("(last column pair: our steps/s over its, our peak RSS over its)")


if __name__ == "__main__":
    main()
