"""Run under trun --max-restarts 1: every rank joins init_process_group("gloo")
and an allreduce; in attempt 0 rank 1 then exits 3, so the group restarts,
and attempt 1 must build its gloo mesh anew (from that attempt's addresses)
and finish its allreduce and barrier."""
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
assert t.item() == world * (world + 1) / 2, t.item()
if attempt == 0 and rank == 1:
    # os._exit, not sys.exit: at interpreter exit 2.x's gloo threads may
    # still run, and its destructors then abort (SIGABRT instead of 3)
    sys.stdout.flush()
    os._exit(3)
dist.barrier()
major = torch.__version__.split(".")[0]
print(f"attempt {attempt} allreduce {t.item():g} torch {major}", flush=True)
dist.destroy_process_group()
