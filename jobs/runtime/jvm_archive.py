"""A class-data-sharing archive for the local Spark JVM: seconds off every `python -m jobs` start.

Why: a local job pays Spark's JVM start before it reads one manifest, and most of that is loading
and verifying the same ~30,000 classes every time (measured on 2 cores: session 4.3 s and first job
2.1 s without an archive; 2.2 s and 1.1 s with one). Java 17 can dump the classes a run loaded into
an archive (`-XX:ArchiveClassesAtExit`) that later JVMs map instead (`-XX:SharedArchiveFile`).

- `bash scripts/setup` builds the archive once (`python -m jobs.runtime.jvm_archive`): one small Spark run
  doing what the jobs do (`jobs.runtime.jvm_warm_up`: Arrow in and out of Python, a shuffle, a join,
  a checkpoint), in a child process whose JVM writes the archive as it exits. It goes to a temporary
  name first and is renamed when complete, so a reader never maps half a file. The archive is dumped
  with the local JVM's own options (`LOCAL_JVM_OPTIONS`, here because both need them), so a local
  session maps it.
- Local sessions (`jobs.runtime.spark.get_or_create_spark` without spark-submit) pass it when it exists.
  It is keyed by the java binary, the pyspark version and its jars, so another JDK or Spark simply
  has no archive yet; the JVM itself also checks it and, in its default `-Xshare:auto` mode, starts
  without it when it does not fit. Its logging is off: a missing fit is not the job's news.
- Under spark-submit (clusters) nothing changes: that JVM is started by the platform.
- `PAIMON_JOBS_JVM_ARCHIVE=off` leaves it out; another path there uses that file instead.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ENV = "PAIMON_JOBS_JVM_ARCHIVE"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
WARM_UP_MODULE = "jobs.runtime.jvm_warm_up"

# The local driver JVM (`python -m jobs`) compiles with C1 only and collects with the serial GC:
# a maintenance job moves little data through the JVM, so C2's compilation work never pays back.
# Measured on remove-orphan-files at 200,000 files (2 cores): session start 15.2 -> 7.7 CPU-s,
# the whole cold run 67 -> 44 CPU-s, and a warm run 22.6 -> 16.3 CPU-s. Under spark-submit the
# JVM already runs, so this setting (like the others here) does not apply. C1 alone gets a 48 MiB
# code cache; a long `maintain` session filled it ("CodeCache is full. Compiler has been
# disabled"), after which the JVM only interprets: 240 MiB (reserved, not committed) keeps it compiling.
LOCAL_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# A session that moves rows through the JVM (reading a table into a DataFrame, `spark.read.format(
# "paimon")`, a write from a query) keeps C2: there the JVM converts every row, and C1's code is
# about half as fast. Measured with scripts/bench_read.py at 10M rows (2 cores, idle): the source
# 5.0-5.6 s with C1 only, 2.3-2.5 s with C2; read_table 3.2-4.1 s and 2.0 s; Spark's own Parquet
# reader 3.1-4.1 s and 1.9-2.3 s. The class archive maps either way (compiler flags are not part of
# what it checks). A user's own session (a notebook) has C2 anyway: the JVM's default.
LOCAL_DATA_JVM_OPTIONS = "-XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.realpath(os.path.join(home, "bin", "java"))
    found = shutil.which("java")
    return os.path.realpath(found) if found else None


def _pyspark_home() -> Path | None:
    try:
        import pyspark  # optional here: without pyspark there is no archive to key, and no error
    except ImportError:
        return None
    return Path(pyspark.__file__).parent


def archive_path() -> Path | None:
    """Where this machine's archive for this JDK and pyspark lives (None: switched off, or no java)."""
    setting = os.environ.get(ENV, "")
    if setting.lower() in ("off", "0", "false", "no"):
        return None
    if setting:
        return Path(setting)
    java, spark_home = _java_binary(), _pyspark_home()
    if java is None or spark_home is None:
        return None
    jars = spark_home / "jars"
    names = sorted(os.listdir(jars)) if jars.is_dir() else []
    key = hashlib.sha256("\n".join([java, str(os.stat(java).st_mtime_ns), str(spark_home), *names]).encode())
    try:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "paimon-jobs"
    except RuntimeError:  # no home directory to be found: no archive
        return None
    return cache / f"spark-classes-{key.hexdigest()[:16]}.jsa"


def archive_options() -> str:
    """The JVM options that map the archive, or "" when there is none."""
    path = archive_path()
    if path is None or any(c.isspace() for c in str(path)):  # Spark splits the options at blanks
        return ""
    if not path.is_file() or path.stat().st_size == 0:
        return ""
    return f"-XX:SharedArchiveFile={path} {_QUIET}"


def build(path: Path) -> bool:
    """Build the archive at `path` with a fresh JVM; False (and no file) when that did not work."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    env = {
        **os.environ,
        ENV: "off",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    options = f"{LOCAL_JVM_OPTIONS} -XX:ArchiveClassesAtExit={partial} {_QUIET}"
    done = subprocess.run(
        [sys.executable, "-m", WARM_UP_MODULE, options],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        sys.stderr.write(done.stderr[-2000:])
        return False
    partial.replace(path)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="build again even if the archive exists")
    args = parser.parse_args()
    path = archive_path()
    if path is None:
        print(f"jvm archive: none (no java or pyspark, or {ENV}=off)")
        return
    if any(c.isspace() for c in str(path)):
        print(f"jvm archive: none ({path} has a blank, which Spark's JVM options cannot carry)")
        return
    if path.is_file() and not args.force:
        print(f"jvm archive: {path} (exists)")
        return
    if not build(path):
        print("jvm archive: could not be built; local jobs start without it", file=sys.stderr)
        sys.exit(1)
    print(f"jvm archive: {path} ({path.stat().st_size >> 20} MiB)")


if __name__ == "__main__":
    main()
