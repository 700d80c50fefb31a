"""Named crash points: where a process may die, so tests can prove that a rerun repairs everything.

Maintenance jobs promise that a crash at any moment, followed by a rerun, ends exactly like an
uninterrupted run. To test that promise we must be able to stop the process at a chosen step, the
way a killed container would stop it: no `finally`, no cleanup, no flushed buffers. A job marks its
steps with `crash_point("expire-snapshots:after-data-deletes")`; when the environment variable
`PAIMON_CRASH_AT` names that step, the process ends there with exit code 137 (as after SIGKILL).
`PAIMON_CRASH_AT` may list several steps separated by commas; `PAIMON_CRASH_SKIP=N` lets the first
N matching passes through, so the N+1-th pass crashes (e.g. the third deletion batch).

Crash points are meant for driver-side steps; on an executor a crash only fails a task.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

CRASH_ENV = "PAIMON_CRASH_AT"
SKIP_ENV = "PAIMON_CRASH_SKIP"
CRASH_EXIT_CODE = 137

_passes: dict[str, int] = {}


def crash_point(step: str) -> None:
    """End the process right here if PAIMON_CRASH_AT names `step` (a no-op otherwise)."""
    wanted = os.environ.get(CRASH_ENV)
    if not wanted or step not in {name.strip() for name in wanted.split(",")}:
        return
    passes = _passes.get(step, 0)
    _passes[step] = passes + 1
    if passes < int(os.environ.get(SKIP_ENV, "0") or 0):
        return
    _handler(step)


def end_process(step: str) -> None:
    """The default crash: end the process at once, like SIGKILL (no `finally`, nothing flushed)."""
    sys.stderr.write(f"crash point {step!r} reached: ending the process ({CRASH_ENV})\n")
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


_handler: Callable[[str], None] = end_process


def set_crash_handler(handler: Callable[[str], None]) -> Callable[[str], None]:
    """Replace what a reached crash point does (in-process tests simulate the crash, see
    `paimon_format.storage.faults.halt_at_step`); returns the previous handler."""
    global _handler
    previous, _handler = _handler, handler
    return previous


def reset_passes() -> None:
    """Forget how often each step was passed (PAIMON_CRASH_SKIP counts from zero again)."""
    _passes.clear()
