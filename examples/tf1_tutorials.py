"""Three TensorFlow 1 tutorial programs on opforge: linear regression, a
softmax classifier and an MLP trained with Adam, each written once and run
two ways from the same seed:

- graph mode, as TensorFlow 1 wrote it: placeholders, ``of.Variable``,
  ``opt.minimize(loss)`` (one train op), ``global_variables_initializer``,
  ``Session.run``, and ``of.train.Saver`` for the checkpoint;
- eager mode: the same variables and optimizer, ``opt.minimize(loss_fn)``.

    python examples/tf1_tutorials.py                 # all three: train, compare, save, restore elsewhere
    python examples/tf1_tutorials.py --steps 300 --program mlp

For each program it prints the final loss of both modes (they agree within
1e-5), saves a checkpoint, restores it in a new process that rebuilds the
graph, and checks the restored model predicts exactly what the trained one did.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import opforge as of

# name -> (input dim, layer widths, loss, optimizer, learning rate, batch)
PROGRAMS = {
    "linear": dict(d_in=3, widths=[1], loss="mse", opt="sgd", lr=0.1, n=256),
    "softmax": dict(d_in=64, widths=[10], loss="xent", opt="sgd", lr=0.5, n=512),
    "mlp": dict(d_in=64, widths=[32, 10], loss="xent", opt="adam", lr=0.01, n=512),
}


def make_data(program, seed):
    """Generated data: a linear target with noise, or class labels of a hidden model."""
    spec = PROGRAMS[program]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((spec["n"], spec["d_in"])).astype(np.float32)
    if program == "linear":
        y = x @ np.array([[2.0], [-3.0], [0.5]], np.float32) + 1.0
        return x, (y + 0.1 * rng.standard_normal(y.shape)).astype(np.float32)
    hidden = np.tanh(x @ rng.standard_normal((spec["d_in"], 16)))
    if program == "softmax":
        hidden = x @ rng.standard_normal((spec["d_in"], 16))
    return x, np.argmax(hidden @ rng.standard_normal((16, 10)), axis=1).astype(np.int64)


def initial_weights(program, seed):
    """[W0, b0, W1, b1, ...]: Glorot-uniform weights, zero biases."""
    spec = PROGRAMS[program]
    rng = np.random.default_rng(seed + 1)
    out, fan_in = [], spec["d_in"]
    for width in spec["widths"]:
        limit = np.sqrt(6.0 / (fan_in + width))
        out += [rng.uniform(-limit, limit, (fan_in, width)).astype(np.float32), np.zeros(width, np.float32)]
        fan_in = width
    return out


def model(params, x):
    """The forward pass, the same code in both modes."""
    h = x
    for i in range(0, len(params), 2):
        h = of.matmul(h, params[i]) + params[i + 1]
        if i + 2 < len(params):
            h = of.relu(h)
    return h


def loss_of(program, out, y):
    if PROGRAMS[program]["loss"] == "mse":
        return of.nn.functional.mse_loss(out, y)
    return of.nn.functional.cross_entropy(out, y)


def optimizer(program, params=None):
    spec = PROGRAMS[program]
    if spec["opt"] == "adam":
        return of.optim.Adam(params, lr=spec["lr"])
    return of.optim.SGD(params, lr=spec["lr"])


def build_graph(program, seed):
    """The TensorFlow 1 program: returns (graph, handles by name)."""
    spec = PROGRAMS[program]
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, [None, spec["d_in"]], name="x")
        y = (of.placeholder(of.float32, [None, 1], name="y") if spec["loss"] == "mse"
             else of.placeholder(of.int64, [None], name="y"))
        params = [of.Variable(w, name=f"p{i}") for i, w in enumerate(initial_weights(program, seed))]
        out = model(params, x)
        loss = loss_of(program, out, y)
        train = optimizer(program).minimize(loss)
        init = of.global_variables_initializer()
        saver = of.train.Saver()
    return g, dict(x=x, y=y, out=out, loss=loss, train=train, init=init, saver=saver)


def train_graph(program, steps, seed):
    """Trains in graph mode; returns (losses, session, handles)."""
    x, y = make_data(program, seed)
    g, h = build_graph(program, seed)
    sess = of.Session(g)
    sess.run(h["init"])
    losses = [float(sess.run([h["loss"], h["train"]], {h["x"]: x, h["y"]: y})[0]) for _ in range(steps)]
    return losses, sess, h


def train_eager(program, steps, seed):
    """Trains eagerly; returns (losses, params)."""
    x, y = make_data(program, seed)
    params = [of.Variable(w, name=f"p{i}") for i, w in enumerate(initial_weights(program, seed))]
    opt = optimizer(program, params)
    losses = [float(opt.minimize(lambda: loss_of(program, model(params, x), y), var_list=params).numpy())
              for _ in range(steps)]
    return losses, params


def restore_and_predict(program, seed, checkpoint, out_path):
    """In a fresh process: rebuild the graph, restore, predict on the data."""
    x, _ = make_data(program, seed)
    g, h = build_graph(program, seed)
    with of.Session(g) as sess:
        h["saver"].restore(sess, checkpoint)
        np.save(out_path, sess.run(h["out"], {h["x"]: x}))


def run_program(program, steps, seed, workdir):
    g_losses, sess, h = train_graph(program, steps, seed)
    e_losses, _ = train_eager(program, steps, seed)
    x, _ = make_data(program, seed)
    ckpt = os.path.join(workdir, f"{program}.safetensors")
    h["saver"].save(sess, ckpt)
    predicted = sess.run(h["out"], {h["x"]: x})
    sess.close()
    restored = os.path.join(workdir, f"{program}_restored.npy")
    subprocess.run([sys.executable, __file__, "--restore", ckpt, "--program", program, "--seed", str(seed),
                    "--out", restored], check=True)
    same = bool(np.array_equal(np.load(restored), predicted))
    return dict(graph_loss=g_losses[-1], eager_loss=e_losses[-1], first_loss=g_losses[0],
                max_gap=max(abs(a - b) for a, b in zip(g_losses, e_losses)), restored_identical=same)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--program", choices=sorted(PROGRAMS), action="append")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--restore", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.restore:
        restore_and_predict(args.program[0], args.seed, args.restore, args.out)
        return 0
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for program in args.program or list(PROGRAMS):
            r = run_program(program, args.steps, args.seed, work)
            good = r["max_gap"] <= 1e-5 and r["restored_identical"]
            ok = ok and good
            print(f"{program:8s} loss {r['first_loss']:.4f} -> graph {r['graph_loss']:.6f}, eager "
                  f"{r['eager_loss']:.6f} (largest gap {r['max_gap']:.1e}); restored in a new process: "
                  f"{'identical' if r['restored_identical'] else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
