"""The fuzz targets of tests/fuzz_targets.py: their findings as explicit
regression tests, tests/fuzz_corpus/ replayed, and a short coverage-guided
run of each target (atheris; the long run is in the README)."""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys

import pytest

import opforge as of
from opforge import _elf, _pywrap_internal as pw

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import fuzz_targets  # noqa: E402
from codegen import registry_source  # noqa: E402  (fuzz_targets put the source tree on sys.path)
from codegen.errors import CodegenError  # noqa: E402

CORPUS = pathlib.Path(__file__).resolve().parent / "fuzz_corpus"
# Runs per target in the quick profile: a few seconds each on the CI machine.
QUICK_RUNS = {"opdef": 3000, "elf": 3000, "registry": 400}


# --- findings, kept

def test_registry_that_is_not_utf8_is_a_codegen_error(tmp_path):
    # Found by the registry target: json.loads raised UnicodeDecodeError.
    with pytest.raises(CodegenError, match="not UTF-8"):
        registry_source.loads(b"\x85\x85", "<bytes>")
    path = tmp_path / "registry.json"
    path.write_bytes(b'{"ops": "\xff"}')
    with pytest.raises(CodegenError, match=r"registry.json: not UTF-8"):
        registry_source.load_file(path)


def test_deeply_nested_registry_is_a_codegen_error():
    with pytest.raises(CodegenError, match="nested too deeply"):
        registry_source.loads(b"[" * 100_000, "<bytes>")


def test_stamp_section_past_the_end_of_the_file():
    # A section header whose offset + size lie past EOF used to yield a short
    # (or empty) slice, read as "no stamp"; now it is a malformed file.
    for cls in (1, 2):
        for order in "<>":
            good = fuzz_targets.tiny_elf(cls, order)
            assert _elf.parse_section(good, ".opforge_stamp")[1] == b"opforge-stamp version=0 abi=x\0"
            bad = bytearray(good)
            shfmt = order + ("IIQQQQIIQQ" if cls == 2 else "IIIIIIIIII")
            ehsize = 64 if cls == 2 else 52
            shoff = struct.unpack_from(order + ("Q" if cls == 2 else "I"), good, 40 if cls == 2 else 32)[0]
            at = shoff + struct.calcsize(shfmt)  # section 1: the stamp
            fields = list(struct.unpack_from(shfmt, good, at))
            fields[4] = len(good) - 4
            struct.pack_into(shfmt, bad, at, *fields)
            with pytest.raises(_elf.NotElfError, match="past the end"):
                _elf.parse_section(bytes(bad), ".opforge_stamp")
            assert ehsize  # the header itself is intact


def test_truncated_elf_at_every_length():
    for seed in fuzz_targets.SEEDS:
        for n in range(len(seed)):
            try:
                _elf.parse_section(seed[:n], ".opforge_stamp")
            except _elf.NotElfError:
                pass


def test_gradient_specs_reach_the_declaration_harness():
    base = [("input", "x: float32"), ("output", "y: float32"), ("doc", "S.\n\nx: In.\ny: Out.")]
    pw._validate_declaration("Fine", base + [("gradient", "x = Mul(dy, x)")])
    for rule in ("x = Mul(dy,", "x = ", "nope = dy", "x = Bogus$(dy)", "x = Mul(dy, x, axis=)"):
        with pytest.raises(of.errors.InvalidArgumentError, match="op 'Fine'"):
            pw._validate_declaration("Fine", base + [("gradient", rule)])


# --- the corpus and the quick coverage-guided runs

atheris = pytest.importorskip("atheris", reason="atheris (the test extra, Linux x86_64) runs the fuzzers")


@pytest.mark.parametrize("name", sorted(fuzz_targets.TARGETS))
def test_corpus_replays_cleanly(name):
    for path in sorted((CORPUS / name).glob("*")):
        fuzz_targets.TARGETS[name](path.read_bytes())


@pytest.mark.skipif(os.environ.get("OPFORGE_SANITIZED") == "1",
                    reason="atheris's libFuzzer and a preloaded ASan runtime each hook signals and malloc")
@pytest.mark.parametrize("name", sorted(fuzz_targets.TARGETS))
def test_quick_fuzz_run(name, tmp_path):
    corpus = tmp_path / "corpus"  # libFuzzer adds its new inputs to the first dir, so a copy
    shutil.copytree(CORPUS / name, corpus)
    proc = subprocess.run(
        [sys.executable, str(pathlib.Path(__file__).with_name("fuzz.py")), name, f"-runs={QUICK_RUNS[name]}",
         "-seed=1", "-max_len=4096", f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # libFuzzer can count one input beyond -runs (seen: "Done 401 runs" for 400) under load
    done = re.search(r"Done (\d+) runs", proc.stderr)
    assert done and int(done.group(1)) >= QUICK_RUNS[name], proc.stderr[-3000:]
