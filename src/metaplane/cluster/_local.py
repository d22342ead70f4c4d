"""A local cluster: broker nodes as processes of this machine on one store, started, killed
and stopped on purpose — what `metaplane standalone` and the demo run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

STOP_TIMEOUT = 30.0


@dataclass
class NodeProcess:
    broker_id: int
    process: asyncio.subprocess.Process
    log_path: Path

    @property
    def running(self) -> bool:
        return self.process.returncode is None


class LocalCluster:
    """Broker nodes as child processes (`python -m metaplane.cluster --broker-id …`), each
    logging to `logs/broker-{id}.log` in `folder`."""

    def __init__(
        self,
        url: str,
        folder: Path,
        *,
        workload: bool = False,
        node_args: Callable[[int], Sequence[str]] | None = None,
    ) -> None:
        self.url = url
        self.folder = folder
        self.workload = workload
        self.node_args = node_args
        """More arguments for the process of a broker id (a session TTL, a journal, …)."""
        self.nodes: dict[int, NodeProcess] = {}

    async def start_node(self, broker_id: int, index: int | None = None) -> NodeProcess:
        """Start one node and wait until it has joined (it says so on stdout)."""
        logs = self.folder / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"broker-{broker_id}.log"
        args = [
            sys.executable,
            "-m",
            "metaplane.cluster",
            "--store",
            self.url,
            "--broker-id",
            str(broker_id),
            "--index",
            str(index if index is not None else len(self.nodes)),
        ]
        if self.workload:
            args.append("--workload")
        if self.node_args is not None:
            args.extend(self.node_args(broker_id))
        with log_path.open("ab") as err:
            process = await asyncio.create_subprocess_exec(
                *args, stdout=asyncio.subprocess.PIPE, stderr=err, start_new_session=True
            )
        node = NodeProcess(broker_id, process, log_path)
        self.nodes[broker_id] = node
        await self._joined(node)
        return node

    async def _joined(self, node: NodeProcess) -> None:
        assert node.process.stdout is not None
        async with asyncio.timeout(60):
            line = await node.process.stdout.readline()
        if line.strip() != b"ready":
            code = await node.process.wait()
            raise RuntimeError(
                f"broker {node.broker_id} did not start (exit {code}); see {node.log_path}"
            )

    async def start(self, brokers: int, first_id: int = 1) -> None:
        for index in range(brokers):
            await self.start_node(first_id + index, index)

    async def kill(self, broker_id: int, sig: signal.Signals = signal.SIGKILL) -> float:
        """Send `sig` to a node; return when it was sent (monotonic seconds)."""
        node = self.nodes[broker_id]
        at = time.monotonic()
        if node.running:
            node.process.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            await node.process.wait()
        return at

    async def stop(self) -> None:
        """Stop every node cleanly (SIGTERM: topics sealed, sessions revoked)."""
        for node in self.nodes.values():
            if node.running:
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes.values():
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await node.process.wait()
            except TimeoutError:
                log.warning("broker %d did not stop in time; killing it", node.broker_id)
                with contextlib.suppress(ProcessLookupError):
                    node.process.kill()
                await node.process.wait()

    @property
    def running(self) -> list[int]:
        return sorted(b for b, node in self.nodes.items() if node.running)
