"""What a served resource is, the run-time catalog of them, and their schemas.

``resources.ResourceType`` describes a REST resource (group, version, plural, kind, scope, short
names, categories, subresources, field selectors); ``resources.ResourceCatalog`` looks them up
and changes at run time (a CustomResourceDefinition adds its kinds). The built-in ones are
declared by their API groups (``apiserver.groups``). ``schemas`` reads upstream's OpenAPI
definitions of the built-in kinds; ``mediatypes`` names the patch types. Everything above reads
from here; this package imports nothing of the server.
"""
