"""The protobuf message tables of the Kubernetes API types, shipped with the server.

Kubernetes' protobuf encoding is defined by the ``generated.proto`` files of k8s.io/api and
k8s.io/apimachinery. ``kubernetes.protoset.gz`` beside this module is those files compiled into
one ``FileDescriptorSet`` (by ``scripts/generate_protobuf_descriptors.py``, from the release whose
OpenAPI schemas the server serves); it is read the first time a protobuf body arrives and kept
for the life of the process. No client binary is needed at run time.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.protobuf import wire

#: The compiled ``generated.proto`` files (a gzip-compressed ``FileDescriptorSet``).
SHIPPED_SET = Path(__file__).with_name("kubernetes.protoset.gz")

# FieldDescriptorProto.type values.
TYPE_DOUBLE = 1
TYPE_FLOAT = 2
TYPE_INT64 = 3
TYPE_UINT64 = 4
TYPE_INT32 = 5
TYPE_FIXED64 = 6
TYPE_FIXED32 = 7
TYPE_BOOL = 8
TYPE_STRING = 9
TYPE_MESSAGE = 11
TYPE_BYTES = 12
TYPE_UINT32 = 13
TYPE_ENUM = 14
TYPE_SFIXED32 = 15
TYPE_SFIXED64 = 16
TYPE_SINT32 = 17
TYPE_SINT64 = 18

LABEL_REPEATED = 3


@dataclass(frozen=True)
class FieldInfo:
    """One field of a message, under its JSON name.

    Kubernetes' proto field names are nearly always the JSON names; the exceptions (``uID``,
    ``aPIGroup``) and the embedded Go structs whose fields JSON inlines (``Probe.handler``,
    ``Volume.volumeSource``, ``ConfigMapKeySelector.localObjectReference``) are found by comparing
    with the OpenAPI definitions (see ``align_with_schemas``).
    """

    name: str
    number: int
    type: int
    repeated: bool
    type_name: str  # ".package.Message" for message fields, "" otherwise
    inline: bool = False  # an embedded struct: its fields sit in the parent's JSON object


@dataclass
class MessageInfo:
    full_name: str  # "k8s.io.api.core.v1.ConfigMap", no leading dot
    fields: dict[int, FieldInfo] = field(default_factory=dict)
    by_name: dict[str, FieldInfo] = field(default_factory=dict)
    map_entry: bool = False


class DescriptorError(Exception):
    """The shipped descriptor set is missing or damaged (a broken installation)."""


class MessageTables:
    """Every message of the loaded ``generated.proto`` files, by full name."""

    def __init__(self, messages: Mapping[str, MessageInfo], files: Iterable[str]) -> None:
        self.messages = dict(messages)
        self.files = sorted(files)

    def message(self, full_name: str) -> MessageInfo | None:
        return self.messages.get(full_name.lstrip("."))

    def for_kind(self, api_version: str, kind: str) -> MessageInfo | None:
        """The message of ``kind`` in ``api_version``'s package (k8s.io/api/<group>/<version>)."""
        group, _, version = api_version.rpartition("/")
        short = group.split(".", 1)[0] if group else "core"
        found = self.message(f"k8s.io.api.{short}.{version}.{kind}")
        if found is None and group in ("", "meta.k8s.io"):
            found = self.message(f"k8s.io.apimachinery.pkg.apis.meta.{version}.{kind}")
        return found


def parse_file_descriptor(data: bytes) -> tuple[str, list[MessageInfo]]:
    """A serialized FileDescriptorProto's name and its messages (nested ones included)."""
    name = ""
    package = ""
    raw_messages: list[bytes] = []
    for number, _, value in wire.iter_fields(data):
        if not isinstance(value, bytes):
            continue
        if number == 1:
            name = value.decode()
        elif number == 2:
            package = value.decode()
        elif number == 4:
            raw_messages.append(value)
    messages: list[MessageInfo] = []
    for raw in raw_messages:
        _parse_message(raw, package, messages)
    return name, messages


def _parse_message(data: bytes, scope: str, out: list[MessageInfo]) -> None:
    name = ""
    raw_fields: list[bytes] = []
    nested: list[bytes] = []
    map_entry = False
    for number, _, value in wire.iter_fields(data):
        if not isinstance(value, bytes):
            continue
        if number == 1:
            name = value.decode()
        elif number == 2:
            raw_fields.append(value)
        elif number == 3:
            nested.append(value)
        elif number == 7:  # MessageOptions; map_entry = 7
            map_entry = any(n == 7 and v == 1 for n, _, v in wire.iter_fields(value))
    full_name = f"{scope}.{name}" if scope else name
    message = MessageInfo(full_name=full_name, map_entry=map_entry)
    for raw in raw_fields:
        info = _parse_field(raw)
        message.fields[info.number] = info
        message.by_name[info.name] = info
    out.append(message)
    for raw in nested:
        _parse_message(raw, full_name, out)


def _parse_field(data: bytes) -> FieldInfo:
    name = ""
    number = 0
    label = 0
    type_ = 0
    type_name = ""
    for field_number, _, value in wire.iter_fields(data):
        if field_number == 1 and isinstance(value, bytes):
            name = value.decode()
        elif field_number == 3 and isinstance(value, int):
            number = value
        elif field_number == 4 and isinstance(value, int):
            label = value
        elif field_number == 5 and isinstance(value, int):
            type_ = value
        elif field_number == 6 and isinstance(value, bytes):
            type_name = value.decode()
    return FieldInfo(
        name=name, number=number, type=type_, repeated=label == LABEL_REPEATED, type_name=type_name
    )


def tables_from_descriptor_set(data: bytes) -> MessageTables:
    """The tables of a serialized ``FileDescriptorSet`` (its files: field 1), aligned with the
    OpenAPI definitions the server serves."""
    messages: dict[str, MessageInfo] = {}
    files: list[str] = []
    try:
        for number, _, value in wire.iter_fields(data):
            if number != 1 or not isinstance(value, bytes):
                continue
            name, parsed = parse_file_descriptor(value)
            files.append(name)
            for message in parsed:
                messages[message.full_name] = message
    except (wire.WireError, UnicodeDecodeError) as exc:
        raise DescriptorError(f"the descriptor set cannot be read: {exc}") from None
    if not files:
        raise DescriptorError("the descriptor set holds no files")
    tables = MessageTables(messages, files)
    align_with_schemas(tables, schemas.definitions())
    return tables


def align_with_schemas(tables: MessageTables, definitions: Mapping[str, Mapping[str, Any]]) -> None:
    """Rename fields to their JSON names and mark inlined embedded structs, per the definitions."""
    for message in tables.messages.values():
        definition = definitions.get(_definition_name(message.full_name))
        if definition is None:
            continue
        properties = definition.get("properties") or {}
        by_lower = {name.lower(): name for name in properties}
        for number, info in list(message.fields.items()):
            if info.name in properties:
                continue
            nested = tables.message(info.type_name) if info.type == TYPE_MESSAGE else None
            if (
                nested is not None
                and nested.by_name
                and all(name in properties or name.lower() in by_lower for name in nested.by_name)
            ):
                aligned = replace(info, inline=True)
            elif info.name.lower() in by_lower:
                aligned = replace(info, name=by_lower[info.name.lower()])
            else:
                continue
            del message.by_name[info.name]
            message.fields[number] = aligned
            message.by_name[aligned.name] = aligned


def _definition_name(full_name: str) -> str:
    """``k8s.io.api.core.v1.Probe`` → ``io.k8s.api.core.v1.Probe`` (the OpenAPI definition name)."""
    return "io.k8s." + full_name.removeprefix("k8s.io.")


class _Loaded:
    tables: MessageTables | None = None


_loaded = _Loaded()


def loaded_tables() -> MessageTables | None:
    """The process-wide tables if they have been read (never blocks)."""
    return _loaded.tables


def load_tables() -> MessageTables:
    """The process-wide tables, read on first use (blocking: call it from a worker thread)."""
    if _loaded.tables is None:
        try:
            data = gzip.decompress(SHIPPED_SET.read_bytes())
        except (OSError, EOFError) as exc:
            raise DescriptorError(f"cannot read {SHIPPED_SET.name}: {exc}") from None
        _loaded.tables = tables_from_descriptor_set(data)
    return _loaded.tables
