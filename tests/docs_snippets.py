"""Runs the ```python blocks of one Markdown page, in order, in one namespace.

    python tests/docs_snippets.py PAGE.md      (from the repository root)

Blocks fenced ```python (only that info string) run; ```text, ```sh, ```cpp
and the rest do not, except a ```sh block preceded by the line
`<!-- docs-runner: run -->`, which runs in bash -e (a build step the next
python blocks need; the environment's python first on PATH). A python block
preceded by the line
`<!-- docs-runner: skip (REASON) -->` is not run; one preceded by
`<!-- docs-runner: requires MOD[, MOD] -->` runs only where those modules
import. A failing block prints the page and line of the error and exits 1.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import traceback

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
DIRECTIVE = re.compile(r"<!--\s*docs-runner:\s*(?P<what>skip|requires|run)\b(?P<rest>.*?)-->")


def blocks(text: str):
    """(first line number, code, directive) of each fenced block with info "python",
    and of each "sh" block marked `run` (its directive's what is "run")."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].strip()
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        directive = DIRECTIVE.search(prev)
        body, start = [], i + 1
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence[0] * len(fence))
                                      and lines[i].strip().strip(fence[0]) == ""):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        if info == "python" or (info == "sh" and directive and directive["what"] == "run"):
            yield start + 1, "\n".join(body) + "\n", directive


def run(path: pathlib.Path) -> int:
    ns: dict = {"__name__": "__main__"}
    ran = 0
    for line, code, directive in blocks(path.read_text()):
        if directive and directive["what"] == "skip":
            print(f"{path}:{line}: skipped{directive['rest'].rstrip()}")
            continue
        if directive and directive["what"] == "requires":
            missing = [m for m in re.split(r"[,\s]+", directive["rest"].strip())
                       if m and importlib.util.find_spec(m) is None]
            if missing:
                print(f"{path}:{line}: skipped (needs {', '.join(missing)})")
                continue
        if directive and directive["what"] == "run":
            env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
            proc = subprocess.run(["bash", "-ec", code], env=env)
            if proc.returncode:
                print(f"\n{path}:{line}: this sh block failed (exit {proc.returncode})", file=sys.stderr)
                return 1
            ran += 1
            continue
        # Line numbers in tracebacks are the page's.
        try:
            exec(compile("\n" * (line - 1) + code, str(path), "exec"), ns)
        except BaseException:
            traceback.print_exc()
            print(f"\n{path}:{line}: this block failed", file=sys.stderr)
            return 1
        ran += 1
    print(f"{path}: {ran} block(s) ran")
    return 0


if __name__ == "__main__":
    sys.exit(run(pathlib.Path(sys.argv[1])))
