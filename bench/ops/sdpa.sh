#!/bin/sh
# scaled_dot_product_attention at sequence lengths 128 to 4096 (query, key
# and value 1 x 8 heads x L x 64 float32, no mask), forward and forward +
# backward, ours (bench/ops/bench_sdpa) against PyTorch's (2.x: its CPU
# flash-attention kernel) with the same thread count: the best of 3 runs
# in milliseconds, and the peak memory of a run after a warm-up run, above
# what the process held (MiB, VmHWM reset through /proc/self/clear_refs), with the ratios ours/PyTorch.
# Each run is a process of its own, so one peak does not hide the next.
# `make bench-sdpa` runs it alone, from the build folder.
set -e
. "$(dirname "$0")/../quick.sh"
n=${TN_NUM_THREADS:-$(nproc)}
export TN_NUM_THREADS=$n
py=python3
[ -n "$quick" ] && { quick_done "sdpa L=128 fwd, ours $(bench/ops/bench_sdpa 128 fwd | cut -d" " -f1) ms"; }
"$py" -c 'import torch, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null || {
    echo "sdpa: no PyTorch 2.x (python3): skipped"
    exit 0
}
printf '%-6s %-5s %10s %10s %7s %10s %10s %7s\n' L pass ours_ms torch_ms ratio ours_MiB torch_MiB ratio
for L in ${SDPA_LENGTHS:-128 256 512 1024 2048 4096}; do
    for pass in fwd train; do
        ours=$(bench/ops/bench_sdpa "$L" "$pass")
        theirs=$("$py" - "$L" "$pass" "$n" <<'PY'
import sys, time, torch
import torch.nn.functional as F
L, train, n = int(sys.argv[1]), sys.argv[2] == "train", int(sys.argv[3])
torch.set_num_threads(n)
q, k, v = (torch.randn(1, 8, L, 64) for _ in range(3))

def kib(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])

def step(q=q, k=k, v=v):
    if train:
        a, b, c = (x.detach().requires_grad_() for x in (q, k, v))
        F.scaled_dot_product_attention(a, b, c).sum().backward()
    else:
        F.scaled_dot_product_attention(q, k, v)

step(*(torch.randn(1, 8, 128, 64) for _ in range(3)))  # warm, as bench_sdpa
before = kib("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
step()
peak = (kib("VmHWM") - before) / 1024
best = 1e30
for _ in range(3):
    t0 = time.perf_counter()
    step()
    best = min(best, time.perf_counter() - t0)
print("%.2f %.1f" % (best * 1e3, peak))
PY
)
        echo "$L $pass $ours $theirs" | awk '{
            rt = $5 > 0 ? $3 / $5 : 0; rm = $6 > 0 ? $4 / $6 : 0
            printf "%-6s %-5s %10.2f %10.2f %7.2f %10.1f %10.1f %7.2f\n", $1, $2, $3, $5, rt, $4, $6, rm }'
    done
done
