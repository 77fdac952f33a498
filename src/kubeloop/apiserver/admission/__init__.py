"""Admission plugins built into the server (upstream's ``plugin/pkg/admission``): each one a
stage of the chain the registry runs on writes (``registry.admissionhooks``)."""
