"""Log output: JSON lines carry the reconcile ID of the reconcile they were logged in."""

from __future__ import annotations

import io
import json
import logging

from kubeloop.cli.logs import configure
from kubeloop.controller.controller import Controller
from kubeloop.controller.reconcile import Request
from tests.conftest import eventually


async def test_json_lines_with_reconcile_ids() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    # configure() sets named loggers' levels too: put every one back for the worker's later tests.
    levels = {
        name: logger.level
        for name, logger in logging.Logger.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    handler = configure(verbose=False, json_format=True, stream=stream)
    try:
        log = logging.getLogger("my.reconciler")

        async def reconcile(request: Request) -> None:
            log.info("reconciling %s", request, extra={"replicas": 3})

        controller = Controller("logs", reconcile)
        await controller.start()
        controller.queue.add(Request("ns", "a"))
        controller.queue.add(Request("ns", "b"))
        await eventually(lambda: controller.results["success"] == 2)
        await controller.stop()
        log.warning("outside", exc_info=ValueError("boom"))
        lines = [json.loads(line) for line in stream.getvalue().splitlines()]
        inside = [line for line in lines if line["msg"].startswith("reconciling")]
        assert [line["msg"] for line in inside] == ["reconciling ns/a", "reconciling ns/b"]
        assert all(line["level"] == "info" and line["logger"] == "my.reconciler" for line in inside)
        assert all(line["replicas"] == 3 for line in inside)
        assert len({line["reconcileID"] for line in inside}) == 2  # one ID per reconcile
        outside = next(line for line in lines if line["msg"] == "outside")
        assert "reconcileID" not in outside and "ValueError: boom" in outside["error"]
        assert outside["ts"].endswith("Z")
    finally:
        root.removeHandler(handler)
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, logger in list(logging.Logger.manager.loggerDict.items()):
            if isinstance(logger, logging.Logger):
                logger.setLevel(levels.get(name, logging.NOTSET))
