"""scripts/bench_s3.py's parts: the store process, the tables, the jobs and their fewest requests, runs."""
