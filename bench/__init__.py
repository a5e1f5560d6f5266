"""opforge beside numpy (and PyTorch when importable): ``python -m bench``.

Everything runs in one process with the libraries interleaved (A B A B ...),
so drift in clock speed or cache state hits all of them alike; import time and
peak memory run in fresh subprocesses. See ``python -m bench --help``.
"""
