"""A tiny click-through model on a sparse embedding table, in graph mode.

    python train_ctr.py build/libsparse_table_ops.so

Each example is three categorical ids (user, item, hour of day); a
factorization machine scores it from rows of two sparse tables (a
weight per id, and a factor vector per id) that live in the Session as
resources: SparseTablePull makes an id's rows the first time it is seen,
and SparseTablePush applies Adagrad to the rows a batch pulled, with the
gradient that opforge.gradients adds to the graph. The clicks are drawn
from a hidden factor model, so the held-out log loss shows what was learned.
"""

import sys

import numpy as np

import opforge as of

FIELDS = {"user": 100, "item": 50, "hour": 24}  # ids per field
FACTORS = 4


def make_data(n, seed=0):
    """ids [n, 3] (each field's ids offset into one id space), clicks [n] drawn
    from a hidden model, and that model's click probabilities [n]."""
    rng = np.random.default_rng(seed)
    hidden = np.random.default_rng(1234)  # the same hidden model for every split
    u_f = hidden.normal(0, 0.9, (FIELDS["user"], FACTORS))
    i_f = hidden.normal(0, 0.9, (FIELDS["item"], FACTORS))
    i_b = hidden.normal(-1.0, 1.0, FIELDS["item"])
    h_b = 0.8 * np.sin(np.arange(FIELDS["hour"]) / 24 * 2 * np.pi)
    cols = [rng.integers(0, size, n) for size in FIELDS.values()]
    logit = (u_f[cols[0]] * i_f[cols[1]]).sum(1) + i_b[cols[1]] + h_b[cols[2]]
    p = 1 / (1 + np.exp(-logit))
    clicks = (rng.random(n) < p).astype(np.float32)
    offsets = np.cumsum([0] + list(FIELDS.values()))[:-1]
    ids = np.stack(cols, axis=1).astype(np.int64) + offsets
    return ids, clicks, p


def build(lib, learning_rate=0.5):
    """The graph: placeholders, loss, predictions and the two table updates."""
    g = of.Graph()
    with g.as_default():
        ids = of.placeholder(of.int64, [None, len(FIELDS)], name="ids")
        clicked = of.placeholder(of.float32, [None], name="clicked")
        weights = lib.sparse_table_pull(ids, table="ctr_weights", dim=1, seed=1)      # [B, F, 1]
        factors = lib.sparse_table_pull(ids, table="ctr_factors", dim=FACTORS, seed=2)  # [B, F, k]
        total = of.sum(factors, axis=[1])                                              # [B, k]
        pairs = 0.5 * of.sum(total * total - of.sum(factors * factors, axis=[1]), axis=[1])
        logit = of.sum(weights, axis=[1, 2]) + pairs
        # Log loss from logits without overflow: relu(z) - z*y + log(1 + exp(-|z|)).
        loss = of.mean(of.relu(logit) - logit * clicked + of.log(1.0 + of.exp(-of.abs(logit))))
        d_weights, d_factors = of.gradients(loss, [weights, factors])
        train = [lib.sparse_table_push(ids, d_weights, table="ctr_weights", dim=1, learning_rate=learning_rate),
                 lib.sparse_table_push(ids, d_factors, table="ctr_factors", dim=FACTORS,
                                       learning_rate=learning_rate)]
        size = lib.sparse_table_size(table="ctr_factors")
        prob = of.sigmoid(logit)
    return g, {"ids": ids, "clicked": clicked, "loss": loss, "prob": prob, "train": train,
               "size": size}


def log_loss(p, y):
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def train(library, epochs=6, batch=128, n_train=6000, n_test=2000, verbose=True):
    lib = of.load_op_library(library)
    ids, clicks, _ = make_data(n_train, seed=0)
    test_ids, test_clicks, test_p = make_data(n_test, seed=1)
    g, t = build(lib)
    history = []
    with of.Session(g) as sess:
        for epoch in range(epochs):
            order = np.random.default_rng(epoch).permutation(n_train)
            losses = []
            for start in range(0, n_train, batch):
                b = order[start:start + batch]
                loss, _ = sess.run([t["loss"], t["train"]], {t["ids"]: ids[b], t["clicked"]: clicks[b]})
                losses.append(loss)
            p = sess.run(t["prob"], {t["ids"]: test_ids})
            history.append((float(np.mean(losses)), log_loss(p, test_clicks)))
            if verbose:
                print(f"epoch {epoch}: train loss {history[-1][0]:.4f}, held-out log loss {history[-1][1]:.4f}")
        rows = int(sess.run(t["size"]))
    base = log_loss(np.full(n_test, clicks.mean()), test_clicks)
    best = log_loss(test_p, test_clicks)
    if verbose:
        print(f"held-out log loss of the click rate alone: {base:.4f}, of the hidden model: {best:.4f}; "
              f"table rows: {rows}")
    return {"history": history, "baseline": base, "hidden_model": best, "rows": rows}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    train(sys.argv[1])
