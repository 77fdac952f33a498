"""The API types every other layer shares: group/version/kind and group/version/resource names,
and (later) the Scheme and typed models. Imports nothing else of kubeloop."""
