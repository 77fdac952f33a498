"""Request bodies into JSON values, within the limits that keep one request from hurting others.

- **JSON** is decoded by orjson (which refuses more than 1,024 levels; a large body a slice at a
  time, so that no call holds the GIL for long) and then held to
  :data:`MAX_DEPTH` levels of nesting: deeper objects could not be stored (orjson encodes at most
  254 levels) and would run the server's recursive code (patches, validation) out of stack.
- **YAML** is read with libyaml, but only after a pass over its events (iterative, no recursion)
  has checked the nesting depth and the size the document has once its aliases are expanded:
  libyaml's composer recurses in C (100,000 nested ``[`` crash the process) and an alias bomb
  (``&a [*b, *b, ...]`` chains, or one large anchored string repeated) expands to gigabytes. Values become what JSON can hold,
  as ``sigs.k8s.io/yaml`` turns YAML into JSON: keys are strings (``1:`` → ``"1"``), timestamps
  stay strings, ``!!binary`` becomes base64 text, ``!!set`` a map of nulls; NaN and infinities
  are refused.

Every refusal is a 400 naming the problem. Callers decode large bodies off the event loop.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from typing import Any

import orjson
import yaml

from kubeloop import errors
from kubeloop.apiserver.decoding import slices

#: JSON bodies larger than this are decoded a slice at a time (:mod:`.slices`): one orjson call
#: over a 3 MiB body holds the GIL for 40-70 ms on a slow machine, every other request waiting.
SLICED_BYTES = 4 * slices.SLICE_BYTES
#: Levels of nesting (objects and arrays) a request body or a stored object may have.
MAX_DEPTH = 128
#: The size a YAML document may have once its aliases are expanded, in bytes of scalar text plus
#: 8 per node (a 3 MiB body without aliases weighs at most ~15 MiB). Counting bytes, not nodes,
#: matters: one 1 MB string named by an anchor and repeated 4,000 times is 4 GB.
MAX_YAML_EXPANDED = 32 * 1024 * 1024
_NODE_WEIGHT = 8


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """SafeLoader without timestamp resolution: ``2024-01-01`` stays a string, as in Kubernetes."""


_Loader.yaml_constructors = dict(_Loader.yaml_constructors)
_Loader.yaml_constructors["tag:yaml.org,2002:timestamp"] = _Loader.yaml_constructors["tag:yaml.org,2002:str"]


def too_deep(what: str) -> errors.BadRequest:
    return errors.BadRequest(f"{what}: the object nests more than {MAX_DEPTH} levels deep")


def decode_json(
    raw: bytes,
    what: str = "the body of the request",
    *,
    depth_checked_later: bool = False,
    kind: str | None = None,
) -> Any:
    """A JSON body as Python values; 400 when it is not JSON or nests too deep.

    ``depth_checked_later``: the body is an object the registry checks anyway before anything
    walks it (create and update bodies), so it is not walked twice here. ``kind``: the body
    should be an object of that kind, and a body that is not JSON is worded as upstream words it.
    """
    try:
        value = slices.loads_in_slices(raw) if len(raw) > SLICED_BYTES else orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc) or "recursion" in str(exc):
            raise too_deep(what) from None
        if kind is not None:
            raise unrecognized(kind, f"couldn't get version/kind; json parse error: {exc}", raw) from None
        raise errors.BadRequest(f"{what} could not be decoded as JSON: {exc}") from None
    if not depth_checked_later:
        check_depth(value, what)
    return value


#: Go's name of the struct the API server first reads a body's apiVersion and kind into.
_TYPE_META_STRUCT = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
)
_GO_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "bool"}


def unrecognized(kind: str, detail: str, raw: bytes) -> errors.BadRequest:
    """kube-apiserver's 400 for a body it cannot read as any object: the expected kind, why, and a
    summary of the body (its first 30 bytes; hex unless it starts as an object)."""
    if not raw:
        summary = "<empty>"
    elif raw[:1] == b"{":
        summary = raw[:30].decode("utf-8", "replace") + (" ..." if len(raw) > 30 else "")
    else:
        summary = raw[:30].hex() + (" ..." if len(raw) > 30 else "")
    return errors.BadRequest(
        f"the object provided is unrecognized (must be of type {kind}): {detail} ({summary})"
    )


def not_an_object(kind: str, value: Any, raw: bytes) -> errors.BadRequest:
    """The 400 for a JSON body that is not an object (an array, a string, ...)."""
    go_type = "null" if value is None else _GO_JSON_TYPES.get(type(value), "value")
    detail = f"couldn't get version/kind; json parse error: json: cannot unmarshal {go_type} into Go value of type {_TYPE_META_STRUCT}"
    return unrecognized(kind, detail, raw)


def decode_yaml(raw: bytes | str, what: str = "the body of the request") -> Any:
    """A YAML document as JSON values; 400 when it is not YAML, nests too deep or expands too far."""
    try:
        return _YAMLBuilder(what).build(raw)
    except yaml.YAMLError as exc:
        if getattr(exc, "problem", None) == _LIBYAML_TOO_DEEP:
            raise too_deep(what) from None
        raise errors.BadRequest(f"{what} could not be decoded as YAML: {exc}") from None


#: libyaml's own nesting limit (1,000 levels; PyYAML's wheels carry it from 6.0.4). Its scanner
#: looks up to 1,024 characters ahead for a flow key, so ``[[[…`` on one line can reach it before
#: the builder has seen 128 levels: the answer is the same either way.
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


_MERGE = object()  # the ``<<`` merge key
_NO_KEY = object()
_MAP, _SEQ, _SET, _OMAP = (
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:set",
    "tag:yaml.org,2002:omap",
)
_COLLECTION_TAGS = {_MAP: dict, _SET: dict, _OMAP: list, "tag:yaml.org,2002:pairs": list, _SEQ: list}


class _Frame:
    """An open mapping or sequence while the document is built from its events (``nodes``: its
    expanded weight, see :data:`MAX_YAML_EXPANDED`)."""

    __slots__ = ("anchor", "height", "key", "merges", "nodes", "tag", "value")

    def __init__(self, value: dict[str, Any] | list[Any], tag: str, anchor: str | None) -> None:
        self.value = value
        self.tag = tag
        self.anchor = anchor
        self.key: Any = _NO_KEY
        self.merges: list[Any] = []
        self.nodes = _NODE_WEIGHT
        self.height = 0


class _YAMLBuilder:
    """Builds JSON values straight from libyaml's events (no recursion anywhere).

    libyaml's own composer recurses in C — deep nesting crashes the process — and holds the
    interpreter lock for the whole document (100+ ms for 3 MB, every other thread stopped); the
    event loop here keeps depth and alias expansion in check as it goes and lets other threads run
    between events. Scalars resolve as SafeLoader resolves them, except timestamps (strings, as in
    Kubernetes); ``<<`` merge keys work as in SafeLoader.
    """

    _resolver = yaml.resolver.Resolver()
    _constructor = yaml.constructor.SafeConstructor()
    _scalar_tags = {
        "tag:yaml.org,2002:int": _constructor.construct_yaml_int,
        "tag:yaml.org,2002:float": _constructor.construct_yaml_float,
        "tag:yaml.org,2002:bool": _constructor.construct_yaml_bool,
        "tag:yaml.org,2002:binary": _constructor.construct_yaml_binary,
    }

    def __init__(self, what: str) -> None:
        self.what = what
        self.frames: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int, int]] = {}  # anchor → (value, weight, height)
        self.total = 0  # the expanded weight so far
        self.documents = 0
        self.result: Any = None

    def build(self, raw: bytes | str) -> Any:
        for event in yaml.parse(raw, Loader=_Loader):
            if isinstance(event, yaml.ScalarEvent):
                self.scalar(event)
            elif isinstance(event, yaml.CollectionStartEvent):
                self.start(event, isinstance(event, yaml.MappingStartEvent))
            elif isinstance(event, yaml.CollectionEndEvent):
                self.end()
            elif isinstance(event, yaml.AliasEvent):
                self.alias(event)
            elif isinstance(event, yaml.DocumentStartEvent):
                self.documents += 1
                if self.documents > 1:
                    raise errors.BadRequest(f"{self.what} holds more than one YAML document")
        return self.result

    def fail(self, message: str, event: yaml.Event) -> errors.BadRequest:
        return errors.BadRequest(f"{self.what} could not be decoded as YAML: {message}{event.start_mark}")

    def scalar(self, event: yaml.ScalarEvent) -> None:
        tag = event.tag
        value = event.value
        if tag is None or tag == "!":
            tag = self._resolver.resolve(yaml.ScalarNode, value, event.implicit)  # type: ignore[no-untyped-call]
        parsed: Any
        if tag == "tag:yaml.org,2002:str" or tag == "tag:yaml.org,2002:timestamp":
            parsed = value
        elif tag == "tag:yaml.org,2002:null":
            parsed = None
        elif tag == "tag:yaml.org,2002:merge":
            parsed = _MERGE
        elif tag == "tag:yaml.org,2002:value":
            parsed = "="
        elif tag in self._scalar_tags:
            parsed = self._scalar_tags[tag](yaml.ScalarNode(tag, value))
            if type(parsed) is float and not math.isfinite(parsed):
                raise self.fail(f"{value} is not a JSON number", event)
            if type(parsed) is int and not -(2**63) <= parsed < 2**64:
                parsed = float(parsed)  # as orjson reads such a number in JSON
            if type(parsed) is bytes:
                parsed = base64.b64encode(parsed).decode("ascii")
        else:
            raise self.fail(f"no value can be made of the tag {tag}", event)
        weight = _NODE_WEIGHT + len(value)
        if event.anchor is not None:
            self.anchors[event.anchor] = (parsed, weight, 0)
        self.deliver(parsed, weight, 0, event)

    def start(self, event: yaml.CollectionStartEvent, mapping: bool) -> None:
        tag = event.tag
        if tag is None or tag == "!":
            tag = _MAP if mapping else _SEQ
        if tag not in _COLLECTION_TAGS:
            raise self.fail(f"no value can be made of the tag {tag}", event)
        frames = self.frames
        if frames and frames[-1].key is _NO_KEY and type(frames[-1].value) is dict:
            raise self.fail("a mapping key must be a scalar", event)
        frames.append(_Frame({} if mapping else [], tag, event.anchor))
        self.count(_NODE_WEIGHT)
        if len(frames) > MAX_DEPTH:
            raise too_deep(self.what)

    def end(self) -> None:
        frame = self.frames.pop()
        value: Any = frame.value
        if frame.tag == _SET:
            value = dict.fromkeys(value)
        elif frame.tag != _MAP and frame.tag != _SEQ:  # !!omap, !!pairs: a sequence of one-key maps
            value = {k: v for item in value if type(item) is dict for k, v in item.items()}
        if frame.merges:
            merged: dict[str, Any] = {}
            for source in frame.merges:
                for part in reversed(source) if type(source) is list else (source,):
                    merged.update(part)
            merged.update(value)
            value = merged
        height = frame.height + 1
        if frame.anchor is not None:
            self.anchors[frame.anchor] = (value, frame.nodes, height)
        self.total -= frame.nodes  # counted as its parts came; counted once more as a whole below
        self.deliver(value, frame.nodes, height, None)

    def alias(self, event: yaml.AliasEvent) -> None:
        anchor = event.anchor or ""
        if anchor not in self.anchors:
            if any(frame.anchor == anchor for frame in self.frames):
                raise self.fail("an alias refers to a node that contains it", event)
            raise self.fail(f"found undefined alias {anchor!r}", event)
        value, weight, height = self.anchors[anchor]
        self.deliver(value, weight, height, event)

    def count(self, weight: int) -> None:
        self.total += weight
        if self.total > MAX_YAML_EXPANDED:
            raise errors.BadRequest(
                f"{self.what}: the YAML document expands to more than {MAX_YAML_EXPANDED} bytes (aliases)"
            )

    def deliver(self, value: Any, weight: int, height: int, event: yaml.Event | None) -> None:
        self.count(weight)
        frames = self.frames
        if not frames:
            self.result = value
            return
        if len(frames) + height > MAX_DEPTH:
            raise too_deep(self.what)
        frame = frames[-1]
        frame.nodes += weight
        if height > frame.height:
            frame.height = height
        container = frame.value
        if type(container) is list:
            container.append(value)
        elif frame.key is _NO_KEY:
            frame.key = value if value is _MERGE else _key_text(value, self.what)
        else:
            if frame.key is _MERGE:
                if type(value) is dict or (type(value) is list and all(type(v) is dict for v in value)):
                    frame.merges.append(value)
                elif event is not None:
                    raise self.fail("a merge key (<<) takes a mapping or a list of mappings", event)
                else:
                    raise errors.BadRequest(
                        f"{self.what}: a merge key (<<) takes a mapping or a list of mappings"
                    )
            else:
                container[frame.key] = value
            frame.key = _NO_KEY


def check_depth(value: Any, what: str) -> None:
    """400 when ``value`` nests objects and arrays more than :data:`MAX_DEPTH` levels deep.
    (Recursive, three times quicker than a loop with a stack: the walk stops one level past
    the limit, so it never goes deeper than that.)"""
    kind = type(value)
    if (kind is dict or kind is list) and _deeper_than_allowed(value, 1):
        raise too_deep(what)


def _deeper_than_allowed(node: dict[str, Any] | list[Any], level: int) -> bool:
    if level > MAX_DEPTH:
        return True
    children: Iterable[Any] = node.values() if type(node) is dict else node
    for child in children:
        kind = type(child)
        if (kind is dict or kind is list) and _deeper_than_allowed(child, level + 1):
            return True
    return False


def _key_text(key: Any, what: str) -> str:
    """A YAML mapping key as the JSON object key sigs.k8s.io/yaml makes of it."""
    if type(key) is str:
        return key
    if key is None:
        return "null"
    if type(key) is bool:
        return "true" if key else "false"
    if type(key) is int:
        return str(key)
    if type(key) is float and math.isfinite(key):
        return repr(key)
    raise errors.BadRequest(
        f"{what} could not be decoded as YAML: a mapping key of type {type(key).__name__}"
    )
