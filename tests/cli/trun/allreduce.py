"""Run under trun: init_process_group("gloo") from trun's environment and an
allreduce; every rank checks the sum and prints it."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
want = world * (world + 1) / 2
assert t.item() == want, (t.item(), want)
print(f"allreduce {t.item():g} torch {torch.__version__.split('.')[0]}", flush=True)
dist.barrier()
dist.destroy_process_group()
