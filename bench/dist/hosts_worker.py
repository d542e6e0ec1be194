"""bench/dist/hosts.sh's worker: a gloo world over trun's or torchrun's
environment; prints "formed" after a first allreduce, then with "loop"
allreduces every 50 ms until a peer is gone (gloo raises: the worker fails)."""
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print("formed", flush=True)
while sys.argv[1:] == ["loop"]:
    dist.all_reduce(t)
    time.sleep(0.05)
dist.destroy_process_group()
