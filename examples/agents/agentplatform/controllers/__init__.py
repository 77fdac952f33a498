"""The platform's controllers, one module per kind it reconciles (``agent``, ``agentrun``,
``agentschedule``, ``mcpserver``, ``personapack``, ``skillpack``), plus the run webhook
(``runwebhook``: posts become AgentRuns). They do not import each other: what they build alike is in
``builders``, the cache's field indexes in ``indexes``."""
