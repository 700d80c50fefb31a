"""A missing library is named as such (exit 1, "install X"), never as corrupt data or bad input (2)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jobs.runtime.config import load_document
from jobs.runtime.errors import EXIT_UNEXPECTED, describe, exit_code_for
from paimon_format.errors import MissingDependencyError, missing_codec_library
from paimon_format.storage.fileio import FileIO

# A process in which fastavro cannot find a zstd library (as with the wheel alone, before this was
# declared): the blocked modules are set to None before fastavro is imported.
_WITHOUT_ZSTD = textwrap.dedent(
    """
    import sys
    for name in ("backports.zstd", "compression.zstd", "zstandard"):
        sys.modules[name] = None
    from paimon_format.errors import MissingDependencyError
    from paimon_format.model.binary_row import EMPTY_ROW
    from paimon_format.manifest.codec import decode_manifest, encode_manifest
    from paimon_format.manifest.entries import ADD, ManifestEntry
    from jobs.runtime.errors import describe, exit_code_for
    from tests.support.factories import data_file

    try:
        encode_manifest([ManifestEntry(ADD, EMPTY_ROW, 0, 1, data_file("data-1.parquet"))], "zstd")
    except MissingDependencyError as error:
        print("write", exit_code_for(error), describe(error))
    data = bytes.fromhex(sys.argv[1])
    try:
        decode_manifest(data, "/t/manifest/manifest-1")
    except MissingDependencyError as error:
        print("read", exit_code_for(error), describe(error))
    """
)


def test_a_missing_zstd_library_is_exit_1_naming_the_library_not_a_corrupt_manifest():
    from paimon_format.manifest.codec import encode_manifest
    from paimon_format.manifest.entries import ADD, ManifestEntry
    from paimon_format.model.binary_row import EMPTY_ROW
    from tests.support.factories import data_file

    zstd_manifest = encode_manifest(
        [ManifestEntry(ADD, EMPTY_ROW, 0, 1, data_file("data-1.parquet"))], "zstd"
    )
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_ZSTD, zstd_manifest.hex()],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert set(lines) == {"write", "read"}
    for line in lines.values():
        code, message = line.split(" ", 1)
        assert code == str(EXIT_UNEXPECTED)
        assert "install backports.zstd" in message and "Corrupt" not in message
    assert "/t/manifest/manifest-1" in lines["read"]


def test_fastavro_codec_message_is_recognised_and_others_are_not():
    error = ValueError(
        "zstandard codec is supported but you need to install one of the following libraries: "
        "('backports.zstd',)"
    )
    missing = missing_codec_library(error, "reading m-1")
    assert isinstance(missing, MissingDependencyError) and missing.install == "backports.zstd"
    assert "reading m-1 (Avro codec zstandard)" in str(missing)
    assert missing_codec_library(ValueError("cannot read a block: EOF"), "reading m-1") is None


def test_pyspark_package_not_installed_and_import_errors_exit_1_with_install_hint():
    class PySparkImportError(ImportError):  # the shape of pyspark.errors.PySparkImportError
        pass

    pandas = PySparkImportError(
        "[PACKAGE_NOT_INSTALLED] Pandas >= 2.2.0 must be installed; however, it was not found."
    )
    assert exit_code_for(pandas) == EXIT_UNEXPECTED
    assert "install Pandas>=2.2.0" in describe(pandas)
    module = ModuleNotFoundError("No module named 's3fs'", name="s3fs")
    assert exit_code_for(module) == EXIT_UNEXPECTED and "install s3fs" in describe(module)


def test_a_storage_backend_that_is_not_installed_says_which_extra(monkeypatch):
    import fsspec

    def no_backend(protocol, **kwargs):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec, "filesystem", no_backend)
    with pytest.raises(MissingDependencyError, match=r"install paimon-jobs\[s3\] \(s3fs\)") as caught:
        FileIO.for_path("s3://bucket/warehouse").fs  # noqa: B018 - the property creates the filesystem
    assert exit_code_for(caught.value) == EXIT_UNEXPECTED

    monkeypatch.setattr(fsspec, "open", lambda *a, **k: no_backend("gcs"))
    with pytest.raises(MissingDependencyError, match=r"install paimon-jobs\[gcs\]"):
        load_document("gs://bucket/conf/maintain.yaml")
