"""bench/io/dcp.py MIB DIR: PyTorch's dcp.save and dcp.load of the state
dict bench_dcp.c saves (16 float32 DTensors of 4096 columns sharded by rows
over 2 gloo ranks), run by bench/io/dcp.sh under torch.distributed.run.
Rank 0 prints "save_s X" and "load_s Y" (best of 2)."""
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

warnings.simplefilter("ignore")
mib, out = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2,))
rows = mib * 1024 * 1024 // (16 * 4096 * 4)
sd = {f"model.layer{i}.weight": distribute_tensor(torch.full((rows, 4096), float(i)), mesh, [Shard(0)])
      for i in range(16)}
best_s = best_l = 1e30
for rep in range(2):
    if dist.get_rank() == 0:
        os.sync()  # as bench_dcp.c: no dirty pages of the last save counted
    dist.barrier()
    t0 = time.perf_counter()
    dcp.save(sd, checkpoint_id=out)
    dist.barrier()
    t1 = time.perf_counter()
    dcp.load(sd, checkpoint_id=out)
    dist.barrier()
    t2 = time.perf_counter()
    best_s, best_l = min(best_s, t1 - t0), min(best_l, t2 - t1)
if dist.get_rank() == 0:
    print(f"save_s {best_s:.3f}\nload_s {best_l:.3f}")
dist.destroy_process_group()
