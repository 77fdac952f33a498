"""The embedded cluster's node: what a kubelet does, for the embedded API server.

``kubelet.SimulatedKubelet`` registers a Node and takes its pods through a pod's life: with
``--simulate`` their containers are simulated (``simulation``: timings and outcomes the pods'
annotations steer); a pod whose images are all local (``--local-image``) runs its containers as
processes (``processes``), with their volumes (``podvolumes``), probes (``probes``), an address of
their own (``podaddresses``) and the way to Services (``serviceproxy``); ``podevents`` is what the
kubelet and the scheduler say about pods in Events. ``sessions`` is what the
server's log, exec, attach and port-forward requests ask of it. Like the controller manager it
reaches the server only through kubeloop's client, with an identity of its own.
"""
