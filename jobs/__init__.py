"""Spark jobs that write and maintain Paimon tables; each operation plans on the driver from metadata,
does the file work on executors, commits once through `paimon_format.commit`, and reports a run record."""
