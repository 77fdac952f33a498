"""How simulated workloads behave (kwok-style): timings, and the pod annotations that steer them.

With simulation on (``kubeloop apiserver --simulate``, ``ServerOptions(simulate=True)``) there is
a Node, pods are scheduled on it and run, and Jobs finish: no containers run anywhere, but the
objects go through the states a cluster's would, so an operator's view of them can be tested.

A pod runs until it is deleted when its ``restartPolicy`` is ``Always``; otherwise it ends after
``pod_run_seconds``, or what its ``kubeloop.dev/duration`` annotation says (seconds). It succeeds
unless ``kubeloop.dev/outcome`` is ``Failed``; ``kubeloop.dev/termination-message`` becomes its
container's termination message. Annotations on a Job's pod template reach its pods.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

#: The annotations a pod (or a Job's pod template) can carry.
DURATION_ANNOTATION = "kubeloop.dev/duration"
OUTCOME_ANNOTATION = "kubeloop.dev/outcome"
MESSAGE_ANNOTATION = "kubeloop.dev/termination-message"

#: The simulated node's name.
NODE_NAME = "kubeloop-node"


@dataclass(frozen=True)
class SimulationOptions:
    """Timings of simulated workloads, in seconds (small ones make tests fast)."""

    #: From scheduling until the containers run (and are ready).
    pod_start_seconds: float = 1.0
    #: How long a pod that is not restarted runs, unless its annotation says otherwise.
    pod_run_seconds: float = 3.0
    #: How often the kubelet checks that its node is registered (and registers it again).
    node_check_seconds: float = 10.0
    #: How often a pod waiting for a Secret or ConfigMap its environment names (reason
    #: CreateContainerConfigError) is looked at again.
    config_retry_seconds: float = 2.0
    #: Images whose containers run as local processes (``IMAGE=COMMAND`` or ``IMAGE=host``:
    #: ``localimages``); the pods of other images are simulated.
    local_images: tuple[str, ...] = ()
    #: Run, as well, the images installed packages declare (entry-point group ``kubeloop.images``).
    installed_images: bool = True
    #: The first back-off of a local container that ended and starts again (it doubles, up to
    #: five minutes).
    crash_backoff_seconds: float = 10.0
    #: Where local pods keep their folders and logs (None: a folder of the process's own).
    pods_dir: pathlib.Path | None = None
    #: Fork the processes of Python images from a warm interpreter that has imported the
    #: libraries their package requires (``forkserver``); False: each starts anew.
    fork_server: bool = True
