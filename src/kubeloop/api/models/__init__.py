"""Generated typed models of the built-in kinds operators use, one module per group-version
(import the module you need; nothing is imported here so that ``import kubeloop`` stays cheap)."""
