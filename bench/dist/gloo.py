# One rank of a Gloo allreduce benchmark: bench/dist/allreduce.sh starts two.
# argv: rank port bytes iters; rank 0 prints microseconds per call (mean).
import sys, time, datetime
import torch
import torch.distributed as dist

rank, port, nbytes, iters = (int(a) for a in sys.argv[1:5])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                        world_size=2, timeout=datetime.timedelta(seconds=60))
t = torch.ones(nbytes // 4, dtype=torch.float32)
for _ in range(iters // 10 + 1):
    dist.all_reduce(t)
dist.barrier()
t0 = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(t)
dt = (time.perf_counter() - t0) / iters
if rank == 0:
    print("%.3f %s" % (dt * 1e6, torch.__version__))
dist.destroy_process_group()
