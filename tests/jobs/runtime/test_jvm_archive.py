"""The local Spark JVM's class archive: mapped only when present, never in the way when it is not."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from jobs.runtime import jvm_archive
from jobs.runtime.jvm_archive import LOCAL_DATA_JVM_OPTIONS, LOCAL_JVM_OPTIONS
from jobs.runtime.registry import OPERATIONS
from jobs.runtime.spark import local_defaults


def test_switched_off_or_absent_the_local_session_gets_the_plain_options(monkeypatch, tmp_path):
    monkeypatch.setenv(jvm_archive.ENV, "off")
    assert jvm_archive.archive_path() is None
    assert jvm_archive.archive_options() == ""
    assert local_defaults()["spark.driver.extraJavaOptions"] == LOCAL_JVM_OPTIONS

    monkeypatch.setenv(jvm_archive.ENV, str(tmp_path / "none-yet.jsa"))
    assert jvm_archive.archive_options() == ""
    assert local_defaults()["spark.driver.extraJavaOptions"] == LOCAL_JVM_OPTIONS


def test_an_archive_on_disk_is_mapped_after_the_plain_options(monkeypatch, tmp_path):
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"an archive")
    monkeypatch.setenv(jvm_archive.ENV, str(archive))
    options = local_defaults()["spark.driver.extraJavaOptions"]
    assert options.startswith(LOCAL_JVM_OPTIONS + " ")
    assert f"-XX:SharedArchiveFile={archive}" in options.split()


def test_sessions_that_move_rows_keep_c2_and_the_archive(monkeypatch, tmp_path):
    """Maintenance sessions compile with C1 only; a session that converts rows in bulk keeps C2
    (its reads ran twice as fast), with the same archive mapped after its options."""
    assert "-XX:TieredStopAtLevel=1" in LOCAL_JVM_OPTIONS.split()
    assert "TieredStopAtLevel" not in LOCAL_DATA_JVM_OPTIONS
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"an archive")
    monkeypatch.setenv(jvm_archive.ENV, str(archive))
    options = local_defaults(moves_rows=True)["spark.driver.extraJavaOptions"]
    assert options.startswith(LOCAL_DATA_JVM_OPTIONS + " ")
    assert f"-XX:SharedArchiveFile={archive}" in options.split()
    movers = sorted(name for name, operation in OPERATIONS.items() if operation.moves_rows)
    assert movers == ["write"]


def test_an_archive_whose_path_has_a_blank_is_left_out(monkeypatch, tmp_path):
    """Spark splits extraJavaOptions at blanks: such a path would break the JVM's start."""
    archive = tmp_path / "with blank" / "classes.jsa"
    archive.parent.mkdir()
    archive.write_bytes(b"an archive")
    monkeypatch.setenv(jvm_archive.ENV, str(archive))
    assert jvm_archive.archive_options() == ""


def test_the_default_place_is_in_the_user_cache_keyed_by_java_and_pyspark(monkeypatch, tmp_path):
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    monkeypatch.delenv(jvm_archive.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == tmp_path / "paimon-jobs"
    assert path.name.startswith("spark-classes-") and path.suffix == ".jsa"
    monkeypatch.setattr(jvm_archive, "_pyspark_home", lambda: tmp_path / "another-spark")
    assert jvm_archive.archive_path() != path, "another Spark gets its own archive"


def test_a_broken_archive_does_not_stop_the_jvm(monkeypatch, tmp_path):
    """The JVM checks the archive and starts without it when it does not fit (-Xshare:auto)."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    archive = tmp_path / "broken.jsa"
    archive.write_bytes(b"not a class archive")
    monkeypatch.setenv(jvm_archive.ENV, str(archive))
    options = (LOCAL_JVM_OPTIONS + " " + jvm_archive.archive_options()).split()
    done = subprocess.run([java, *options, "-version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "sharing" not in done.stderr.splitlines()[-1], "it ran without the broken archive"
