"""Unit-test fixtures: the session-wide moto S3 server (`moto_s3`) now lives in tests/conftest.py,
shared with the S3 job tests."""
