"""bench/compile/train.py: issue 17's figures. A training step (forward,
backward, optimizer) of an MLP with its cross-entropy loss through
`tcompile train` against PyTorch 2.x eager and torch.compile of the same
step, at 1 and 2 threads, with each run's peak RSS. Steps per second are
the best epoch's (tcompile train's JSON lines; PyTorch timed the same way,
after a warm-up epoch), each variant in its own process; ratios are
PyTorch's time over ours. Figures on a shared machine are noisy.

    python3 train.py --tcompile bin/tcompile/tcompile [--epochs E] [--threads 1,2]
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

BATCH, IN, HIDDEN, CLASSES, ROWS = 64, 64, 256, 10, 64 * 40


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


def factory():
    torch.manual_seed(0)
    return MLPLoss(), (torch.randn(BATCH, IN), torch.randint(0, CLASSES, (BATCH,)))


def torch_worker(d, mode, epochs, threads):
    torch.set_num_threads(threads)
    import numpy as np
    model = MLPLoss()
    model.load_state_dict(torch.load(os.path.join(d, "m.pt")))
    data = np.load(os.path.join(d, "data.npz"))
    x, y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    fwd = torch.compile(model) if mode == "compile" else model
    g = torch.Generator().manual_seed(0)
    best = 0.0
    for e in range(epochs + 1):
        perm = torch.randperm(ROWS, generator=g)
        t0 = time.perf_counter()
        for b in range(ROWS // BATCH):
            idx = perm[b * BATCH:(b + 1) * BATCH]
            opt.zero_grad()
            loss = fwd(x[idx], y[idx])
            loss.backward()
            opt.step()
        dt = time.perf_counter() - t0
        if e:  # the first epoch warms up (and compiles)
            best = max(best, ROWS // BATCH / dt)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"steps_per_s": best, "peak_mib": peak}))


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
sys.stderr.write("%d\\n" % ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_to(cmd, env, path):
    """Runs cmd with its stdout in path; returns (exit status, its peak RSS in KiB)."""
    p = subprocess.run([sys.executable, "-c", LAUNCH, path] + cmd, env=env,
                       stderr=subprocess.PIPE, text=True)
    lines = p.stderr.splitlines()
    sys.stderr.write("".join(l + "\n" for l in lines[:-1]))
    return p.returncode, int(lines[-1]) if lines and lines[-1].isdigit() else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tcompile", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--worker", nargs=3)
    a = ap.parse_args()
    if a.worker:
        return torch_worker(a.worker[0], a.worker[1], a.epochs, int(a.worker[2]))
    d = tempfile.mkdtemp(prefix="tn-bench-train-")
    src = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(src, "..", "..", "share", "tools", "torch2graph.py"),
                    os.path.abspath(__file__) + ":factory", "-o", os.path.join(d, "m")],
                   check=True, stdout=subprocess.DEVNULL)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(ROWS, IN, generator=g)
    y = torch.randint(0, CLASSES, (ROWS,), generator=g)
    import numpy as np
    np.savez(os.path.join(d, "data.npz"), x=x.numpy(), y=y.numpy())
    print("training step of an MLP %d-%d-%d-%d with cross-entropy, AdamW, batch %d, %d steps/epoch"
          % (IN, HIDDEN, HIDDEN, CLASSES, BATCH, ROWS // BATCH))
    print("%-8s %-14s %12s %10s %16s" % ("threads", "variant", "steps/s", "peak MiB", "ours vs it"))
    for th in [int(t) for t in a.threads.split(",")]:
        env = dict(os.environ, TN_NUM_THREADS=str(th), OMP_NUM_THREADS=str(th))
        out = os.path.join(d, "ours.jsonl")
        cmd = [a.tcompile, "train", os.path.join(d, "m.json"), "-w", os.path.join(d, "m.pt"),
               "--data", os.path.join(d, "data.npz"), "--optimizer", "adamw", "--lr", "1e-3",
               "--epochs", str(a.epochs + 1)]
        status, peak_kib = run_to(cmd, env, out)
        if status:
            sys.exit("train.py: tcompile train failed")
        lines = [json.loads(l) for l in open(out)][1:]
        ours = max(l["examples_per_s"] for l in lines) / BATCH
        ours_peak = peak_kib / 1024
        print("%-8d %-14s %12.1f %10.1f %16s" % (th, "tcompile", ours, ours_peak, ""))
        for mode in ("eager", "compile"):
            res = os.path.join(d, mode + ".json")
            cmd = [sys.executable, "-W", "ignore", os.path.abspath(__file__), "--tcompile",
                   a.tcompile, "--epochs", str(a.epochs), "--worker", d, mode, str(th)]
            status, _ = run_to(cmd, env, res)
            if status:
                print("%-8d %-14s %12s" % (th, "torch " + mode, "failed"))
                continue
            r = json.loads(open(res).read().strip().splitlines()[-1])
            print("%-8d %-14s %12.1f %10.1f %9.2fx %4.2fx" % (
                th, "torch " + mode, r["steps_per_s"], r["peak_mib"], ours / r["steps_per_s"],
                ours_peak / r["peak_mib"]))
    print("(last column pair: our steps/s over its, our peak RSS over its)")


if __name__ == "__main__":
    main()
