"""The programs the agent platform deploys into its pods, as they run there.

``agentruntime.runner`` is the agent runner: the process of a run's pod (a Job's or a
Sandbox's). It reads only what the operator gave the pod (its input ConfigMap mounted at
``/etc/agent``, its environment, the model's key from its Secret), talks to the model through
the OpenAI-compatible Chat Completions API with the ``openai`` SDK, runs the tools the model
calls, and ends with a JSON termination message (the answer, what to remember, the usage) that
the operator copies into the AgentRun's status; its transcript is its log.

Nothing here imports the operator: a run can be replayed from its snapshot alone. Paths are
the container's; on kubeloop's process node they are mapped through ``kubeloop.container_path``.
"""
