"""Runs one fuzz target under atheris (coverage-guided; libFuzzer options pass through).

    python tests/fuzz.py {opdef,elf,registry} [libFuzzer options] [CORPUS_DIR ...]

e.g. the long run: python tests/fuzz.py elf -max_total_time=600 /tmp/elf-corpus
tests/fuzz_corpus/TARGET/ holds the regression inputs (every finding, kept);
pass it as a corpus dir to start from them. A finding is written as
crash-<hash> in the working directory: add it to tests/fuzz_corpus/TARGET/.
Only the Python code is instrumented (the ELF reader, codegen); the C++
OpDefBuilder behind the opdef target is driven by its DSL-aware input, not
by coverage (that would need a clang -fsanitize=fuzzer-no-link build).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def main() -> None:
    import atheris
    if len(sys.argv) < 2 or sys.argv[1] not in ("opdef", "elf", "registry"):
        sys.exit(__doc__)
    name = sys.argv.pop(1)
    with atheris.instrument_imports(include=["opforge", "codegen", "fuzz_targets"]):
        import fuzz_targets
        if name == "registry":
            import codegen.emit, codegen.model, codegen.validate  # noqa: F401,E401
        import opforge._elf  # noqa: F401
    target = fuzz_targets.TARGETS[name]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
