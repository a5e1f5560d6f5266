"""of.utils.data: batching, seeded shuffling, drop_last, the prefetch thread, collation, errors."""

import threading

import numpy as np
import pytest

import opforge as of
from opforge import errors
from opforge.utils.data import DataLoader, Dataset, TensorDataset

X = np.arange(20, dtype=np.float32).reshape(10, 2)
Y = np.arange(10)


def test_batches_in_order():
    ds = TensorDataset(X, Y)
    assert len(ds) == 10 and [int(v) for v in ds[3][1].numpy().ravel()] == [3]
    for prefetch in (0, 2):
        batches = list(DataLoader(ds, batch_size=4, prefetch=prefetch))
        assert [b[0].shape for b in batches] == [(4, 2), (4, 2), (2, 2)]
        assert isinstance(batches[0][0], of.Tensor)
        assert np.array_equal(np.concatenate([b[1].numpy() for b in batches]), Y)
    assert len(DataLoader(ds, batch_size=4)) == 3 and len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert [b[0].shape[0] for b in DataLoader(ds, batch_size=4, drop_last=True)] == [4, 4]


def test_seeded_shuffling():
    ds = TensorDataset(X, Y)
    loader = DataLoader(ds, batch_size=3, shuffle=True, seed=7)
    e1 = np.concatenate([b[1].numpy() for b in loader])
    e2 = np.concatenate([b[1].numpy() for b in loader])
    assert sorted(e1) == list(Y) and not np.array_equal(e1, Y) and not np.array_equal(e1, e2)  # new order per epoch
    again = DataLoader(ds, batch_size=3, shuffle=True, seed=7)
    assert np.array_equal(np.concatenate([b[1].numpy() for b in again]), e1)
    for x, y in DataLoader(ds, batch_size=3, shuffle=True, seed=1):  # rows stay paired
        assert np.array_equal(x.numpy()[:, 0], 2 * y.numpy())
    of.manual_seed(3)  # without seed=: of.manual_seed repeats the order
    a = np.concatenate([b[1].numpy() for b in DataLoader(ds, batch_size=5, shuffle=True)])
    of.manual_seed(3)
    assert np.array_equal(np.concatenate([b[1].numpy() for b in DataLoader(ds, batch_size=5, shuffle=True)]), a)


class Squares(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": np.full(3, i, np.float64), "y": i * i}


def test_sampler_gives_the_order():
    from opforge.distributed import DistributedSampler
    ds = TensorDataset(X, Y)
    shares = []
    for rank in range(3):
        sampler = DistributedSampler(len(ds), num_replicas=3, rank=rank, shuffle=True, seed=4)
        loader = DataLoader(ds, batch_size=2, sampler=sampler)
        got = np.concatenate([b[1].numpy() for b in loader])
        assert np.array_equal(got, sampler.indices()) and len(loader) == 2
        shares.append(got)
    assert sorted(set(np.concatenate(shares))) == list(Y)  # padded to 12: every sample somewhere
    with pytest.raises(errors.InvalidArgumentError, match="exclusive"):
        DataLoader(ds, sampler=[0, 1], shuffle=True)
    assert [b[1].numpy().tolist() for b in DataLoader(ds, batch_size=2, sampler=[9, 0, 3])] == [[9, 0], [3]]


def test_custom_dataset_and_collate():
    batches = list(DataLoader(Squares(), batch_size=2))
    assert batches[0]["x"].shape == (2, 3) and batches[0]["y"].numpy().tolist() == [0, 1]
    assert batches[-1]["y"].numpy().tolist() == [16]
    single = list(DataLoader(Squares(), batch_size=None))
    assert len(single) == 5 and single[2]["y"] == 4
    custom = list(DataLoader(Squares(), batch_size=5, collate_fn=lambda s: len(s)))
    assert custom == [5]


def test_prefetch_runs_ahead_on_a_thread():
    seen = []

    class Slow(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            seen.append(threading.current_thread().name)
            return np.float32(i)

    it = iter(DataLoader(Slow(), batch_size=2, prefetch=2))
    first = next(it)
    assert first.numpy().tolist() == [0, 1]
    assert set(seen) == {"opforge-prefetch"}
    assert [b.numpy().tolist() for b in it] == [[2, 3], [4, 5]]


def test_an_iterator_dropped_early_stops_its_thread():
    import gc
    it = iter(DataLoader(TensorDataset(np.arange(1000.0)), batch_size=1, prefetch=2))
    next(it)
    thread = it._thread
    del it
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_errors_reach_the_consumer():
    class Broken(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                raise KeyError("sample 2 is missing")
            return np.float32(i)

    it = iter(DataLoader(Broken(), batch_size=1, prefetch=2))
    assert next(it).numpy().tolist() == [0]
    next(it)
    with pytest.raises(KeyError, match="sample 2"):
        next(it)
    with pytest.raises(errors.InvalidArgumentError, match="rows"):
        TensorDataset(X, Y[:5])
    with pytest.raises(errors.InvalidArgumentError, match="batch_size"):
        DataLoader(TensorDataset(X), batch_size=0)
    with pytest.raises(errors.InvalidArgumentError, match="different shapes"):
        list(DataLoader([np.zeros(2), np.zeros(3)], batch_size=2, prefetch=0))


def test_trains_a_model_from_a_loader():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    model = of.nn.Linear(3, 1, seed=0)
    opt = of.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = of.nn.MSELoss()
    for _ in range(30):
        for xb, yb in DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, seed=0):
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
    assert float(loss_fn(model(x), y)) < 1e-4
