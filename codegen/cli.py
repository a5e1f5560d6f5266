"""Command line: ``python -m codegen [--registry FILE] [--check] [--out DIR] [--build-dir DIR]``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import emit, registry_source, validate
from .errors import CodegenError
from .model import Registry

STALE_MESSAGE = "generated/ is stale: run `python -m codegen`"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m codegen", description=(
        "Generate SWIG entry points, Python wrappers and stubs from the op registry."))
    p.add_argument("--registry", type=Path, metavar="FILE",
                   help="registry JSON to read instead of building and running "
                        f"{registry_source.DUMP_TARGET}")
    p.add_argument("--check", action="store_true",
                   help="compare with --out instead of writing; exit 1 with a diff if stale")
    p.add_argument("--out", type=Path, default=Path("generated"), metavar="DIR",
                   help="output folder (default: generated)")
    p.add_argument("--build-dir", type=Path, metavar="DIR",
                   help="CMake build folder for the dump tool (default: an existing "
                        "non-sanitizer build of this tree under build/, such as the one "
                        "`pip install .` leaves, else build/codegen)")
    p.add_argument("--dump-tool", type=Path, metavar="EXE",
                   help="run this already built dump tool instead of building one "
                        "(what the CMake build does)")
    p.add_argument("--warn-if-stale", type=Path, metavar="DIR",
                   help="after writing, warn (without failing) if DIR differs from the output")
    p.add_argument("--quiet", action="store_true", help="do not list the files written")
    return p.parse_args(argv)


def load_registry(args: argparse.Namespace) -> Registry:
    if args.registry is not None:
        data = registry_source.load_file(args.registry)
    elif args.dump_tool is not None:
        data = registry_source.run_dump_tool(args.dump_tool)
    elif args.build_dir is not None:
        data = registry_source.dump_registry(Path.cwd(), args.build_dir)
    else:
        data = registry_source.dump_registry_default(Path.cwd())
    return validate.check(Registry.parse(data))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        files = emit.render(load_registry(args))   # a Writer: nothing written yet
    except CodegenError as e:
        for message in e.messages:
            print(f"codegen: error: {message}", file=sys.stderr)
        return 1
    out = args.out
    if args.check:
        text = files.diff(out)
        if text:
            sys.stdout.write(text)
            print(STALE_MESSAGE, file=sys.stderr)
            return 1
        print(f"codegen: {out.as_posix()}/ is up to date ({len(files.files)} files)")
        return 0
    written, removed = files.write(out)
    if not args.quiet:
        for rel in removed:
            print(f"codegen: removed {out.as_posix()}/{rel}")
        for rel in written:
            print(f"codegen: wrote {out.as_posix()}/{rel}")
        if not written and not removed:
            print(f"codegen: {out.as_posix()}/ is up to date ({len(files.files)} files)")
    if args.warn_if_stale is not None and files.diff(args.warn_if_stale):
        print(f"codegen: warning: {args.warn_if_stale.as_posix()}/ does not match the op declarations "
              f"(this build uses fresh wrappers; run `python -m codegen` to update "
              f"{args.warn_if_stale.as_posix()}/ before committing)", file=sys.stderr)
    return 0
