"""Every ```python block of README.md and docs/**/*.md runs (tests/docs_snippets.py):
each page in a fresh interpreter from the repository root, its blocks in order
in one namespace, as a reader pasting them would."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import docs_snippets  # noqa: E402

PAGES = sorted([ROOT / "README.md"] + [p for p in (ROOT / "docs").rglob("*.md")
                                       if "_build" not in p.parts and "_generated" not in p.parts])


@pytest.mark.slow  # a fresh interpreter per page, and one page builds an op library
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_snippets_run(page):
    if not any(True for _ in docs_snippets.blocks(page.read_text())):
        pytest.skip("no python blocks")
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "docs_snippets.py"), str(page)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]


def test_runner_runs_python_blocks_only_and_reports_the_failing_line(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# t\n\n```python\nx = 1\n```\n\n```text\nnot python\n```\n\n"
                    "<!-- docs-runner: skip (demo) -->\n```python\nraise SystemExit(3)\n```\n\n"
                    "<!-- docs-runner: requires no_such_module_xyz -->\n```python\nboom\n```\n\n"
                    "```sh\nexit 1\n```\n\n<!-- docs-runner: run -->\n```sh\ntrue\n```\n\n"
                    "```python\nassert x == 1\nundefined_name\n```\n")
    assert [line for line, _, _ in docs_snippets.blocks(page.read_text())] == [4, 13, 18, 27, 31]
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "docs_snippets.py"), str(page)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert f"{page}:31: this block failed" in proc.stderr and "line 32" in proc.stderr
