"""`python -m jobs schema <operation>`: the JSON Schema editors and CI validate configs with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.__main__ import main
from jobs.runtime.config import interpolate, load_document
from jobs.runtime.registry import OPERATIONS

jsonschema = pytest.importorskip("jsonschema")
CONF = Path(__file__).resolve().parents[2] / "conf"


def schema_of(operation: str, capsys) -> dict:
    assert main(["schema", operation]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_example_config_validates_against_its_operation_schema(operation, capsys):
    schema = schema_of(operation, capsys)
    jsonschema.Draft202012Validator.check_schema(schema)
    example = CONF / f"{operation}.yaml"
    if not example.exists():
        pytest.skip(f"no conf/{operation}.yaml")
    document = interpolate(load_document(str(example)), str(example))
    jsonschema.validate(document, schema)


def test_the_schema_refuses_what_the_job_refuses(capsys):
    schema = schema_of("write", capsys)
    assert {"warehouse", "table", "source"} <= set(schema["required"])
    good = {"warehouse": "/w", "table": "db.t", "source": {"path": "/in"}}
    jsonschema.validate(good, schema)
    for bad in (
        {**good, "mdoe": "append"},  # an unknown key
        {**good, "mode": "upsert"},  # not one of the modes
        {key: value for key, value in good.items() if key != "source"},  # a required key missing
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    maintain = schema_of("maintain", capsys)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"warehouse": "/w", "tables": ["db.*"], "defaults": {"expire_snapshots": {"retain_mni": 3}}},
            maintain,
        )


def test_an_unknown_operation_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["schema", "vacuum"])
    assert exited.value.code == 2 and "invalid choice: 'vacuum'" in capsys.readouterr().err
