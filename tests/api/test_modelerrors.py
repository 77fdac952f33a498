"""A model's validation errors in the API server's words (``api.modelerrors``): one field cause
per failed check, each as apiextensions-apiserver's schema validation words it."""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic
import pytest
from pydantic import Field

import kubeloop
from kubeloop.api.modelerrors import field_causes, invalid_object


class BackupSpec(kubeloop.KubeModel):
    schedule: Annotated[str, Field(pattern=r"^@(daily|hourly)$")]
    keep: Annotated[int, Field(ge=1, le=30)] = 7
    volume: Annotated[str, Field(max_length=5)] = "data"
    mode: Literal["Full", "Incremental"] = "Full"
    targets: Annotated[list[str], Field(max_length=2)] = []
    ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5

    @pydantic.field_validator("volume")
    @classmethod
    def no_spaces(cls, value: str) -> str:
        if " " in value:
            raise ValueError("must not contain spaces")
        return value


class Backup(kubeloop.CustomResource, group="example.com", version="v1"):
    spec: BackupSpec


def refused(spec: dict[str, object]) -> pydantic.ValidationError:
    body = {"apiVersion": "example.com/v1", "kind": "Backup", "metadata": {"name": "nightly"}, "spec": spec}
    with pytest.raises(pydantic.ValidationError) as error:
        Backup.from_dict(body)
    return error.value


@pytest.mark.parametrize(
    ("spec", "field", "cause_type", "message"),
    [
        ({"schedule": "@daily", "keep": 99}, "spec.keep", "FieldValueInvalid",
         "Invalid value: 99: spec.keep in body should be less than or equal to 30"),
        ({"schedule": "@daily", "keep": 0}, "spec.keep", "FieldValueInvalid",
         "Invalid value: 0: spec.keep in body should be greater than or equal to 1"),
        ({"schedule": "@daily", "ratio": 1}, "spec.ratio", "FieldValueInvalid",
         "Invalid value: 1: spec.ratio in body should be less than 1"),
        ({"schedule": "weekly"}, "spec.schedule", "FieldValueInvalid",
         "Invalid value: \"weekly\": spec.schedule in body should match '^@(daily|hourly)$'"),
        ({}, "spec.schedule", "FieldValueRequired", "Required value"),
        ({"schedule": "@daily", "keep": "many"}, "spec.keep", "FieldValueInvalid",
         'Invalid value: "string": spec.keep in body must be of type integer: "string"'),
        ({"schedule": "@daily", "volume": "toolong"}, "spec.volume", "FieldValueTooLong",
         "Too long: may not be more than 5 bytes"),
        ({"schedule": "@daily", "volume": "a b"}, "spec.volume", "FieldValueInvalid",
         'Invalid value: "a b": must not contain spaces'),
        ({"schedule": "@daily", "mode": "Half"}, "spec.mode", "FieldValueNotSupported",
         'Unsupported value: "Half": supported values: "Full", "Incremental"'),
        ({"schedule": "@daily", "targets": ["a", "b", "c"]}, "spec.targets", "FieldValueTooMany",
         "Too many: 3: must have at most 2 items"),
    ],
)  # fmt: skip
def test_each_check_is_worded_as_the_servers_schema_validation(
    spec: dict[str, object], field: str, cause_type: str, message: str
) -> None:
    [cause] = field_causes(refused(spec))
    assert (cause.field, cause.type, cause.message) == (field, cause_type, message)


def test_the_422_names_the_object_and_every_field() -> None:
    error = invalid_object(
        {"apiVersion": "example.com/v1", "kind": "Backup", "metadata": {"name": "nightly"}},
        refused({"keep": 99}),
    )
    assert error.code == 422
    assert error.message == (
        'Backup.example.com "nightly" is invalid: [spec.schedule: Required value, '
        "spec.keep: Invalid value: 99: spec.keep in body should be less than or equal to 30]"
    )
    assert "pydantic" not in error.message
