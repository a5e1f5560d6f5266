"""``python -m opforge.distributed.build [--force]``: (re)builds the
collectives library into the cache and prints its path."""
import sys

from opforge.distributed._library import build

if __name__ == "__main__":
    print(build(force="--force" in sys.argv[1:]))
