"""Storage: FileIO over fsspec, table paths, crash points, and the fault injection of the tests."""
