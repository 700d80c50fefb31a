"""Storage: FileIO over fsspec, table paths, crash points, and the fault injection of the tests.

A process started with PAIMON_FAULTS set (a test's subprocess, a spark-submit driver, the Python
workers of its executors) must inject faults into every FileIO it makes, from the first one on.
FileIO does not import `faults` (it only applies the wrappers installed with
`fileio.install_wrapper`), so the package installs it here, before any FileIO can be made.
In-process tests import `faults` themselves (`injected(...)`), which installs it the same way.
"""

import os

if os.environ.get("PAIMON_FAULTS"):
    import paimon_format.storage.faults  # noqa: F401 - installs the PAIMON_FAULTS wrapper of FileIO.for_path
