"""The group and version of the platform's kinds, and what their declarations share (kubebuilder's
``groupversion_info.go``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from kubeloop.crd import PrinterColumn, Rule

GROUP = "agents.kubeloop.dev"


VERSION = "v1alpha1"


#: ``kubectl get agentplatform`` lists them all. Not "agents": kubectl expands a category before
#: it looks for a resource, so ``kubectl get agents`` would list every kind of the category.
PLATFORM = "agentplatform"


CATEGORIES = (PLATFORM, "all")


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", type="date")


Name = Annotated[str, Field(min_length=1, max_length=253)]


def name_rule(kind: str, limit: int, names: str) -> Rule:
    """A rule on the object's name, for kinds whose name becomes a name with tighter rules than
    an object's (a Service's: a DNS-1035 label; a label value: at most 63 characters). Refused at
    the API, the user hears it at once, not as an operator's failed write later."""
    return Rule(
        f"self.metadata.name.size() <= {limit} && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        message=f"a{'n' if kind[0] in 'AEIOU' else ''} {kind}'s name must be at most {limit} characters of"
        f" a-z, 0-9 and '-', starting with a letter and ending with a letter or digit: it names {names}",
    )
