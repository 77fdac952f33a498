"""Table output (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``), what ``kubectl get``
prints: the engine (``tables``) that prints a built-in kind by its ``KindPrinter`` (declared by
its API group, ``apiserver.groups``), the columns a CustomResourceDefinition declares (JSONPath)
and PartialObjectMetadata views; ``cells``: what columns are made of.
"""
