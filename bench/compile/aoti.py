#!/usr/bin/env python3
"""bench/compile/aoti.py: PyTorch's own AOTInductor packages run by
`tcompile run` (libtensor-aoti, no libtorch) against the same packages
under PyTorch (torch._inductor.aoti_load_package), in one run:

- run time: the fastest of --repeat runs of the package, ours from
  tcompile's --time, PyTorch's timed around the loaded runner's call
  (what a Python user calls) and, where the wheel ships its headers and
  g++ is there, around AOTIModelPackageLoader::run in a C++ program
  (bench/compile/aoti_loader.cpp, built once into the cache folder), at
  each --threads (OMP_NUM_THREADS for the package's kernels under all,
  torch.set_num_threads for ATen's ops; libtensor's fallback ops run on the
  calling thread, tcompile's default for packages);
- cold start: the wall time of a whole process that loads the package and
  runs it once (tcompile run, against the C++ program and python -c
  'import torch; aoti_load_package(...)(x)'), and of python -c 'import
  torch' alone; the median of --starts processes.

The packages come from tests/fixtures/aoti_packages.py's cache folder
(made there first when absent: minutes each). Prints one line per model
and thread count with the ratio PyTorch / tensorkit (above 1: we are
faster), then the cold starts. The machine is shared: figures are taken
under whatever load it has.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TORCH_RUN = r"""
import sys, time, torch
torch.set_num_threads(int(sys.argv[3]))
runner = torch._inductor.aoti_load_package(sys.argv[1])
inputs = list(torch.load(sys.argv[2]).values())
best = None
for _ in range(int(sys.argv[4])):
    t = time.perf_counter()
    runner(*inputs)
    t = time.perf_counter() - t
    best = t if best is None or t < best else best
print(best)
"""

TORCH_COLD = r"""
import sys, torch
runner = torch._inductor.aoti_load_package(sys.argv[1])
runner(*torch.load(sys.argv[2]).values())
"""


def env_for(threads):
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = str(threads)
    e.pop("TN_NUM_THREADS", None)  # tcompile's own choice for packages: 1
    e.setdefault("TN_AOTI_LIBDIR", os.path.join(os.getcwd(), "lib/aoti/.libs"))
    return e


def ours(tcompile, pkg, inputs, threads, repeat):
    r = subprocess.run([tcompile, "run", pkg, "-i", inputs, "-o", "/dev/null", "--time",
                        f"--repeat={repeat}"],
                       env=env_for(threads), capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"aoti.py: tcompile run {pkg} failed: {r.stderr.strip()}")
    for line in r.stderr.splitlines():
        if ": run took " in line:
            return float(line.split(": run took ")[1].split()[0]) * 1e-3
    sys.exit(f"aoti.py: no run time from tcompile: {r.stderr.strip()}")


def theirs(pkg, inputs, threads, repeat):
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", TORCH_RUN, pkg, inputs,
                        str(threads), str(repeat)], env=env_for(threads), capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(f"aoti.py: PyTorch's run of {pkg} failed: {r.stderr.strip()[-500:]}")
    return float(r.stdout.split()[-1])


def build_loader(cache):
    """The C++ baseline against the wheel's libtorch, or None (no headers,
    no g++, or it does not build: said once)."""
    import torch
    root = os.path.dirname(torch.__file__)
    src = os.path.join(SRC, "bench/compile/aoti_loader.cpp")
    exe = os.path.join(cache, "aoti_loader")
    if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(src):
        return exe
    inc = os.path.join(root, "include")
    if not os.path.isdir(os.path.join(inc, "torch/csrc/inductor/aoti_package")):
        print("no libtorch headers in the wheel: no C++ baseline")
        return None
    lib = os.path.join(root, "lib")
    r = subprocess.run(["g++", "-O2", "-std=c++20", "-I" + inc,
                        "-I" + os.path.join(inc, "torch/csrc/api/include"), src, "-o", exe,
                        "-L" + lib, "-Wl,--no-as-needed", "-ltorch", "-ltorch_cpu", "-lc10",
                        "-Wl,-rpath," + lib], capture_output=True, text=True)
    if r.returncode:
        print("the C++ baseline did not build: " + r.stderr.strip()[-300:])
        return None
    return exe


def sizes_of(inputs):
    import torch
    return [",".join(str(d) for d in t.shape) for t in torch.load(inputs).values()]


def cpp(loader, pkg, inputs, threads, repeat):
    r = subprocess.run([loader, pkg, str(repeat)] + sizes_of(inputs), env=env_for(threads),
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"aoti.py: {loader} {pkg} failed: {r.stderr.strip()[-500:]}")
    return float(r.stdout.split()[-1])


def wall(cmd, env, n):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env, capture_output=True)
        times.append(time.perf_counter() - t)
        if r.returncode:
            sys.exit(f"aoti.py: {' '.join(cmd)} failed: {r.stderr.decode()[-500:]}")
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tcompile", default="bin/tcompile/tcompile")
    ap.add_argument("--cache", default=os.environ.get(
        "TN_AOTI_CACHE", os.path.expanduser("~/.cache/tensorkit/aoti")))
    ap.add_argument("--models", default="linear_relu,mlp,cnn,block")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=500)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--no-cpp", action="store_true", help="leave out the C++ baseline")
    a = ap.parse_args()
    models = a.models.split(",")
    missing = [m for m in models if not os.path.exists(os.path.join(a.cache, m + ".pt2"))]
    if missing:
        print(f"making {', '.join(missing)} with AOTInductor (minutes)", flush=True)
        subprocess.run([sys.executable, "-W", "ignore",
                        os.path.join(SRC, "tests/fixtures/aoti_packages.py"), a.cache] + missing,
                       check=True)
    loader = None if a.no_cpp else build_loader(a.cache)
    print(f"run time, the fastest of {a.repeat} (us): PyTorch's package under "
          "tcompile run (libtensor-aoti) against aoti_load_package in Python and "
          "AOTIModelPackageLoader in C++; ratios theirs / ours")
    print(f"{'model':12} {'threads':>7} {'tensorkit':>10} {'Python':>10} {'ratio':>7} "
          f"{'C++':>10} {'ratio':>7}")
    for m in models:
        pkg, inputs = (os.path.join(a.cache, m + s) for s in (".pt2", "_inputs.pt"))
        for t in (int(x) for x in a.threads.split(",")):
            us, them = ours(a.tcompile, pkg, inputs, t, a.repeat), theirs(pkg, inputs, t, a.repeat)
            row = f"{m:12} {t:7} {us * 1e6:10.1f} {them * 1e6:10.1f} {them / us:6.2f}x"
            if loader:
                c = cpp(loader, pkg, inputs, t, a.repeat)
                row += f" {c * 1e6:10.1f} {c / us:6.2f}x"
            print(row, flush=True)
    m = models[0]
    pkg, inputs = (os.path.join(a.cache, m + s) for s in (".pt2", "_inputs.pt"))
    e = env_for(1)
    cold_us = wall([a.tcompile, "run", pkg, "-i", inputs, "-o", "/dev/null"], e, a.starts)
    cold_them = wall([sys.executable, "-W", "ignore", "-c", TORCH_COLD, pkg, inputs], e, a.starts)
    cold_import = wall([sys.executable, "-c", "import torch"], e, a.starts)
    cold_cpp = wall([loader, pkg, "1"] + sizes_of(inputs), e, a.starts) if loader else None
    print(f"cold start of {m} (load + one run, whole process, median of {a.starts}):")
    print(f"  tcompile run           {cold_us * 1e3:8.1f} ms")
    if cold_cpp:
        print(f"  C++ (libtorch)         {cold_cpp * 1e3:8.1f} ms  {cold_cpp / cold_us:6.1f}x ours")
    print(f"  aoti_load_package      {cold_them * 1e3:8.1f} ms  {cold_them / cold_us:6.1f}x ours")
    print(f"  python -c import torch {cold_import * 1e3:8.1f} ms  {cold_import / cold_us:6.1f}x ours")


if __name__ == "__main__":
    main()
