"""The printed table: absolute figures per library, then opforge's speedups."""

LIBS = ("numpy", "opforge", "torch")
GROUP_TITLES = {
    "dispatch": "Tiny-op dispatch: time per call, thread CPU time (lower is better)",
    "protocol": ("numpy functions on Tensors (opforge: np.add/np.sum called on Tensors): time per call, "
                 "thread CPU time"),
    "elementwise": "Large elementwise: GB/s, each input read and output written counted once",
    "reduction": "Reductions: GB/s (input read once)",
    "matmul": "Matmul: GFLOP/s at 2*n^3 flops",
    "backward": "Backward ops: GB/s (each input read and output written once); mat_mul_grad GFLOP/s at 4*m*k*n",
    "training": "Training (issue 12): time per step, or GB/s counting each read and write once",
    "gradients": ("Gradients (issue 9): time per call (a recorded op, a training step, a Hessian-vector product; "
                  "the one-element adds in thread CPU time)"),
}


def fmt_time(s):
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def _cell(case, lib):
    r = case["results"].get(lib)
    if r is None:
        return "-"
    if "median_s" not in r:
        return "ERROR"
    text = fmt_time(r["median_s"]) if case["unit"] == "time" else f"{r['rate']:.1f} {case['unit']}"
    return text if r["ok"] else text + " WRONG"


def _ratio(case, lib, key):
    r = case["results"].get(lib, {})
    return f"{r[key]:.2f}x" if key in r else "-"


def _mode_ratio(case, mode):
    r = case["mode_speedups"].get(mode, {}).get("opforge")
    return f"{r:.2f}x" if r is not None else "-"


def _status(status, quick):
    # Quick mode's sizes are tiny: a PASS or FAIL there would judge nothing.
    return f"({status.lower()}, not judged)" if quick and status in ("PASS", "FAIL") else status


def _table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths)))
    return [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def markdown(data, text, argv):
    """The report as a docs page: how it was made, then the tables as printed."""
    meta = data["meta"]
    args = " ".join(a for a in argv)
    load = [meta.get("loadavg_at_start"), meta.get("loadavg_at_end")]
    load_text = f", load average {load[0]:.1f} at start and {load[1]:.1f} at end" if None not in load else ""
    return "\n".join([
        "# Benchmark figures", "",
        f"Written by `python -m bench {args}` on {meta['time']} ({meta['platform']}, {meta['cpus']} CPUs"
        f"{load_text}); do not edit: run it again to refresh. Every figure is a median of interleaved "
        "repeats, opforge beside numpy (and torch when importable) in one process; compare ratios, "
        "not absolute times, across machines.", "",
        "```text", text.rstrip(), "```", ""])


def render(data):
    meta = data["meta"]
    out = [f"opforge {meta['versions']['opforge']} vs numpy {meta['versions']['numpy']}"
           + (f" vs torch {meta['versions']['torch']} ({meta['versions']['torch_threads']} threads)"
              if meta["versions"]["torch"] else " (torch not importable: skipped)")
           + f"; {meta['cpus']} CPUs; {meta['mode']} mode, median of {meta['repeats']} interleaved repeats",
           "speedup = other library's time / opforge's time: > 1 means opforge is faster"]
    load = [meta.get("loadavg_at_start"), meta.get("loadavg_at_end")]
    if None not in load:
        busy = max(load) > 0.5 * meta["cpus"]
        out.append(f"load average {load[0]:.1f} at start, {load[1]:.1f} at end"
                   + (": the machine was busy, figures are noisy" if busy else ""))
    out.append("")
    libs = [lib for lib in LIBS if lib != "torch" or meta["versions"]["torch"]]
    header = ["case"] + libs + ["opforge speedup vs numpy"] + (
        ["vs torch"] if "torch" in libs else [])
    for group, title in GROUP_TITLES.items():
        cases = [c for c in data["cases"].values() if c["group"] == group]
        if not cases:
            continue
        rows = [[c["title"]] + [_cell(c, lib) for lib in libs]
                + [_ratio(c, "opforge", "speedup_vs_numpy")]
                + ([_ratio(c, "opforge", "speedup_vs_torch")] if "torch" in libs else [])
                for c in cases]
        out += [title] + _table(header, rows) + [""]
    modal = [c for c in data["cases"].values() if "mode_speedups" in c]
    if modal:
        from bench.interleave import MODES
        rows = [[c["title"]] + [_mode_ratio(c, m) for m in MODES] for c in modal]
        out += ["Matmul alone and alternating with numpy, warm and cold: opforge speedup vs numpy "
                "(bench/interleave.py)"]
        out += _table(["case"] + [m.replace("_", ", ") for m in MODES], rows) + [""]
    imp = data.get("import")
    if imp:
        ms = lambda lib: (f"{imp[lib]['median_s'] * 1e3:.1f} ms" if "median_s" in imp.get(lib, {})
                          else "FAILED: " + imp.get(lib, {}).get("error", "-").splitlines()[-1][:60])
        rows = [["import numpy (alone)", ms("numpy")]]
        rows += [[f"import {lib} (numpy already imported)", ms(lib)]
                 for lib in libs if lib in imp and lib != "numpy"]
        if all("median_s" in imp.get(lib, {}) for lib in ("numpy", "opforge")):
            diff = imp["opforge"]["median_s"] - imp["numpy"]["median_s"]
            rows.append(["import opforge minus import numpy", f"{diff * 1e3:+.1f} ms"])
        out += [f"Import time: fresh interpreters, median of {imp['runs']} runs"]
        out += _table(["what", "time"], rows) + [""]
    mem = data.get("memory")
    if mem:
        gb = lambda b: f"{b / 1e9:.3f} GB"
        rows = [[lib, gb(r["inputs"]), gb(r["after_add"]), gb(r["after_add"] - r["inputs"]),
                 "" if r["ok"] else "WRONG"] if "after_add" in r else
                [lib, "-", "-", "-", "FAILED: " + r["error"].splitlines()[-1][:60]]
                for lib, r in mem["results"].items()]
        out += [f"Peak RSS adding two {mem['bytes_per_input'] / 1e9:.3g} GB float32 arrays "
                "(ru_maxrss, one subprocess per library)"]
        out += _table(["library", "after inputs", "after add", "add's increase", ""], rows) + [""]
    out += ["Targets (issues 4 and 15)" + ("  [quick mode: sizes are tiny, targets are reported, not judged]"
                                   if meta["mode"] == "quick" else "")]
    quick = meta["mode"] == "quick"
    out += _table(["target", "measured", "status", "note"],
                  [[t["target"], t["shown"], _status(t["status"], quick), t["note"]] for t in data["targets"]])
    return "\n".join(out)
