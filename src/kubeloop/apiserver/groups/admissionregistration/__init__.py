"""The admissionregistration.k8s.io API group: MutatingAdmissionPolicies,
MutatingAdmissionPolicyBindings, MutatingWebhookConfigurations, ValidatingAdmissionPolicies,
ValidatingAdmissionPolicyBindings and ValidatingWebhookConfigurations."""

from __future__ import annotations

from kubeloop.apiserver.groups.admissionregistration import columns, defaults, validation
from kubeloop.apiserver.groups.declaration import API_EXTENSIONS, BuiltinKind, plain

GROUP = "admissionregistration.k8s.io"

#: The group's kinds, in the order discovery lists them.
KINDS: tuple[BuiltinKind, ...] = (
    BuiltinKind(
        plain(
            GROUP,
            "mutatingadmissionpolicies",
            "MutatingAdmissionPolicy",
            False,
            categories=API_EXTENSIONS,
            tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
        ),
        defaults=defaults.admission_policy,
        columns=columns.mutating_admission_policy_columns,
    ),
    BuiltinKind(
        plain(
            GROUP,
            "mutatingadmissionpolicybindings",
            "MutatingAdmissionPolicyBinding",
            False,
            categories=API_EXTENSIONS,
            tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
        ),
        columns=columns.policy_binding_columns,
    ),
    BuiltinKind(
        plain(
            GROUP,
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfiguration",
            False,
            categories=API_EXTENSIONS,
            tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
        ),
        defaults=defaults.webhook_configuration,
        rules=validation.mutating_webhook_configuration_rules,
        columns=columns.webhook_columns,
    ),
    BuiltinKind(
        plain(
            GROUP,
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            False,
            categories=API_EXTENSIONS,
            tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
            subresources=("status",),
        ),
        defaults=defaults.admission_policy,
        rules=validation.validating_admission_policy_rules,
        columns=columns.validating_admission_policy_columns,
    ),
    BuiltinKind(
        plain(
            GROUP,
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            False,
            categories=API_EXTENSIONS,
            tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
        ),
        defaults=defaults.admission_policy_binding,
        rules=validation.validating_admission_policy_binding_rules,
        columns=columns.policy_binding_columns,
    ),
    BuiltinKind(
        plain(
            GROUP,
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfiguration",
            False,
            categories=API_EXTENSIONS,
            tracks_generation=True,  # upstream's strategy sets and bumps metadata.generation
        ),
        defaults=defaults.webhook_configuration,
        rules=validation.validating_webhook_configuration_rules,
        columns=columns.webhook_columns,
    ),
)
