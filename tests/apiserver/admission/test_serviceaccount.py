"""The ServiceAccount admission plugin, as a client meets it: a pod gets its account's
credentials as a ``kube-api-access-<5 letters>`` volume."""

from __future__ import annotations

import pathlib
import random
import re

from kubeloop.apiserver.server import APIServer, ServerOptions
from kubeloop.client.config import load_config
from kubeloop.client.rest import APIClient


async def test_a_pod_gets_an_access_volume_and_the_global_random_is_left_alone(tmp_path: pathlib.Path) -> None:
    """Its name's letters are upstream's (no vowels, no look-alikes), and drawing them moves no
    generator a program or a test tool (hypothesis) relies on: the ``random`` module's state is
    what it was (the server admitting the pods runs in the test's own process)."""
    options = ServerOptions(port=0, data_dir=tmp_path / "data", fsync=False)
    async with APIServer(options) as server, APIClient(load_config(server.kubeconfig_path)) as client:
        before = random.getstate()
        names = set()
        for i in range(5):
            metadata = {"name": f"p{i}", "namespace": "default"}
            spec = {"containers": [{"name": "app", "image": "nginx"}]}
            pod = await client.create({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
            (volume,) = [v["name"] for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
            assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", volume), volume
            names.add(volume)
        assert random.getstate() == before
        assert len(names) == 5
