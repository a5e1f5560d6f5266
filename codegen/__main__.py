"""``python -m codegen``: see codegen/__init__.py and codegen/cli.py."""
from .cli import main

raise SystemExit(main())
