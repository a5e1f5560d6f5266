"""What the digits examples share: the data split, the training loop,
accuracy, and the save-and-reload check (train_digits.py, train_cnn_digits.py,
distributed_digits.py import it from beside them)."""

import os
import sys
import tempfile

import numpy as np

import opforge as of


def load_data(seed, prep):
    """scikit-learn's 1797 8x8 digits, split 75/25 (stratified), as float32
    features made by ``prep(x, x_train)`` and int64 labels."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    x, y = load_digits(return_X_y=True)  # shipped with scikit-learn, pixel values 0..16
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    return prep(x_tr, x_tr), y_tr.astype(np.int64), prep(x_te, x_tr), y_te.astype(np.int64)


def standardize(a, train):
    """Per pixel, with the training statistics (the MLP's input)."""
    mean, std = train.mean(0), train.std(0) + 1e-6
    return ((a - mean) / std).astype(np.float32)


def accuracy(model, x, y):
    model.eval()
    with of.no_grad():
        pred = of.argmax(model(x), axis=1).numpy()
    model.train()
    return float((pred == y).mean())


def train(model, x, y, epochs, batch_size, lr, seed, progress=True, min_batch=1):
    """Adam over shuffled batches (smaller than `min_batch`: skipped); the
    mean training loss of every epoch."""
    from tqdm import tqdm
    opt = of.optim.Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses = []
    bar = tqdm(range(epochs), desc="training", unit="epoch", disable=not progress, file=sys.stdout)
    for _ in bar:
        order = rng.permutation(len(x))
        total, seen, correct = 0.0, 0, 0
        for i in range(0, len(x), batch_size):
            idx = order[i:i + batch_size]
            if len(idx) < min_batch:
                continue
            logits = model(x[idx])
            loss = of.nn.functional.cross_entropy(logits, y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
            seen += len(idx)
            correct += int((of.argmax(logits, axis=1).numpy() == y[idx]).sum())
        losses.append(total / seen)
        bar.set_postfix(loss=f"{losses[-1]:.4f}", acc=f"{correct / seen:.3f}")
    return losses


def save_and_reload(model, x_te, y_te, save, default_name):
    """Saves the model (to `save`, else a temporary file), reloads it with
    of.nn.load_model; (where it went, bytes, identical weights, reloaded accuracy)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = save or os.path.join(tmp, default_name)
        model.save(path)
        reloaded = of.nn.load_model(path)
        same = all(np.array_equal(a.numpy(), b.numpy()) for (_, a), (_, b) in
                   zip(model.named_weights(), reloaded.named_weights()))
        where = (os.path.abspath(path) if save
                 else f"a temporary file, deleted on exit ({path}; --save PATH keeps it)")
        return where, os.path.getsize(path), same, accuracy(reloaded, x_te, y_te)


def add_common_args(parser, epochs, batch_size, lr, min_accuracy):
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", default=None, help="model file (default: a temporary one)")
    parser.add_argument("--min-accuracy", type=float, default=min_accuracy, help="exit 1 below this test accuracy")
    parser.add_argument("--no-progress", action="store_true")


def verdict(acc, acc2, same, min_accuracy):
    """The exit status: 0 when the reloaded model is identical and the accuracy is reached."""
    if same and acc2 == acc and acc >= min_accuracy:
        return 0
    print(f"FAILED: accuracy {acc:.4f} (need {min_accuracy}), reload identical: {same}", file=sys.stderr)
    return 1
