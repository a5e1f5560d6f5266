"""What is measured: one Case per row of the table.

A case holds one statement per library, evaluated in the case's namespace
(numpy inputs as x, y; torch views of the same memory as tx, ty). The value of
the statement is its result, checked once against numpy's with allclose.
"""
from dataclasses import dataclass, field

import numpy as np

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
    rtol: float = 1e-5
    atol: float = 0.0


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

    # Training (issue 12): needs opforge.nn and opforge.optim.
    from bench import train_cases
    train_cases.build(lambda *a, **k: cases.append(Case(a[0], a[1], a[2], a[3], a[4], a[5],
                                                         _stmts(a[6], a[7], a[8], torch), a[9], **k)),
                      sizes.large, of, torch, sizes is QUICK)
    return cases
