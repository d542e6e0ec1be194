"""bench/io/dcp.py MIB DIR: PyTorch's dcp.save and dcp.load of the state
dict bench_dcp.c saves (16 float32 DTensors of 4096 columns sharded by rows
over 2 gloo ranks), run by bench/io/dcp.sh under torch.distributed.run.
Rank 0 prints "save_s X" and "load_s Y" (best of 2), and for dcp.async_save
"async_s" (until it returns) and "async_total_s" (until its future is
done)."""
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
best_s = best_l = best_a = best_at = 1e30
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
    # async_save: the time the caller is held (staging), then until done
    if dist.get_rank() == 0:
        os.sync()
    dist.barrier()
    t3 = time.perf_counter()
    fut = dcp.async_save(sd, checkpoint_id=out)
    t4 = time.perf_counter()
    fut.result()
    t5 = time.perf_counter()
    dist.barrier()
    best_a, best_at = min(best_a, t4 - t3), min(best_at, t5 - t3)
if dist.get_rank() == 0:
    print(f"save_s {best_s:.3f}\nload_s {best_l:.3f}\nasync_s {best_a:.3f}\nasync_total_s {best_at:.3f}")
dist.destroy_process_group()
