# PyTorch's TCPStore, server and one client in this process: set, get, add
# per second (sequential), as bench/dist/bench_dist store times ours.
import sys, time, datetime
import torch
import torch.distributed as dist

ops = int(sys.argv[1])
port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
if port:  # a client of another server (ours)
    s = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=60))
else:
    s = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=60))
keys = ["k%d" % (i % 1000) for i in range(ops)]
t0 = time.perf_counter()
for k in keys:
    s.set(k, "value")
rs = ops / (time.perf_counter() - t0)
t0 = time.perf_counter()
for k in keys:
    s.get(k)
rg = ops / (time.perf_counter() - t0)
t0 = time.perf_counter()
for _ in range(ops):
    s.add("counter", 1)
ra = ops / (time.perf_counter() - t0)
print("%.0f %.0f %.0f %s" % (rs, rg, ra, torch.__version__))
