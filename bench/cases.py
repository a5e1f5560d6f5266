"""What is measured: one Case per row of the table.

A case holds one statement per library, evaluated in the case's namespace
(numpy inputs as x, y; torch views of the same memory as tx, ty). The value of
the statement is its result, checked once against numpy's with allclose.
"""
from dataclasses import dataclass, field

import numpy as np

from bench import grad_cases

F32 = 4  # bytes per float32


@dataclass
class Case:
    id: str            # stable JSON key, e.g. "elementwise.exp"
    group: str         # table section
    title: str
    shape: tuple
    unit: str          # "time" (per call), "GB/s" or "GFLOP/s"
    work: float        # bytes moved (GB/s) or flops (GFLOP/s); unused for "time"
    stmts: dict        # {lib: statement}
    namespace: dict = field(repr=False)
    # Makes extra namespace entries just before the case runs; they are
    # dropped after it (leaves that require gradients switch opforge's
    # recorder on for as long as they live: other cases must not pay for it).
    setup: object = field(default=None, repr=False)
    rtol: float = 1e-5
    atol: float = 0.0
    # Timed by the thread's CPU time, not the wall clock: single-threaded tiny
    # calls on a loaded machine (time spent descheduled is the load's, not the
    # library's, and landed on whichever library was running).
    cpu_time: bool = False


@dataclass(frozen=True)
class Sizes:
    large: int           # elements for the large elementwise ops and reductions
    row: int             # row length of the last-axis reduction
    matmul: tuple        # square sizes
    small_matmul: int    # the dispatch-bound matmul


FULL = Sizes(large=10_000_000, row=1000, matmul=(256, 512, 1024, 2048), small_matmul=16)
QUICK = Sizes(large=100_000, row=1000, matmul=(32, 64), small_matmul=16)


def _namespace(torch, of, **arrays):
    ns = {"np": np, "of": of, "torch": torch, **arrays}
    if torch is not None:
        ns.update({"t" + k: torch.from_numpy(v) for k, v in arrays.items()})
    return ns


def _stmts(numpy, opforge, torch_stmt, torch):
    s = {"numpy": numpy, "opforge": opforge}
    if torch is not None:
        s["torch"] = torch_stmt
    return s


def build(sizes, of, torch):
    rng = np.random.default_rng(0)

    def normal(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    def uniform(*shape):
        # Positive data for sums: a relative tolerance then catches a dropped block.
        return rng.random(shape, dtype=np.float32)

    cases = []

    def add(id, group, title, shape, unit, work, numpy, opforge, torch_stmt, arrays, **tol):
        cases.append(Case(id, group, title, shape, unit, work,
                          _stmts(numpy, opforge, torch_stmt, torch),
                          _namespace(torch, of, **arrays), **tol))

    # Dispatch: the work is trivial, so this is the cost of getting to the kernel.
    for n in (1, 1000):
        add(f"dispatch.add_{n}", "dispatch", f"add, {n} float32", (n,), "time", 0,
            "np.add(x, y)", "of.add(x, y)", "torch.add(tx, ty)",
            {"x": normal(n), "y": normal(n)})
    # The Tensor operator (a C slot calling the op) beside numpy's.
    for n in (1, 1000):
        add(f"dispatch.tensor_add_{n}", "dispatch", f"t + t, {n} float32 Tensors", (n,), "time", 0,
            "x + y", "ox + oy", "tx + ty", {"x": normal(n), "y": normal(n)})
        cases[-1].namespace.update(ox=of.tensor(cases[-1].namespace["x"]), oy=of.tensor(cases[-1].namespace["y"]))
    add("dispatch.sum_1000", "dispatch", "sum, 1000 float32", (1000,), "time", 0,
        "np.sum(x)", "of.sum(x)", "torch.sum(tx)", {"x": uniform(1000)})
    m = sizes.small_matmul
    add(f"dispatch.matmul_{m}", "dispatch", f"matmul {m}x{m} float32", (m, m), "time", 0,
        "np.matmul(x, y)", "of.matmul(x, y)", "torch.matmul(tx, ty)",
        {"x": normal(m, m), "y": normal(m, m)}, rtol=1e-4, atol=1e-4)
    add("dispatch.sum_axis1_keepdims", "dispatch", "sum(axis=1, keepdims=True), 16x64",
        (16, 64), "time", 0,
        "np.sum(x, axis=1, keepdims=True)", "of.sum(x, axis=1, keepdims=True)",
        "torch.sum(tx, dim=1, keepdim=True)", {"x": uniform(16, 64)})

    # numpy functions called on opforge Tensors (__array_ufunc__ / __array_function__):
    # the cost of numpy's protocol dispatch on top of the op; opforge's inputs are
    # Tensors sharing the arrays' memory.
    for name, stmt, torch_stmt, title in (
            ("add", "np.add({x}, {y})", "torch.add(tx, ty)", "np.add on Tensors, 1000 float32"),
            ("sum", "np.sum({x})", "torch.sum(tx)", "np.sum on a Tensor, 1000 float32")):
        x = normal(1000)
        y = normal(1000)
        add(f"protocol.{name}_1000", "protocol", title, (1000,), "time", 0,
            stmt.format(x="x", y="y"), stmt.format(x="ox", y="oy"), torch_stmt,
            {"x": x, "y": y}, rtol=1e-4)
        cases[-1].namespace.update(ox=of.tensor(x), oy=of.tensor(y))

    # Large elementwise: bandwidth, counting each input read and output written once
    # (numpy's sigmoid temporaries are its own overhead, not counted as work).
    n = sizes.large
    add("elementwise.add", "elementwise", f"add, {n:,} float32, allocating", (n,), "GB/s",
        3 * F32 * n, "np.add(x, y)", "of.add(x, y)", "torch.add(tx, ty)",
        {"x": normal(n), "y": normal(n)})
    # numpy and torch write exp into a preallocated out=; opforge allocates.
    add("elementwise.exp", "elementwise", f"exp, {n:,} float32 (numpy: out=)", (n,), "GB/s",
        2 * F32 * n, "np.exp(x, out=o)", "of.exp(x)", "torch.exp(tx, out=to)",
        {"x": normal(n), "o": np.empty(n, np.float32)}, atol=1e-6)
    add("elementwise.sigmoid", "elementwise", f"sigmoid, {n:,} float32 (numpy: 1/(1+exp(-x)))",
        (n,), "GB/s", 2 * F32 * n, "1 / (1 + np.exp(-x))", "of.sigmoid(x)",
        "torch.sigmoid(tx)", {"x": normal(n)}, atol=1e-6)

    # Reductions.
    add("reduction.sum_all", "reduction", f"sum, {n:,} float32, all axes", (n,), "GB/s",
        F32 * n + F32, "np.sum(x)", "of.sum(x)", "torch.sum(tx)", {"x": uniform(n)})
    rows = max(n // sizes.row, 1)
    add("reduction.sum_last_axis", "reduction", f"sum, ({rows:,}, {sizes.row}) float32, axis=-1",
        (rows, sizes.row), "GB/s", F32 * (rows * sizes.row + rows),
        "np.sum(x, axis=-1)", "of.sum(x, axis=-1)", "torch.sum(tx, dim=-1)",
        {"x": uniform(rows, sizes.row)})

    # Matmul: GFLOP/s at 2 n^3 flops. Float32 dot products of length n drift by
    # about eps * n relative to numpy's BLAS, hence atol grows with n.
    for m in sizes.matmul:
        add(f"matmul.{m}", "matmul", f"matmul {m}x{m} float32", (m, m), "GFLOP/s", 2.0 * m ** 3,
            "np.matmul(x, y)", "of.matmul(x, y)", "torch.matmul(tx, ty)",
            {"x": normal(m, m), "y": normal(m, m)}, rtol=1e-4, atol=1e-5 * m)

    # A Linear layer on numpy weights as users write it: w.T is a view (no copy).
    add("matmul.linear_view", "matmul", "x @ w.T, [1, 768] @ [768, 768].T float32 (numpy view)", (1, 768),
        "GFLOP/s", 2.0 * 768 * 768, "x @ w.T", "of.matmul(x, w.T)", "torch.matmul(tx, tw.T)",
        {"x": normal(1, 768), "w": normal(768, 768)}, rtol=1e-4, atol=1e-4 * 768 ** 0.5)

    # Backward ops (gen_grad_ops) beside the numpy (and torch) expressions they replace.
    r = sizes.row
    add("backward.softmax_grad", "backward", f"softmax_grad, ({rows:,}, {r}) float32", (rows, r), "GB/s",
        3 * F32 * rows * r, "s * (g - (g * s).sum(-1, keepdims=True))", "of.raw_ops.softmax_grad(s, g)",
        "torch._softmax_backward_data(tg, ts, -1, ts.dtype)",
        {"s": uniform(rows, r) / r, "g": normal(rows, r)}, rtol=1e-4, atol=1e-6)
    rms_np = ("(lambda q: (q * g * w - x * (q ** 3 / x.shape[-1]) * (g * w * x).sum(-1, keepdims=True),"
              " (g * x * q).sum(0)))(1 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6))")
    rms_torch = ("(lambda q: (q * tg * tw - tx * (q ** 3 / tx.shape[-1]) * (tg * tw * tx).sum(-1, keepdim=True),"
                 " (tg * tx * q).sum(0)))(1 / torch.sqrt((tx * tx).mean(-1, keepdim=True) + 1e-6))")
    add("backward.rms_norm_grad", "backward", f"rms_norm_grad, ({rows:,}, {r}) float32", (rows, r), "GB/s",
        4 * F32 * rows * r, rms_np, "of.raw_ops.rms_norm_grad(x, w, g)", rms_torch,
        {"x": normal(rows, r), "w": normal(r), "g": normal(rows, r)}, rtol=1e-3, atol=1e-3)
    tall = 4096 if sizes is FULL else 256
    for name, (bm, k, n_) in (("mlp", (64, 784, 256)), ("tall", (tall, 256, 256))):
        add(f"backward.matmul_grad_{name}", "backward", f"mat_mul_grad [{bm}, {k}] @ [{k}, {n_}] float32",
            (bm, k, n_), "GFLOP/s", 4.0 * bm * k * n_, "(g @ b.T, a.T @ g)", "of.raw_ops.mat_mul_grad(a, b, g)",
            "(tg @ tb.T, ta.T @ tg)", {"a": normal(bm, k), "b": normal(k, n_), "g": normal(bm, n_)},
            rtol=1e-3, atol=1e-3 * bm)
    bt = 16 if sizes is FULL else 2
    add("backward.matmul_grad_batched", "backward", f"mat_mul_grad [{bt}, 256, 256] @ [256, 256] float32",
        (bt, 256, 256), "GFLOP/s", 4.0 * bt * 256 ** 3, "(g @ b.T, a.reshape(-1, 256).T @ g.reshape(-1, 256))",
        "of.raw_ops.mat_mul_grad(a, b, g)", "(tg @ tb.T, ta.reshape(-1, 256).T @ tg.reshape(-1, 256))",
        {"a": normal(bt, 256, 256), "b": normal(256, 256), "g": normal(bt, 256, 256)}, rtol=1e-3, atol=0.1)

    # Training (issue 12): needs opforge.nn and opforge.optim.
    from bench import train_cases
    setups = train_cases.build(lambda *a, **k: cases.append(Case(a[0], a[1], a[2], a[3], a[4], a[5],
                                                                 _stmts(a[6], a[7], a[8], torch), a[9], **k)),
                               sizes.large, of, torch, sizes is QUICK)
    # Gradients: tensors that require them are made by each case's setup.
    setups += grad_cases.build(add, of, torch, rng)
    for case_id, setup in setups:
        next(c for c in cases if c.id == case_id).setup = setup
    for c in cases:
        c.cpu_time = c.group in ("dispatch", "protocol") or c.id.startswith("grad.add_1")
    return cases
