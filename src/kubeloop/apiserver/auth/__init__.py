"""Authorization: who may do what, as kube-apiserver decides it.

``rbacauthorizer`` evaluates a request's attributes (user, verb, group, resource, subresource,
namespace, name) against the stored Roles, ClusterRoles and their bindings — ``system:masters``
may do anything — and words the 403 as upstream does; ``escalation`` keeps anyone from granting
what they do not hold; ``bootstrap`` holds the roles and bindings a cluster starts with
(cluster-admin, admin, edit, view and the system roles every user needs). ``tokens`` issues
ServiceAccount tokens, ``reviews`` answers the access and token reviews, ``impersonation``
checks ``kubectl --as``, ``celauthorizer`` is the ``authorizer`` of admission CEL; who made a
request is ``apiserver.userinfo.UserInfo``.
"""
