"""Authorization: who may do what, as kube-apiserver decides it.

``rbac`` evaluates a request's attributes (user, verb, group, resource, subresource, namespace,
name) against the stored Roles, ClusterRoles and their bindings — ``system:masters`` may do
anything — and words the 403 as upstream does; ``bootstrap`` holds the roles and bindings a
cluster starts with (cluster-admin, admin, edit, view and the system roles every user needs).
"""
