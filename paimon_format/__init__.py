"""The Apache Paimon table format in pure Python.

This package knows the on-disk format (schemas, snapshots, manifests, data files) and storage
(through fsspec). It never imports Spark or ``jobs``: everything here runs in a plain Python
process, so the Spark jobs can ship these functions to executors and the unit tests can run them
without a JVM.
"""

__version__ = "0.1.0"
