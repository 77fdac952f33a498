"""The patch media types of the Kubernetes API, by the names the server and its OpenAPI use."""

from __future__ import annotations

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

#: What built-in kinds accept, in the order a 415 lists them.
BUILTIN_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH)
#: What custom resources accept: no strategic merge (they have no Go struct tags to merge by).
CUSTOM_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH)
