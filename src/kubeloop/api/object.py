"""The one type of an API object in its JSON form, as every layer passes it around."""

from __future__ import annotations

from typing import Any

#: An API object (or any part of one) as decoded JSON.
Obj = dict[str, Any]
