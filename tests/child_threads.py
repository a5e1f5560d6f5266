"""Runs a test module's checks again in a child process with another number
of intra-op threads (the pool's size is fixed when a process first uses it)."""
import os
import subprocess
import sys


def run_at_threads(module, body, threads=3):
    """Imports tests/<module>.py as `t` in a child with OPFORGE_NUM_THREADS=threads, then runs body."""
    code = (f"import sys; sys.path.insert(0, sys.argv[1]); import {module} as t, opforge as of\n"
            f"assert of.config.num_threads() == {threads}\n" + body)
    env = dict(os.environ, OPFORGE_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
