"""The ``kubeloop`` command: ``apiserver`` (serve the embedded API server), ``run`` (run an
operator's ``setup(manager)``) and ``demo``.

``kubeloop apiserver --memory --port 0`` prints one line with ``ready`` and the URL once it
accepts requests, and serves until SIGTERM or SIGINT.
"""
