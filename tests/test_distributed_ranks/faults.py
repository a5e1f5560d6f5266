"""Run under mpiexec with 2 processes; argv[1] says what rank 1 does instead
of the collective rank 0 calls: 'stuck' (sleeps), 'dies' (os._exit), 'raises'
(an uncaught exception). Rank 0 prints 'ERROR <message>' if its collective
raised, and exits 1."""
import os
import sys
import time

import numpy as np

import opforge as of
import opforge.distributed as dist

dist.init(timeout=float(sys.argv[2]) if len(sys.argv) > 2 else 3.0)
dist.barrier()
if dist.rank() == 1:
    if sys.argv[1] == "stuck":
        time.sleep(20)
    elif sys.argv[1] == "dies":
        os._exit(3)
    else:
        raise RuntimeError("rank 1 gives up")
    sys.exit(0)
try:
    dist.allreduce(np.ones(4, np.float32), name="grad")
except of.errors.OpError as e:
    print("ERROR", type(e).__name__, e, flush=True)
    try:  # later collectives fail at once, not after another timeout
        dist.allreduce(np.ones(4, np.float32), name="again")
    except of.errors.OpError as e2:
        print("AGAIN", e2, flush=True)
    sys.exit(1)
print("NO ERROR", flush=True)
