"""Admission webhooks: the Validating- and MutatingWebhookConfigurations the server calls.

kube-apiserver's webhook admission plugins: ``configurations`` reads and keeps the stored
configurations, ``matching`` decides which webhooks a request calls (rules, selectors, match
policy), ``review`` builds the AdmissionReview and checks the answer, and ``dispatcher`` runs the
mutating webhooks in turn and the validating ones at once, calling them over TLS through
``webhookclient``.
"""
