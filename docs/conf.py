# Sphinx configuration. Sphinx + MyST rather than MkDocs: it is what the
# scientific Python projects our users read (numpy, scipy, pandas, matplotlib)
# build their docs with, so its cross-referencing, intersphinx and autodoc
# conventions are the ones they know, and MyST lets every page stay Markdown
# that GitHub renders and tests/test_docs_snippets.py runs.
# Build: pip install -e ".[docs]" (or ".[docs]"); sphinx-build -W -b html docs docs/_build/html
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "_ext"))

project = "opforge"
author = "the opforge authors"
extensions = ["myst_parser", "opref"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
html_theme = "alabaster"
html_title = "opforge"
# Pages link to files of the repository (examples/, cpp/) in code spans, not links.
suppress_warnings: list[str] = []
