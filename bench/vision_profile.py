"""Per-node profile of one imported CNN: opforge's node times (Session.profile)
beside onnxruntime's (its SessionOptions.enable_profiling), grouped by op type
and, for the convolutions, layer by layer. Used by ``python -m bench.vision_models --profile``.

Both are kernel wall times, each node's least over the runs (the runs of the
two interleaved; on a loaded machine preemption only ever adds to a node's
time), at the thread count of the bench. With several threads each run
follows a pause and an untimed run of the same library, so the other
library's spinning workers do not share its cores. The run totals are medians (one
thread: process CPU time, else wall); "between kernels" is that total minus
the sum of the nodes: the engine's per-node cost, plus preemption on a loaded
machine, plus the nodes' own run-to-run variation (the nodes' times are their
fastest); "between kernels, run medians" subtracts the median of whole runs'
node sums instead, which leaves that variation out.
"""
import json
import os
import statistics
import tempfile
import time

import numpy as np

_CONV_OPS = {"Conv2DPacked", "Conv2DPackedAdd", "Conv2DPackedConcat", "FusedConv2D", "Conv2D", "DepthwiseConv2D",
             "Conv2DWinograd", "Conv2DNchwc"}


def _clock(threads):
    """One thread: the process's CPU time (a loaded machine); more: wall time."""
    return time.process_time() if threads == 1 else time.perf_counter()


def _settle(threads, run):
    """Before a library's timed run with several threads: the other library's
    workers go on spinning after its run (onnxruntime's for tens of ms), which
    on 2 cores takes a core from this run's threads. Wait for them to park,
    then one untimed run wakes this library's workers (as timing.interleaved)."""
    if threads > 1:
        time.sleep(0.1)
        run()


def _ort_session(model, threads, prefix=None):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    if prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = prefix
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _ort_runs(path):
    """Per run, [(node, op, seconds, args)] from onnxruntime's profile file
    (a run's node events come before its model_run event)."""
    with open(path) as f:
        events = json.load(f)
    runs, cur = [], []
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.append(cur)
            cur = []
        elif e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            a = e.get("args", {})
            cur.append((e["name"][:-len("_kernel_time")], a.get("op_name", "?"), e["dur"] * 1e-6, a))
    return runs


def _fastest(runs, key):
    """Each node's least time over runs of the same node list (preemption on a
    loaded machine only ever adds to a node's wall time)."""
    first = runs[-1]
    same = [r for r in runs if len(r) == len(first)]
    return [key(row) + (min(r[i][2] for r in same),) + row[3:] for i, row in enumerate(first)]


def _ort_conv_desc(args):
    """(kind, 'CinxHxW->CoutxHxW k s') of an onnxruntime conv node from its shapes."""
    try:
        xs = list(args["input_type_shape"][0].values())[0]
        ws = list(args["input_type_shape"][1].values())[0]
        ys = list(args["output_type_shape"][0].values())[0]
    except (KeyError, IndexError):
        return "conv", "?"
    groups = xs[1] // ws[1] if ws[1] else 1
    kind = ("depthwise" if groups == xs[1] and groups > 1 else "1x1" if ws[2:] == [1, 1] else
            f"{ws[2]}x{ws[3]}")
    stride = max(1, round(xs[2] / ys[2])) if ys[2] else 1
    return kind, f"{xs[1]}x{xs[2]}x{xs[3]}->{ys[1]}x{ys[2]}x{ys[3]} s{stride}"


def _ort_out_shape(args):
    try:
        return tuple(list(args["output_type_shape"][0].values())[0])
    except (KeyError, IndexError):
        return None


def _kind(fshape, groups, channels):
    return ("depthwise" if groups == channels and groups > 1 else "1x1" if list(fshape[2:]) == [1, 1] else
            f"{fshape[2]}x{fshape[3]}")


def _our_conv_keys(op):
    """[(kind, output shape)] of one of our conv nodes, as _ort_conv_desc names kinds: one per convolution it
    runs (Conv2DPackedConcat runs several, each into its channel slice)."""
    if op is None:
        return [None]
    try:
        if op.type == "Conv2DNchwc":  # blocked [N, OB, H, W, B]: the ONNX shape from filter_shape
            fshape, y = list(op.get_attr("filter_shape")), list(op.outputs[0].shape)
            g = op.get_attr("groups")
            return [(_kind(fshape, g, g if g > 1 else -1), (y[0], fshape[0], y[2], y[3]))]
        x, y = op.inputs[0].shape, list(op.outputs[0].shape)
        if op.type == "Conv2DPackedConcat":
            fs = list(op.get_attr("filter_shapes"))
            return [(_kind(fs[i:i + 4], 1, x[1]), (y[0], fs[i], y[2], y[3])) for i in range(0, len(fs), 4)]
        fshape = (list(op.get_attr("filter_shape")) if op.type in ("Conv2DPacked", "Conv2DPackedAdd")
                  else list(op.inputs[1].shape))
        return [(_kind(fshape, x[1] // fshape[1], x[1]), tuple(y))]
    except Exception:  # noqa: BLE001 -- an op this bench does not know: matched by order
        return [None]


def _is_conv_ort(op):
    return op in ("Conv", "FusedConv", "NchwcConv", "QLinearConv")


def profile(name, batch, model, x, threads, runs):
    """The profile's text (markdown tables) for one model and batch."""
    import opforge as of
    import opforge.onnx
    imported = opforge.onnx.import_model(model)
    sess = of.Session(imported.graph, inter_op_threads=1)
    fetch, feeds = [imported.outputs["y"]], {imported.inputs["x"]: x}
    plain = _ort_session(model, threads)
    run_ours, run_theirs = (lambda: sess.run(fetch, feeds)), (lambda: plain.run(None, {"x": x}))
    with tempfile.TemporaryDirectory() as tmp:
        profiled = _ort_session(model, threads, os.path.join(tmp, "ort"))
        profiled.run(None, {"x": x})
        run_ours()
        ours_runs, walls = [], {"ours": [], "theirs": []}
        for _ in range(runs):  # interleaved: profiled runs, then timed plain runs
            _settle(threads, run_ours)
            ours_runs.append(sess.profile(fetch, feeds, runs=1))
            _settle(threads, run_theirs)
            profiled.run(None, {"x": x})
            for lib, fn in (("ours", run_ours), ("theirs", run_theirs)):
                _settle(threads, fn)
                t = _clock(threads)
                fn()
                walls[lib].append(_clock(threads) - t)
        theirs_runs = _ort_runs(profiled.end_profiling())[1:]  # the first was the warm-up
    ours = _fastest(ours_runs, lambda r: (r[0], r[1]))
    theirs = _fastest(theirs_runs, lambda r: (r[0], r[1]))
    our_wall, ort_wall = statistics.median(walls["ours"]), statistics.median(walls["theirs"])

    info = {op.name: op for op in imported.graph.get_operations()}
    # Convolutions layer by layer: each of ours matched to onnxruntime's next
    # unmatched conv of the same kind and output shape (branches may run in
    # another order), else its next unmatched one.
    ort_convs = [(n, op, s, a) for n, op, s, a in theirs if _is_conv_ort(op)]
    ort_keys = [(_ort_conv_desc(a)[0], _ort_out_shape(a)) for n, op, s, a in ort_convs]
    used = [False] * len(ort_convs)
    layers = []
    for node, op, s in ours:
        if op not in _CONV_OPS:
            continue
        kinds, descs, ort_s = [], [], 0.0
        for key in _our_conv_keys(info.get(node)):
            j = next((j for j in range(len(ort_convs)) if not used[j] and ort_keys[j] == key), None)
            if j is None:
                j = next((j for j in range(len(ort_convs)) if not used[j]), None)
            if j is None:
                kinds.append("?")
                descs.append("?")
                ort_s = float("nan")
                continue
            used[j] = True
            kind, desc = _ort_conv_desc(ort_convs[j][3])
            kinds.append(kind)
            descs.append(desc)
            ort_s += ort_convs[j][2]
        # A concat of several convs: one row, its kinds joined, onnxruntime's time the sum of its convs.
        layers.append((node, op, "+".join(kinds), " + ".join(descs), s, ort_s))

    out = [f"### {name} b{batch} ({threads} thread{'s' if threads > 1 else ''}, median of {runs} runs)", "",
           f"run {'CPU time' if threads == 1 else 'wall'}: opforge {our_wall * 1e3:.2f} ms, onnxruntime {ort_wall * 1e3:.2f} ms "
           f"(ratio {ort_wall / our_wall:.2f}x); nodes: opforge {len(ours)}, onnxruntime {len(theirs)}", ""]
    # By kind: convs by their ONNX kind, the rest by op type, each library's own.
    kinds = {}
    for node, op, kind, desc, so, st in layers:
        k = f"conv {kind}"
        e = kinds.setdefault(k, [0, 0.0, 0.0])
        e[0] += 1
        e[1] += so
        e[2] += 0.0 if st != st else st
    ours_other, theirs_other = {}, {}
    for node, op, s in ours:
        if op not in _CONV_OPS:
            e = ours_other.setdefault(op, [0, 0.0])
            e[0] += 1
            e[1] += s
    for n, op, s, a in theirs:
        if not _is_conv_ort(op):
            e = theirs_other.setdefault(op, [0, 0.0])
            e[0] += 1
            e[1] += s
    our_sum, their_sum = sum(r[2] for r in ours), sum(r[2] for r in theirs)
    out += ["| group | n | opforge ms | ort ms | ort/opforge |", "|---|---|---|---|---|"]
    for k, (n, so, st) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        out.append(f"| {k} | {n} | {so * 1e3:.3f} | {st * 1e3:.3f} | {st / so if so else 0:.2f}x |")
    oo = sum(v[1] for v in ours_other.values())
    to = sum(v[1] for v in theirs_other.values())
    out.append(f"| not conv (below) | {sum(v[0] for v in ours_other.values())} / "
               f"{sum(v[0] for v in theirs_other.values())} | {oo * 1e3:.3f} | {to * 1e3:.3f} | "
               f"{to / oo if oo else 0:.2f}x |")
    out.append(f"| between kernels | | {(our_wall - our_sum) * 1e3:.3f} | {(ort_wall - their_sum) * 1e3:.3f} | |")
    # The row above subtracts each node's fastest time from the median run, so
    # the nodes' run-to-run variation lands there too; this one subtracts the
    # median over runs of a whole run's node times.
    # (opforge's only: onnxruntime's profiled runs do not split into the same whole runs.)
    our_med = statistics.median(sum(r[2] for r in run) for run in ours_runs)
    out.append(f"| between kernels, run medians | | {(our_wall - our_med) * 1e3:.3f} | | |")
    out += ["", "not conv, by op type: opforge | onnxruntime", "",
            "| opforge op | n | ms | | ort op | n | ms |", "|---|---|---|---|---|---|---|"]
    lo = sorted(ours_other.items(), key=lambda kv: -kv[1][1])
    lt = sorted(theirs_other.items(), key=lambda kv: -kv[1][1])
    for i in range(max(len(lo), len(lt))):
        a = f"| {lo[i][0]} | {lo[i][1][0]} | {lo[i][1][1] * 1e3:.3f} |" if i < len(lo) else "| | | |"
        b = f" | {lt[i][0]} | {lt[i][1][0]} | {lt[i][1][1] * 1e3:.3f} |" if i < len(lt) else " | | | |"
        out.append(a + b)
    out += ["", "convolutions, layer by layer (ours matched to onnxruntime's by output shape):", "",
            "| # | kind | shape | opforge op | opforge ms | ort ms | ort/opforge |", "|---|---|---|---|---|---|---|"]
    for i, (node, op, kind, desc, so, st) in enumerate(layers):
        out.append(f"| {i} | {kind} | {desc} | {op} | {so * 1e3:.3f} | {st * 1e3:.3f} | "
                   f"{st / so if so else 0:.2f}x |")
    return "\n".join(out) + "\n"


def check_match(model, x):
    """True when opforge's output matches onnxruntime's (relative 1e-3)."""
    import onnxruntime as ort
    import opforge as of
    import opforge.onnx
    imported = opforge.onnx.import_model(model)
    got = np.asarray(of.Session(imported.graph).run([imported.outputs["y"]], {imported.inputs["x"]: x})[0])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return bool(np.allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max())))
