"""The images of the platform's programs: one Dockerfile per image under ``images/``, whose
entry point is the very module the process node runs for that image (``agentruntime.images``),
whose tag is that image, and whose files exist; the images the operator and the samples name
are those. (No Docker engine runs on these machines: the images are run as processes there.)"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import pathlib
import re

import agentplatform.controllers.channels
import agentplatform.controllers.memory
import yaml
from agentruntime.images import IMAGES, local_images

FOLDER = pathlib.Path(__file__).parents[1]
ROOT = FOLDER.parents[1]


def repository(image: str) -> str:
    return image.rsplit(":", 1)[0]


def test_each_image_is_built_with_the_entry_point_the_process_node_runs() -> None:
    built = {path.parent.name for path in (FOLDER / "images").glob("*/Dockerfile")}
    assert built == {image.rsplit("/", 1)[1] for image in IMAGES}
    for image, module in IMAGES.items():
        dockerfile = (FOLDER / "images" / image.rsplit("/", 1)[1] / "Dockerfile").read_text()
        [entrypoint] = re.findall(r"^ENTRYPOINT (.+)$", dockerfile, re.M)
        assert json.loads(entrypoint) == ["python", "-m", module]
        assert importlib.util.find_spec(module) is not None
        [tag] = re.findall(r"-t (\S+) \.$", dockerfile, re.M)
        assert repository(tag) == image
        for source in re.findall(r"^COPY (.+) \S+$", dockerfile, re.M):
            for path in source.split():
                assert (ROOT / path).exists(), path
    assert local_images("py") == tuple(f"{image}=py -m {module}" for image, module in IMAGES.items())


def test_the_installed_package_declares_its_images_to_the_process_node() -> None:
    """Installed (``make demo`` does it), the package names its images in the entry-point group
    ``kubeloop.images``, so an embedded server runs them with no ``--local-image``: each runs
    the module its Dockerfile runs."""
    declared = {entry.name: entry.value for entry in importlib.metadata.entry_points(group="kubeloop.images")}
    assert set(declared) == set(IMAGES)
    for image, module in IMAGES.items():
        target, _, function = declared[image].partition(":")
        assert target in (module, f"{module}.__main__") and function == "main"
        assert callable(getattr(importlib.import_module(target), function))


def test_the_operator_and_the_samples_name_these_images() -> None:
    assert repository(agentplatform.controllers.memory.MEMORY_SERVER_IMAGE) in IMAGES
    channels = agentplatform.controllers.channels.DEFAULT_IMAGES
    assert all(repository(image) in IMAGES for image in channels.values())  # every type has its program
    samples = [
        doc
        for path in sorted((FOLDER / "config" / "samples").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") not in (None, "Kustomization")
    ]
    named = {doc["metadata"]["name"]: doc["spec"]["image"] for doc in samples if doc["kind"] in ("ServingRuntime", "MCPServer")}
    assert repository(named["python-agent"]) in IMAGES
    assert repository(named["cluster-tools"]) in IMAGES
