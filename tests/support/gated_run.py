"""``toolbias`` on the command line, with an oracle that cannot finish before it is interrupted.

    python tests/support/gated_run.py KEEP run --model oracle --workers 2 ... --store S.db

runs the real CLI (``toolbias.cli.main``) with one change to the model: in each worker
process, after KEEP episodes the oracle's next episodes wait until the run is told to
stop (the parent sets the workers' stop flag on Ctrl-C) or the parent is gone
(SIGKILL). So a test interrupts a run that is known to be in progress, with a known
number of rows stored: KEEP a multiple of ``forked.BATCH_ROWS`` makes each worker send
its KEEP rows before it waits. Nothing here depends on how fast the machine is.

Waiting is on a condition (the shared stop flag, the parent's pid), polled by the
event loop; the episodes then finish normally, so what the run stores is the oracle's.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from toolbias.base import forked
from toolbias.cli import main
from toolbias.providers import oracle

_gate: dict[str, Any] = {}


def _gated_worker(conn: Any, parents_ends: Any, counter: Any, stop: Any, *rest: Any) -> None:
    _gate.update(stop=stop, parent=os.getppid(), played=0)
    forked_worker(conn, parents_ends, counter, stop, *rest)


def _released() -> bool:
    return bool(_gate["stop"].value) or os.getppid() != _gate["parent"]


class _GatedEpisode(oracle._OracleEpisode):
    async def generate(self, *args: Any) -> Any:
        if not self.sent and "stop" in _gate:
            _gate["played"] += 1
            if _gate["played"] > KEEP:
                while not _released():
                    await asyncio.sleep(0.01)
        return await super().generate(*args)


KEEP = int(sys.argv.pop(1))
forked_worker = forked._worker
forked._worker = _gated_worker  # type: ignore[assignment]
oracle._OracleEpisode = _GatedEpisode  # type: ignore[misc]

if __name__ == "__main__":
    main()
