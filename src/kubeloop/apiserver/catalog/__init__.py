"""What the server serves: one declaration per resource, the run-time catalog of them, and their
schemas.

``resources.ResourceType`` declares a REST resource (group, version, plural, kind, scope, short
names, categories, subresources, field selectors) and names the strategy that gives it its
semantics; ``resources.ResourceCatalog`` looks them up and changes at run time (a
CustomResourceDefinition adds its kinds). ``schemas`` reads upstream's OpenAPI definitions of
the built-in kinds; ``eventconversion`` maps core Events to events.k8s.io/v1. Everything above
reads from here; this package imports nothing of the server.
"""
