"""What a write means: kube-apiserver's generic registry store and the per-kind strategies.

``generic.Registry`` is the one create/get/list/update/patch/delete for every kind: create-time
metadata, optimistic concurrency, finalizers and deletionTimestamp, delete propagation, dry-run,
managedFields. Everything that differs between kinds sits in the kind's strategy
(``strategies``): preparing for create and update (status and generation rules), defaults,
validation, the name rule, the served form. What is particular to each built-in kind is declared
by its API group (``apiserver.groups``) and handed to the registry by the server;
``validation`` holds what every kind's validation shares.

Beside them: ``verboptions`` (the options of each verb and what it returns), ``listing`` (where a
list starts: resourceVersion rules and continue tokens), ``patching`` (JSON, merge and strategic
merge patches by media type), ``serviceips`` (Services' cluster IPs and node ports) and ``pods``
(binding and eviction).
"""
