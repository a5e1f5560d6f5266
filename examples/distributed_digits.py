"""Trains the digits MLP of examples/train_digits.py data-parallel on several processes.

    pip install "opforge[mpi,train]"
    python -m opforge.distributed.run -np 2 python examples/distributed_digits.py

Each process takes its share of every epoch (DistributedSampler), computes
gradients on it, and DistributedOptimizer averages them across processes
(one fused allreduce per step) before Adam updates the weights, so every
process holds the same model. Rank 0 starts everyone from its weights
(broadcast_parameters) and reports the test accuracy.
"""
import argparse

import numpy as np

import opforge as of
import opforge.distributed as dist
from digits_common import accuracy
from train_digits import build_model, load_data


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64, help="per process")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    dist.init()
    rank, size = dist.rank(), dist.size()
    x_tr, y_tr, x_te, y_te = load_data(args.seed)
    model = build_model(args.seed + rank, dropout=0.0)
    dist.broadcast_parameters(model)  # the seeds differ per rank: rank 0's weights win
    opt = dist.DistributedOptimizer(of.optim.Adam(model.parameters(), lr=args.lr * size))
    sampler = dist.DistributedSampler(len(x_tr), seed=args.seed)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = sampler.indices()
        total = 0.0
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size]
            loss = of.nn.functional.cross_entropy(model(x_tr[idx]), y_tr[idx])
            loss.backward()
            opt.step()
            opt.zero_grad()
            total += float(loss.numpy()) * len(idx)
        mean_loss = float(dist.allreduce(np.float64(total / len(order)), op="average", name="loss"))
        if rank == 0 and (epoch % 5 == 4 or epoch == args.epochs - 1):
            print(f"epoch {epoch + 1}: mean training loss {mean_loss:.4f}", flush=True)
    if rank == 0:
        print(f"{size} processes: test accuracy {accuracy(model, x_te, y_te):.3f}")


if __name__ == "__main__":
    main()
