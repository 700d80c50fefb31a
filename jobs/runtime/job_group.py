"""A Spark action whose failure stops its running tasks before the caller cleans up or unlocks.

Why: when one task of an action fails for good, Spark fails the job and the driver sees the error at
once, but the job's sibling tasks still running are only marked killed. A Python task is not
interrupted: its executor waits `spark.python.task.killTimeout` (2 s) and then kills the Python
worker, and until then the task goes on writing or deleting files. A run that removes what it wrote
and releases the table's lock (`jobs.runtime.run_lock`) straight after the error would leave a file
written after its cleanup (an orphan nobody knows of) and let the next run, or remove-orphan-files,
start while the failed run's task still writes. Measured on local[2] with pyspark 4.3: the error
reaches the driver about 2.5 s before the sibling task's worker dies.

`run_action` runs the action under a job tag of its own (a tag, not a job group: maintain's group per
table stays on the jobs, so its labels and any cancel of that group still apply) with
interrupt-on-cancel set. When the action raises, it cancels the tag's jobs and waits, up to
`STOP_WAIT_S`, until no task of them is running, then re-raises the original error. Crash ordering:
every file a task of the action writes or deletes is written or deleted before `run_action` returns
or raises, so a cleanup or lock release after it sees the action's final effects. A wait that runs
out is logged (the tasks left may still touch files; their leftovers are orphans for
remove-orphan-files) and the error is raised all the same. The previous interrupt-on-cancel setting
is restored afterwards: maintain runs many steps in one thread.

How "no task running" is known: the status tracker's stage of each job of the tag counts its active
tasks, and a task ends only when its Python worker has finished or been killed. The tracker is fed
by Spark's listener bus; the bus is drained first, so a job whose start is still queued is not
missed. Known gap: the tracker shows a stage's latest attempt only, so tasks of an older attempt
(a stage retried after a lost shuffle) are not waited for.

A `LocalSession` (a small table run in the driver) has no tasks: the action just runs.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from jobs.runtime.local_frame import LocalContext, LocalSession

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
Result = TypeVar("Result")

STOP_WAIT_S = 60.0  # longer than Spark's Python kill timeout (2 s) by far; a stuck JVM task may take it all
POLL_S = 0.05
DRAIN_S = 10.0  # the listener bus of a busy application may never be empty for long: poll after this
INTERRUPT_KEY = "spark.job.interruptOnCancel"
TAG_PREFIX = "paimon-jobs-action-"
_FINAL_JOB_STATES = frozenset({"SUCCEEDED", "FAILED"})


def run_action(
    spark: SparkSession | SparkContext | LocalSession | LocalContext,
    what: str,
    action: Callable[[], Result],
    wait_s: float = STOP_WAIT_S,
) -> Result:
    """`action()` (a Spark action: `collect`, `count`, ...); when it raises, its jobs' tasks are
    cancelled and waited for (up to `wait_s`) before the error goes on. `what` names the action in
    the log line of a wait that ran out."""
    context: Any = getattr(spark, "sparkContext", spark)
    if isinstance(context, LocalContext):
        return action()
    tag = f"{TAG_PREFIX}{uuid.uuid4().hex}"
    interrupt = context.getLocalProperty(INTERRUPT_KEY)
    context.addJobTag(tag)
    context.setInterruptOnCancel(True)
    try:
        result = action()
    except BaseException:
        try:
            stop_tagged(context, tag, what, wait_s)
        except Exception:  # the original error matters more than a failed stop (a JVM gone, say)
            log.warning("%s failed; stopping its tasks failed too", what, exc_info=True)
        _restore(context, tag, interrupt, quiet=True)
        raise
    _restore(context, tag, interrupt, quiet=False)
    return result


def stop_tagged(context: SparkContext, tag: str, what: str, wait_s: float = STOP_WAIT_S) -> bool:
    """Cancel the jobs of `tag` and wait until none of their tasks runs; False when `wait_s` ran out
    first (logged)."""
    deadline = time.monotonic() + wait_s
    context.cancelJobsWithTag(tag)
    _drain_listener_bus(context, min(wait_s, DRAIN_S))
    running = running_tasks(context, tag)
    if running:
        log.info("%s failed: waiting for %d running tasks of it to stop", what, running)
    while running:
        if time.monotonic() >= deadline:
            log.warning(
                "%s failed and %d of its tasks still run after %.0f s: files they write are orphans "
                "for remove-orphan-files",
                what,
                running,
                wait_s,
            )
            return False
        time.sleep(POLL_S)
        running = running_tasks(context, tag)
    return True


def running_tasks(context: SparkContext, tag: str) -> int:
    """Active tasks of the jobs of `tag` (a job whose end Spark has not yet recorded counts as one)."""
    tracker = context.statusTracker()
    # pyspark's StatusTracker has no getJobIdsForTag; the JVM's SparkStatusTracker has (3.5 and 4.x)
    job_ids = list(context._jsc.sc().statusTracker().getJobIdsForTag(tag))
    running = 0
    for job_id in job_ids:
        job = tracker.getJobInfo(job_id)
        if job is None:  # dropped from the status store: ended long ago
            continue
        active = 0
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            active += stage.numActiveTasks if stage is not None else 0
        running += max(active, 0 if job.status in _FINAL_JOB_STATES else 1)
    return running


def _drain_listener_bus(context: SparkContext, wait_s: float) -> None:
    """Let the status store catch up with the scheduler's events (job and task starts), best effort:
    `LiveListenerBus.waitUntilEmpty` is Spark-internal; without it the polling still sees every job
    whose start the store has recorded."""
    try:
        context._jsc.sc().listenerBus().waitUntilEmpty(int(wait_s * 1000))
    except Exception:  # a missing method (another Spark) or a time-out: the polling goes on
        log.debug("listener bus not drained", exc_info=True)


def _restore(context: SparkContext, tag: str, interrupt: str | None, quiet: bool) -> None:
    """Take the tag off this thread's jobs and put interrupt-on-cancel back as it was."""
    try:
        context.removeJobTag(tag)
        context.setLocalProperty(INTERRUPT_KEY, interrupt)  # type: ignore[arg-type]  # None removes it
    except Exception:
        if not quiet:
            raise
        log.warning("could not restore this thread's Spark job properties", exc_info=True)
