"""Jobs: a create selects the Job's own pods by its uid (upstream's ``generateSelector``)."""

from __future__ import annotations

from kubeloop.api.object import Obj
from kubeloop.apiserver.groups.batch import validation
from kubeloop.apiserver.registry.strategies import BuiltinStrategy


class JobStrategy(BuiltinStrategy):
    """Jobs: unless ``manualSelector``, a create labels the template with the Job's uid and name
    and selects the uid (upstream's ``generateSelector``), so a Job's selector (``kubectl logs
    job/x``, the controller) finds its own pods and never another's of the same labels."""

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("manualSelector") is True:
            return
        meta = obj.get("metadata") or {}
        uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
        template = spec.get("template")
        if not isinstance(template, dict):
            return
        template_meta = template.setdefault("metadata", {})
        if not isinstance(template_meta, dict):
            return
        labels = template_meta.get("labels")
        labels = dict(labels) if isinstance(labels, dict) else {}
        for key in validation.JOB_NAME_LABELS:
            labels.setdefault(key, name)
        for key in validation.CONTROLLER_UID_LABELS:
            labels.setdefault(key, uid)
        template_meta["labels"] = labels
        selector = spec.get("selector")
        selector = dict(selector) if isinstance(selector, dict) else {}
        match_labels = selector.get("matchLabels")
        match_labels = dict(match_labels) if isinstance(match_labels, dict) else {}
        match_labels.setdefault(validation.CONTROLLER_UID_LABELS[0], uid)
        selector["matchLabels"] = match_labels
        spec["selector"] = selector
