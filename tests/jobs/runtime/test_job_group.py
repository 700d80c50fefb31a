"""`run_action`: a failed Spark action stops its running sibling tasks before the error goes on.

Each action here has two tasks on local[2]. Both connect to a socket the test holds and wait for a
command: the test tells one to raise, and the other (the sibling) writes a file and answers only
when told "go". Whether the sibling still runs is seen on its connection: a killed worker's socket
closes (end of stream), a running one answers "go" with "written".
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession

from jobs.runtime.job_group import INTERRUPT_KEY, run_action, running_tasks, stop_tagged
from jobs.runtime.local_frame import LocalSession

WAIT_S = 60.0  # only reached when the behaviour is wrong


class TwoTasks:
    """The test's end of the two tasks' connections: task 0 is told to raise once both are in."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(WAIT_S)
        self.connections: dict[int, socket.socket] = {}
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _accept(self) -> None:
        while len(self.connections) < 2:
            connection, _ = self.server.accept()
            connection.settimeout(WAIT_S)
            self.connections[connection.recv(1)[0]] = connection
        self.connections[0].sendall(b"raise")

    def task(self) -> Callable[[int], None]:
        """What a task does with partition `index` (a closure: pickled by value to the workers)."""
        port, out = self.server.getsockname()[1], str(self.out)

        def work(index: int) -> None:
            with socket.create_connection(("127.0.0.1", port)) as connection:
                connection.settimeout(WAIT_S)  # a leaked task ends on its own
                connection.sendall(bytes([index]))
                if connection.recv(16) == b"raise":
                    raise RuntimeError("task 0 fails at once")
                with open(out, "w") as handle:
                    handle.write("written by the sibling after the failure")
                connection.sendall(b"written")

        return work

    def tell_sibling_go(self) -> bytes:
        """The sibling's answer to "go": b"written" while it runs, b"" once its worker is gone."""
        self.accepting.join(WAIT_S)
        sibling = self.connections[1]
        try:
            sibling.sendall(b"go")
            return sibling.recv(16)
        except (BrokenPipeError, ConnectionResetError):
            return b""

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.server.close()


@pytest.fixture
def tasks(tmp_path: Path) -> Iterator[TwoTasks]:
    two = TwoTasks(tmp_path / "sibling-output")
    yield two
    two.close()


@pytest.fixture
def outer_group(spark_session: SparkSession) -> Iterator[str]:
    """A job group of the caller's, as maintain sets one per table."""
    context = spark_session.sparkContext
    group = f"outer-{uuid.uuid4().hex}"
    context.setJobGroup(group, "the caller's label")
    yield group
    for key in ("spark.jobGroup.id", "spark.job.description", INTERRUPT_KEY):
        context.setLocalProperty(key, None)  # type: ignore[arg-type]


def rdd_action(context: SparkContext, work: Callable[[int], None]) -> Callable[[], list[Any]]:
    def partition(index: int, rows: Iterator[int]) -> Iterator[int]:
        work(index)
        yield index

    return context.parallelize(range(2), 2).mapPartitionsWithIndex(partition).collect


def frame_action(spark: SparkSession, work: Callable[[int], None]) -> Callable[[], list[Any]]:
    def batches(items: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # executor side: the partition's index

        for batch in items:
            work(TaskContext.get().partitionId())
            yield batch

    return spark.range(0, 2, 1, 2).mapInArrow(batches, "id long").collect


def active_tasks_of(context: SparkContext, group: str) -> int:
    tracker = context.statusTracker()
    return sum(
        stage.numActiveTasks
        for job_id in tracker.getJobIdsForGroup(group)
        for stage_id in tracker.getJobInfo(job_id).stageIds
        if (stage := tracker.getStageInfo(stage_id)) is not None
    )


def test_a_failed_action_returns_only_once_its_sibling_task_stopped(
    spark_session: SparkSession, tasks: TwoTasks, outer_group: str
) -> None:
    """A DataFrame action (the jobs' usual one: SQL adds tags of its own); an RDD's jobs carry the
    thread's tags the same way."""
    context = spark_session.sparkContext
    action = frame_action(spark_session, tasks.task())
    interrupt = context.getLocalProperty(INTERRUPT_KEY)  # "false": setJobGroup's default

    with pytest.raises(Exception, match="task 0 fails at once"):
        run_action(spark_session, "the test action", action)

    assert context.statusTracker().getJobIdsForGroup(outer_group), "the caller's group stays on the jobs"
    assert active_tasks_of(context, outer_group) == 0
    assert tasks.tell_sibling_go() == b"", "the sibling still ran after the error reached the driver"
    assert not tasks.out.exists()
    # the thread's properties are as before: the caller's group, no tag, its interrupt-on-cancel
    assert context.getLocalProperty("spark.jobGroup.id") == outer_group
    assert not set(context.getJobTags())
    assert context.getLocalProperty(INTERRUPT_KEY) == interrupt == "false"


def test_without_it_the_sibling_still_runs_and_writes_after_the_error(
    spark_session: SparkSession, tasks: TwoTasks
) -> None:
    """Why `run_action` exists: Spark reports the failure while a sibling task still runs."""
    context = spark_session.sparkContext
    tag = f"test-{uuid.uuid4().hex}"
    context.addJobTag(tag)  # only to wait for the task at the end
    try:
        with pytest.raises(Exception, match="task 0 fails at once"):
            rdd_action(context, tasks.task())()
        answer = tasks.tell_sibling_go()
        assert answer == b"written"
        assert tasks.out.exists()
    finally:
        context.removeJobTag(tag)
        assert stop_tagged(context, tag, "the test action")  # no task leaks into later tests
    assert running_tasks(context, tag) == 0


def test_a_successful_action_returns_its_result_and_restores_the_thread(
    spark_session: SparkSession,
) -> None:
    context = spark_session.sparkContext
    context.setInterruptOnCancel(False)
    try:
        total = run_action(spark_session, "a sum", context.parallelize(range(5), 2).sum)
        assert total == 10
        assert not set(context.getJobTags())
        assert context.getLocalProperty(INTERRUPT_KEY) == "false"
    finally:
        context.setLocalProperty(INTERRUPT_KEY, None)  # type: ignore[arg-type]


def test_a_local_session_just_runs_the_action() -> None:
    assert run_action(LocalSession(), "local", lambda: [1, 2]) == [1, 2]
    with pytest.raises(ValueError, match="bad"):
        run_action(LocalSession(), "local", lambda: (_ for _ in ()).throw(ValueError("bad")))
