"""Table output (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``), what ``kubectl get``
prints: the columns of each built-in kind, the columns a CustomResourceDefinition declares
(JSONPath), and PartialObjectMetadata views.
"""
