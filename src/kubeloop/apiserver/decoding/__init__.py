"""Request decoding, in one place: bytes to JSON values within the limits that keep one request
from hurting others (:mod:`.request`: JSON and YAML, depth, alias bombs; a large JSON body a
slice at a time, :mod:`.slices`), the fields a body
repeats (:mod:`.duplicates`, for ``fieldValidation``), and Go's typed decoding of a body into
its kind's type (:mod:`.typed`: unknown fields pruned, wrong types refused in apimachinery's
words, ``Quantity``/``Time``/``IntOrString`` as their ``UnmarshalJSON``); and a deep copy of a
decoded value, made by orjson in C (:mod:`.jsoncopy`).

The HTTP layer decodes a request's body here, the registry its patches' results and the typed
form of what it stores; nothing here knows the registry.
"""

from kubeloop.apiserver.decoding.duplicates import find_duplicate_fields
from kubeloop.apiserver.decoding.request import (
    MAX_DEPTH,
    check_depth,
    decode_json,
    decode_yaml,
    not_an_object,
    too_deep,
    unrecognized,
)
from kubeloop.apiserver.decoding.typed import (
    DecodingError,
    Plan,
    StrictDecodingError,
    decode_against_schema,
    go_base64,
    root_plan,
    schema_kind,
)

__all__ = [
    "MAX_DEPTH",
    "DecodingError",
    "Plan",
    "StrictDecodingError",
    "check_depth",
    "decode_against_schema",
    "decode_json",
    "decode_yaml",
    "find_duplicate_fields",
    "go_base64",
    "not_an_object",
    "root_plan",
    "schema_kind",
    "too_deep",
    "unrecognized",
]
