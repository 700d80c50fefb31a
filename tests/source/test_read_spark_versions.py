"""`register` on the session's real Spark: Spark 4 gets the `paimon` format with filter pushdown on;
Spark 3.5 (the 3.5 CI lane runs this file) gets a clear refusal that points to `read_table`."""

from __future__ import annotations

import pytest

from jobs.source import PUSHDOWN_CONF, SourceUnavailableError, register


def test_register_refuses_before_spark_4_and_registers_from_4(spark_session):
    if int(spark_session.version.split(".")[0]) < 4:
        with pytest.raises(SourceUnavailableError, match="needs Spark 4 .*read_table"):
            register(spark_session)
        return
    registered = register(spark_session)
    assert registered.name() == "paimon" and registered.default_parallelism == 4  # the test session's
    assert spark_session.conf.get(PUSHDOWN_CONF) == "true"
