"""What a write means: kube-apiserver's generic registry store and the per-kind strategies.

``generic.Registry`` is the one create/get/list/update/patch/delete for every kind: create-time
metadata, optimistic concurrency, finalizers and deletionTimestamp, delete propagation, dry-run,
managedFields. Everything that differs between kinds sits in the kind's strategy
(``strategies``): preparing for create and update (status and generation rules), defaults,
validation, the name rule, the served form. ``defaults`` and ``validation`` hold the built-in
kinds' rules the strategies call.
"""
