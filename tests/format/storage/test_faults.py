"""Fault plans: the N-th storage operation fails, ends the process, or halts storage in-process."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from paimon_format.errors import StorageError
from paimon_format.storage import faults
from paimon_format.storage.crash_points import crash_point
from paimon_format.storage.faults import (
    FaultPlan,
    FaultRule,
    FaultyFileIO,
    InjectedFault,
    SimulatedCrash,
    injected,
)
from paimon_format.storage.fileio import FileIO


def test_parse_rules_and_errors():
    plan = FaultPlan.parse("delete:3, write:1+ ,create:2:crash,list:4:halt")
    assert plan.rules == (
        FaultRule("delete", 3),
        FaultRule("write", 1, onward=True),
        FaultRule("create", 2, "crash"),
        FaultRule("list", 4, "halt"),
    )
    assert FaultPlan.parse(plan.spec) == plan
    assert FaultPlan.parse("none").rules == ()
    for bad, cause in [
        ("remove:1", "unknown operation 'remove'"),
        ("write:0", "N must be a whole number >= 1"),
        ("write:x", "N must be a whole number >= 1"),
        ("write:1:explode", "unknown action 'explode'"),
        ("write", "expected operation:N"),
        (",", "no fault rules"),
    ]:
        with pytest.raises(ValueError, match=cause):
            FaultPlan.parse(bad)


def test_for_path_wraps_only_while_a_plan_is_active(tmp_path):
    assert type(FileIO.for_path(str(tmp_path))) is FileIO
    with injected("write:2"):
        io = FileIO.for_path(str(tmp_path))
        assert isinstance(io, FaultyFileIO)
        io.write_bytes(str(tmp_path / "a"), b"1")
        with pytest.raises(InjectedFault, match=r"write .*/b: injected fault"):
            io.write_bytes(str(tmp_path / "b"), b"2")
        io.write_bytes(str(tmp_path / "c"), b"3")
        assert faults.hits() == [f"write #2 (fail) {tmp_path / 'b'}"]
    assert sorted(os.listdir(tmp_path)) == ["a", "c"]
    assert type(FileIO.for_path(str(tmp_path))) is FileIO


def test_each_operation_is_counted_on_its_own(tmp_path):
    root = str(tmp_path)
    plain = FileIO.for_path(root)
    plain.write_bytes(f"{root}/d/x", b"x")
    with injected("read:2,list:1,create:1,delete:2+"):
        io = FileIO.for_path(root)
        assert io.read_bytes(f"{root}/d/x") == b"x"
        with pytest.raises(InjectedFault):
            io.read_bytes(f"{root}/d/x")
        with pytest.raises(InjectedFault):
            list(io.list_files_recursive(root))  # a failed listing is an error, never a short result
        assert [s.path for s in io.list_dir(f"{root}/d")] == [f"{root}/d/x"]
        with pytest.raises(InjectedFault):
            io.create_if_absent(f"{root}/d/snapshot-1", b"s")
        assert io.create_if_absent(f"{root}/d/snapshot-1", b"s")
        assert io.delete(f"{root}/d/snapshot-1")
        for _ in range(2):  # 2+ : every later delete fails too
            with pytest.raises(StorageError):
                io.delete(f"{root}/d/x")
    assert plain.exists(f"{root}/d/x") and not plain.exists(f"{root}/d/snapshot-1")


def test_a_failing_delete_many_deletes_half_and_reports_it(tmp_path):
    paths = [str(tmp_path / f"f{i}") for i in range(6)]
    for path in paths:
        FileIO.for_path(path).write_bytes(path, b"x")
    with injected("delete:1"):
        with pytest.raises(InjectedFault) as failure:
            FileIO.for_path(str(tmp_path)).delete_many(paths)
    assert failure.value.deleted_paths == paths[:3]
    assert sorted(os.listdir(tmp_path)) == ["f3", "f4", "f5"]


def test_halt_freezes_storage_and_escapes_except_exception(tmp_path):
    root = str(tmp_path)
    with injected("write:2:halt"):
        io = FileIO.for_path(root)
        io.write_bytes(f"{root}/a", b"1")
        with pytest.raises(SimulatedCrash):
            try:
                io.write_bytes(f"{root}/b", b"2")
            except Exception:  # a job's recovery code must not run after a crash
                pytest.fail("SimulatedCrash was caught by `except Exception`")
        for operation in (
            lambda: io.delete(f"{root}/a"),
            lambda: io.exists(f"{root}/a"),
            lambda: io.read_bytes(f"{root}/a"),
            lambda: FileIO.for_path(root).delete_many([f"{root}/a"]),
        ):
            with pytest.raises(SimulatedCrash, match="frozen"):
                operation()
    assert os.listdir(tmp_path) == ["a"]
    FileIO.for_path(root).delete(f"{root}/a")  # the plan is gone: storage works again


def test_halt_at_a_named_step(tmp_path):
    plan = FaultPlan.parse("none")
    with injected(plan), faults.halt_at_step("job:step#2", plan):
        crash_point("job:step")  # first pass lives
        crash_point("job:other")
        with pytest.raises(SimulatedCrash, match="job:step"):
            crash_point("job:step")
        with pytest.raises(SimulatedCrash, match="frozen"):
            FileIO.for_path(str(tmp_path)).write_bytes(str(tmp_path / "x"), b"x")
    crash_point("job:step")  # the environment is restored: no crash
    assert not os.path.exists(tmp_path / "x")


def test_a_pickled_fileio_keeps_its_plan_and_shares_counts_through_the_state_dir(tmp_path):
    state = str(tmp_path / "state")
    with injected("write:2", state_dir=state):
        io = FileIO.for_path(str(tmp_path))
        io.write_bytes(str(tmp_path / "a"), b"1")
    faults.reset()
    clone = pickle.loads(pickle.dumps(io))  # e.g. on a Spark executor: no plan installed there
    assert isinstance(clone, FaultyFileIO) and clone.plan == io.plan
    with open(os.path.join(state, "counts.json"), "w") as handle:
        handle.write('{"write": 1}')  # the count the driver reached (reset() cleared it above)
    with pytest.raises(InjectedFault):
        clone.write_bytes(str(tmp_path / "b"), b"2")
    assert faults.hits(clone.plan) == [f"write #2 (fail) {tmp_path / 'b'}"]


SCRIPT = """
import sys
from paimon_format.storage.fileio import FileIO
root = sys.argv[1]
io = FileIO.for_path(root)
for name in ("a", "b", "c"):
    io.write_bytes(f"{root}/{name}", b"x")
"""


@pytest.mark.parametrize(
    ("spec", "exit_code", "files", "message"),
    [
        ("write:2", 1, ["a"], "InjectedFault"),
        ("write:3:crash", 137, ["a", "b"], "injected crash at write #3"),
        ("read:1", 0, ["a", "b", "c"], ""),
    ],
)
def test_the_environment_variable_reaches_a_subprocess(tmp_path, spec, exit_code, files, message):
    root = tmp_path / "t"
    root.mkdir()
    env = {**os.environ, "PAIMON_FAULTS": spec, "PYTHONPATH": os.getcwd()}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(root)], env=env, capture_output=True, text=True
    )
    assert result.returncode == exit_code, result.stderr
    assert message in result.stderr
    assert sorted(os.listdir(root)) == files


def test_a_bad_environment_plan_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PAIMON_FAULTS", "write:none")
    with pytest.raises(ValueError, match="PAIMON_FAULTS: 'write:none': N must be"):
        FileIO.for_path(str(tmp_path))
