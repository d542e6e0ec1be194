#!/usr/bin/env python3
"""bench/compile/compile.py: issue 16's figures, tcompile against the
interpreter, PyTorch 2.x eager and torch.compile (Inductor's CPU backend,
default mode, after warm-up) on the same modules and inputs.

    python3 bench/compile/compile.py [--models block,mlp,cnn,chain]
        [--threads 1,2] [--no-inductor] [--tcompile PATH] [--work DIR] [--keep]

The models are bench/compile/models.py's: a transformer block (8x128x256,
4 heads), graph_models.MLP at batch 16384, graph_models.CNN at batch 32 and
a memory-bound chain (gelu(x + bias), then layer_norm(h + residual) over
16M float32 elements). Each is exported with share/tools/torch2graph.py into
the work folder (default $TMPDIR/tensorkit-bench-compile, made afresh each
run and removed after it unless --keep), checked with `tcompile check`, then
timed at each thread count (TN_NUM_THREADS for tcompile,
torch.set_num_threads for PyTorch):
  - PyTorch eager under torch.no_grad, the best of the repeats;
  - torch.compile in a fresh process per model with a fresh
    TORCHINDUCTOR_CACHE_DIR: its cold compile time (the first call minus a
    warm call, at the first thread count), then the best warm call; Inductor
    bakes the thread count into its C++, so each further thread count is
    compiled again (torch._dynamo.reset) before it is timed;
  - `tcompile run GRAPH -w W -i I --time --repeat=N`: what `tcompile run`
    does by default (the compiler once issue 16 lands, the interpreter before),
    and `--interpret` when `tcompile --help` lists it; its cold compile time
    (a fresh TN_COMPILE_CACHE, the first run's "compile took X ms" when it
    prints one) and its warm start (the whole process's wall time, cache hot).
Every time is the fastest of its repeats, in ms; a ratio is a time over the
baseline's time measured in the same run (below 1: faster than the
baseline). For the chain, the bytes it must move (read x, residual and the
three vectors, write y) against the copy bandwidth of the same bytes on this
machine (memcpy through numpy, and torch's copy_: the faster counts).

Every tcompile output is compared with PyTorch's (torch2graph.py's
_expected.pt) and the max abs diff printed; a mismatch, a failed check or a
failed run makes the bench exit 1 after the tables. Without PyTorch 2.x it
prints why and exits 0 (skipped).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", ".."))

# name -> (description, atol, rtol of tcompile's outputs against PyTorch's)
MODELS = {
    "block": ("transformer block, batch 8, sequence 128, width 256, 4 heads", 1e-4, 1e-3),
    "mlp": ("graph_models.MLP 6-16-16-4, batch 16384", 1e-5, 1e-4),
    "cnn": ("graph_models.CNN, batch 32 of 3x8x8", 1e-5, 1e-4),
    "chain": ("gelu(x + bias), layer_norm(h + residual), [4096, 4096] float32", 1e-4, 1e-3),
}
# the memory-bound models: reported against the copy bandwidth too
MEMORY_BOUND = ("chain",)


def torch2():
    """PyTorch when it is 2.x, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if int(torch.__version__.split(".")[0]) >= 2 else None


def fastest_ms(f, budget):
    """The fastest call of f in ms, after one warm-up call; repeats until
    budget seconds have gone, at least 3 and at most 200 times."""
    f()
    best, start, n = 1e30, time.perf_counter(), 0
    while n < 3 or (n < 200 and time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
        n += 1
    return best * 1e3


def repeats(ms, budget):
    """--repeat for a run of about ms: budget seconds' worth, 3 to 200."""
    return max(3, min(200, int(budget * 1e3 / max(ms, 1e-3))))


def factory(name):
    sys.path.insert(0, HERE)
    import models
    return models.MODELS[name]


def tensors_bytes(path):
    import torch
    return sum(t.numel() * t.element_size() for t in torch.load(path).values())


# ------------------------------------------------------------ torch.compile

def inductor_child(name, threads, budget):
    """In a fresh process (the parent sets TORCHINDUCTOR_CACHE_DIR): prints
    one JSON line with the cold compile time at threads[0] and the fastest
    warm call at each thread count."""
    import torch
    module, inputs = factory(name)()
    res = {"warm": {}, "compile_s": {}}
    with torch.no_grad():
        expected = module(*inputs)
        for k, th in enumerate(threads):
            torch.set_num_threads(th)
            torch._dynamo.reset()
            compiled = torch.compile(module)
            t0 = time.perf_counter()
            out = compiled(*inputs)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            compiled(*inputs)
            warm = time.perf_counter() - t0
            res["compile_s"][th] = first - warm
            if k == 0:
                res["cold_s"] = first - warm
                res["max_diff"] = float((out - expected).abs().max())
            res["warm"][th] = fastest_ms(lambda: compiled(*inputs), budget)
    print(json.dumps(res))


def inductor(name, threads, work, budget):
    """torch.compile's figures for model name, from a fresh process."""
    cache = os.path.join(work, "inductor-" + name)
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
    p = subprocess.run([sys.executable, "-W", "ignore", os.path.abspath(__file__),
                        "--inductor-child", name, "--threads", ",".join(map(str, threads)),
                        "--budget", str(budget)], env=env, capture_output=True, text=True)
    shutil.rmtree(cache, ignore_errors=True)
    if p.returncode != 0:
        raise Failure("torch.compile failed (exit %d): %s" % (p.returncode, p.stderr.strip()[-2000:]))
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["warm"] = {int(k): v for k, v in res["warm"].items()}
    return res


# ------------------------------------------------------------ tcompile

class Failure(Exception):
    pass


class Tcompile:
    RUN = re.compile(r"run took ([0-9.]+) ms")
    COMPILE = re.compile(r"compile took ([0-9.]+) ms")

    def __init__(self, path, work):
        self.path, self.work = path, work
        p = subprocess.run([path, "--help"], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit("compile.py: %s --help failed (exit %d)" % (path, p.returncode))
        self.has_interpret = "--interpret" in p.stdout

    def check(self, prefix):
        p = subprocess.run([self.path, "check", prefix + ".json"], capture_output=True, text=True)
        if p.returncode != 0:
            raise Failure("tcompile check: %s" % (p.stdout + p.stderr).strip())
        return p.stdout.strip()

    def run(self, prefix, out, threads, repeat, cache, interpret=False):
        """Runs the graph; returns (run ms, compile ms or None, process wall
        ms, other stderr lines)."""
        cmd = [self.path, "run", prefix + ".json", "-w", prefix + ".pt", "-i",
               prefix + "_inputs.pt", "-o", out, "--time", "--repeat=%d" % repeat]
        if interpret:
            cmd.append("--interpret")
        env = dict(os.environ, TN_NUM_THREADS=str(threads), TN_COMPILE_CACHE=cache)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = (time.perf_counter() - t0) * 1e3
        if p.returncode != 0:
            raise Failure("tcompile run%s failed (exit %d): %s"
                          % (" --interpret" if interpret else "", p.returncode, p.stderr.strip()))
        m = self.RUN.search(p.stderr)
        if not m:
            raise Failure("tcompile run printed no 'run took X ms': %s" % p.stderr.strip())
        c = self.COMPILE.search(p.stderr)
        notes = [ln for ln in p.stderr.splitlines()
                 if ln.strip() and not self.RUN.search(ln) and not self.COMPILE.search(ln)]
        return float(m.group(1)), float(c.group(1)) if c else None, wall, notes


def compare(out, expected, atol, rtol):
    """The max abs diff of the outputs in file out from the dict expected;
    raises Failure when one is missing, of another shape, or not within
    atol + rtol * |expected|."""
    import torch
    got = torch.load(out)
    worst = 0.0
    for k, e in expected.items():
        if k not in got:
            raise Failure("output '%s' is missing from %s" % (k, out))
        g = got[k]
        if g.shape != e.shape or g.dtype != e.dtype:
            raise Failure("output '%s' is %s %s, PyTorch's %s %s"
                          % (k, g.dtype, list(g.shape), e.dtype, list(e.shape)))
        d = float((g.double() - e.double()).abs().max()) if e.numel() else 0.0
        if not torch.allclose(g, e, atol=atol, rtol=rtol, equal_nan=True):
            raise Failure("output '%s' differs from PyTorch's: max abs diff %.3g "
                          "(atol %g, rtol %g)" % (k, d, atol, rtol))
        worst = max(worst, d)
    return worst


# ------------------------------------------------------------ copy bandwidth

def copy_ms(nbytes, threads, budget):
    """The faster of memcpy (numpy's copyto, split over threads Python
    threads: it releases the GIL) and torch's copy_ of nbytes, in ms."""
    from concurrent.futures import ThreadPoolExecutor
    import numpy as np
    import torch
    n = nbytes // 4
    src = np.random.rand(n).astype(np.float32)
    dst = np.empty_like(src)
    step = (n + threads - 1) // threads
    with ThreadPoolExecutor(threads) as pool:
        def memcpy():
            list(pool.map(lambda i: np.copyto(dst[i:i + step], src[i:i + step]),
                          range(0, n, step)))
        t_memcpy = fastest_ms(memcpy, budget)
    torch.set_num_threads(threads)
    ts, td = torch.from_numpy(src), torch.from_numpy(dst)
    t_copy = fastest_ms(lambda: td.copy_(ts), budget)
    return min(t_memcpy, t_copy), t_memcpy, t_copy


# ------------------------------------------------------------ one model

def threads_label(th):
    return "%d thread%s" % (th, "s" if th > 1 else "")


def fmt(t):
    return "%.3f" % t if t is not None else "-"


def fmt_ratio(t, base):
    return "%.3f" % (t / base) if t is not None and base else "-"


def bench_model(name, a, tc, failures):
    import torch
    sys.path.insert(0, os.path.join(SRC, "share", "tools"))
    import torch2graph
    desc, atol, rtol = MODELS[name]
    prefix = os.path.join(a.work, name)
    module, inputs = factory(name)()
    torch2graph.write(module, inputs, prefix)
    expected = torch.load(prefix + "_expected.pt")
    print("\n== %s: %s" % (name, desc))
    print("tcompile check: " + tc.check(prefix))

    rows = {}  # label -> {threads: ms}
    with torch.no_grad():
        rows["PyTorch eager"] = {}
        for th in a.threads:
            torch.set_num_threads(th)
            rows["PyTorch eager"][th] = fastest_ms(lambda: module(*inputs), a.budget)
    ind = None
    if a.inductor:
        try:
            ind = inductor(name, a.threads, a.work, a.budget)
            rows["torch.compile"] = ind["warm"]
        except Failure as e:
            failures.append("%s: %s" % (name, e))
            print("FAILED: " + str(e))

    cache = os.path.join(a.work, "tncache-" + name)
    shutil.rmtree(cache, ignore_errors=True)
    out = prefix + "_out.pt"
    variants = [("tcompile run", False)]
    if tc.has_interpret:
        variants.append(("tcompile --interpret", True))
    cold = warm_start = None
    diffs, notes = [], []
    for label, interp in variants:
        try:
            if not interp:
                # the first run on a fresh cache: the cold compile
                _, cold, _, n = tc.run(prefix, out, a.threads[0], 1, cache)
                notes += n
            rows[label] = {}
            for th in a.threads:
                reps = repeats(rows["PyTorch eager"][th], a.budget)
                ms, _, _, n = tc.run(prefix, out, th, reps, cache, interp)
                notes += n
                rows[label][th] = ms
                diffs.append((label, th, compare(out, expected, atol, rtol)))
            if not interp:
                # the warm start: the whole process, cache hot
                warm_start = min(tc.run(prefix, out, a.threads[-1], 1, cache)[2]
                                 for _ in range(3))
        except Failure as e:
            failures.append("%s: %s: %s" % (name, label, e))
            print("FAILED: %s: %s" % (label, e))

    base = rows.get("torch.compile", {})
    eager = rows["PyTorch eager"]
    cell = " %10s%15s%9s"
    print("%-21s" % "" + "".join("%34s" % threads_label(th) for th in a.threads))
    print("%-21s" % "" + cell % ("ms", "/torch.compile", "/eager") * len(a.threads))
    for label, t in rows.items():
        print("%-21s" % label + "".join(
            cell % (fmt(t.get(th)), fmt_ratio(t.get(th), base.get(th)),
                    fmt_ratio(t.get(th), eager.get(th)))
            for th in a.threads))
    if not tc.has_interpret:
        print("(tcompile --help lists no --interpret: the row is `tcompile run` as it is, "
              "the interpreter before issue 16)")
    ratio = ("; ratio torch.compile / tcompile %.1f" % (ind["cold_s"] * 1e3 / cold)
             if ind and cold else "")
    print("cold compile (%s): torch.compile %s, tcompile %s%s"
          % (threads_label(a.threads[0]), "%.2f s" % ind["cold_s"] if ind else "-",
             "%.1f ms" % cold if cold is not None else
             "- (tcompile run printed no 'compile took X ms')", ratio))
    if ind:
        print("torch.compile's compile time: " + ", ".join(
            "%s %.2f s" % (threads_label(int(th)), t) for th, t in ind["compile_s"].items())
            + " (the first cold, the others in the same process)")
    if warm_start is not None:
        print("warm start (tcompile run, whole process, cache hot, %s): %.1f ms"
              % (threads_label(a.threads[-1]), warm_start))
    if name in MEMORY_BOUND:
        moved = (tensors_bytes(prefix + ".pt") + tensors_bytes(prefix + "_inputs.pt")
                 + tensors_bytes(prefix + "_expected.pt"))
        print("bytes it must move: %.1f MB; copy of the same bytes (%.1f MB read, as many written):"
              % (moved / 1e6, moved / 2e6))
        for th in a.threads:
            best, t_memcpy, t_copy = copy_ms(moved // 2, th, a.budget)
            cells = ", ".join("%s %.0f%%" % (label, 100 * best / t[th])
                              for label, t in rows.items() if t.get(th))
            print("  %s: memcpy %.1f GB/s, torch copy_ %.1f GB/s; %% of the faster: %s"
                  % (threads_label(th), moved / t_memcpy / 1e6, moved / t_copy / 1e6,
                     cells))
    for n in dict.fromkeys(notes):
        print("tcompile said: " + n)
    sanity = ", ".join("%s %s %.3g" % (label, threads_label(th), d)
                       for label, th, d in diffs)
    if ind:
        sanity += ", torch.compile %.3g" % ind["max_diff"]
    print("max abs diff against PyTorch eager (atol %g, rtol %g): %s" % (atol, rtol, sanity))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help="comma-separated, of %s" % ", ".join(MODELS))
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    p.add_argument("--no-inductor", dest="inductor", action="store_false",
                   help="leave torch.compile out (it takes minutes)")
    p.add_argument("--tcompile", help="the tcompile to run (default bin/tcompile/tcompile "
                   "under the current folder, else under the source tree)")
    p.add_argument("--work", help="the work folder (default $TMPDIR/tensorkit-bench-compile)")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--budget", type=float, default=0.5,
                   help="seconds of repeats per measurement (default 0.5)")
    p.add_argument("--inductor-child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    try:
        a.threads = [int(t) for t in a.threads.split(",")]
        if not a.threads or min(a.threads) < 1:
            raise ValueError
    except ValueError:
        p.error("--threads: '%s' is not a list of counts from 1" % a.threads)
    if a.inductor_child:
        return inductor_child(a.inductor_child, a.threads, a.budget)
    names = a.models.split(",")
    for n in names:
        if n not in MODELS:
            p.error("--models: no model '%s' (%s)" % (n, ", ".join(MODELS)))
    torch = torch2()
    if torch is None:
        print("compile.py: needs PyTorch 2.x in %s: skipped" % sys.executable)
        return 0
    if not a.tcompile:
        a.tcompile = next((c for c in ("bin/tcompile/tcompile",
                                       os.path.join(SRC, "bin/tcompile/tcompile"))
                           if os.access(c, os.X_OK)), None)
        if not a.tcompile:
            p.error("no bin/tcompile/tcompile here or in %s (build it, or give --tcompile)" % SRC)
    a.work = a.work or os.path.join(tempfile.gettempdir(), "tensorkit-bench-compile")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    tc = Tcompile(os.path.abspath(a.tcompile), a.work)
    print("PyTorch %s, %s; load %s; ratios are time / baseline's time (below 1: faster)"
          % (torch.__version__, a.tcompile, open("/proc/loadavg").read().split()[0]))
    failures = []
    start = time.time()
    try:
        for n in names:
            try:
                bench_model(n, a, tc, failures)
            except Failure as e:
                failures.append("%s: %s" % (n, e))
                print("FAILED: %s" % e)
    finally:
        if not a.keep:
            shutil.rmtree(a.work, ignore_errors=True)
    print("\n%.0f s" % (time.time() - start))
    if failures:
        print("compile.py: %d failure%s:" % (len(failures), "s" if len(failures) > 1 else ""),
              file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
