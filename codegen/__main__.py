"""``python -m codegen``: see codegen/__init__.py and codegen/cli.py."""
from codegen.cli import main

raise SystemExit(main())
