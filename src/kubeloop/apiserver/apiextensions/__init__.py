"""CustomResourceDefinitions: what apiextensions-apiserver does, inside the one server.

``crdregistry`` validates a CRD as upstream does and, in the same write, sets what upstream's
establishing controllers set later (accepted names, the NamesAccepted and Established
conditions, stored versions); it builds each served version's strategy from its compiled schema.
``structural`` checks and compiles a version's ``openAPIV3Schema`` into the tree that prunes,
defaults and validates every write of the custom resources, its ``x-kubernetes-validations``
run by the shared CEL engine (``kubeloop.apiserver.cel``: rules, their type check, the
optional syntax). ``crdcontroller`` puts the served versions into the
catalog once a CRD write is durable, and removes a deleted CRD's objects before the CRD goes.
"""
