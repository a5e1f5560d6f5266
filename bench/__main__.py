from bench.run import main
from opforge.__main__ import quiet_on_closed_pipe

raise SystemExit(quiet_on_closed_pipe(main))
