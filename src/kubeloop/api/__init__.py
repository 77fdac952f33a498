"""The API types every other layer shares: group/version/kind and group/version/resource names,
the Scheme and typed models, custom resources, and label/field selectors with name validation.
Imports nothing else of kubeloop."""
