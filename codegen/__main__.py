"""``python -m codegen``: see codegen/__init__.py and codegen/cli.py."""
import os
import sys

from .cli import main

try:
    code = main()
    sys.stdout.flush()
except BrokenPipeError:  # `python -m codegen --check | head`: end quietly, as C tools do
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 141
raise SystemExit(code)
