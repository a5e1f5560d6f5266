"""opforge.distributed: data-parallel training on MPI, horovod-style.

    import opforge as of
    import opforge.distributed as dist

    dist.init()                                   # once per process
    model = ...; opt = of.optim.Adam(model.parameters())
    dist.broadcast_parameters(model)              # everyone starts from rank 0's weights
    opt = dist.DistributedOptimizer(opt)          # step() averages gradients first
    for idx in batches(dist.DistributedSampler(len(data))): ...

Start the processes with ``python -m opforge.distributed.run -np 2 python
train.py`` (the mpich wheel's mpiexec) or a cluster's own mpirun. The
collectives are ops of a separately built op library (cpp/libraries/mpi/),
built against MPI on first use and loaded with ``load_op_library``. Needs
``pip install 'opforge[mpi]'``; ``import opforge`` never imports MPI.
"""
from opforge.distributed._collectives import (allgather, allreduce, alltoall, barrier, broadcast,
                                              grouped_allreduce, init, is_initialized, local_rank, local_size,
                                              rank, set_timeout, size, split_fused)
from opforge.distributed._graph import broadcast_variables
from opforge.distributed._optimizer import (DistributedOptimizer, broadcast_optimizer_state,
                                            broadcast_parameters, overlap_default)
from opforge.distributed._sampler import DistributedSampler

__all__ = ["init", "is_initialized", "rank", "size", "local_rank", "local_size", "set_timeout", "allreduce",
           "allgather", "broadcast", "alltoall", "barrier", "grouped_allreduce", "split_fused",
           "DistributedOptimizer", "broadcast_parameters", "broadcast_optimizer_state", "broadcast_variables",
           "overlap_default", "DistributedSampler"]
