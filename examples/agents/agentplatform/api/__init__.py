"""The platform's API: one package per version of the group ``agents.kubeloop.dev``."""
