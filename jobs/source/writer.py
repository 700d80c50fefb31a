"""`df.write.format("paimon")`: owned by helper H4 (stub until it lands).

Interface the data source (jobs/source/datasource.py) relies on:
`make_writer(options: dict[str, str], schema: StructType, overwrite: bool) -> DataSourceArrowWriter`.
"""
