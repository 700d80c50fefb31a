"""read_table on S3 (moto through the throttling proxy): executors open the data files with the
table's storage options and read them in ranges, and the rows equal pypaimon's read of a copy."""

from __future__ import annotations

from jobs.read import read_table
from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from tests.interop import oracle
from tests.support.s3_copies import download


def test_read_table_on_s3_equals_pypaimon(spark_session, s3, tmp_path):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    schema = "id long not null, dt string not null, v string"
    for round_ in range(2):
        rows = [(k, f"d{k % 2}", f"r{round_}-{k}") for k in range(round_ * 3, round_ * 3 + 6)]
        write_dataframe(
            spark_session.createDataFrame(rows, schema),
            WriteSettings(
                warehouse,
                "db.t",
                partition_keys=["dt"],
                primary_keys=["id", "dt"],
                options={"bucket": "2", "file.format": "orc"},
                storage_options=options,
            ),
        )
    proxy.reset()

    frame = read_table(spark_session, warehouse, "db.t", storage_options=options)
    rows = oracle.sort_rows(frame.toArrow().to_pylist())

    assert any(r.method == "GET" and "/bucket-" in r.path for r in proxy.requests)  # data files via S3
    assert rows == oracle.read_rows(download(warehouse, options, tmp_path / "copy"), "db.t")
    assert len(rows) == 9
