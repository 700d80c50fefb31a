"""The Apache Paimon table format in pure Python.

This package knows the on-disk format (schemas, snapshots, manifests, data files) and storage
(through fsspec). It never imports Spark or ``jobs``: everything here runs in a plain Python
process, so the Spark jobs can ship these functions to executors and the unit tests can run them
without a JVM.

A process started with PAIMON_FAULTS set (a test's subprocess, a spark-submit driver, the Python
workers of its executors) must inject faults into every FileIO it makes, from the first one on.
FileIO never imports `storage.faults` (it applies the wrappers installed with
`fileio.install_wrapper`), so the package installs it here, before any FileIO can be made.
In-process tests import `storage.faults` themselves (`injected(...)`), which installs it the same way.
"""

import os

__version__ = "0.1.0"

if os.environ.get("PAIMON_FAULTS"):
    import paimon_format.storage.faults  # noqa: F401 - installs the PAIMON_FAULTS wrapper of FileIO.for_path
