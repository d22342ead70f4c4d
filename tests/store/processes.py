"""Running the child processes of tests/store/worker.py and waiting for what they say."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("worker.py")


class Child:
    """One worker process; lines on its stdout are its events."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, *args: str, worker: Path = WORKER) -> Child:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(worker),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(process)

    async def line(self, timeout: float = 30.0) -> str:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not raw:
            code = await self.process.wait()
            raise AssertionError(f"worker ended (exit code {code}) before saying anything")
        return raw.decode().rstrip("\n")

    async def expect(self, text: str, timeout: float = 30.0) -> None:
        assert await self.line(timeout) == text

    def say(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode() + b"\n")

    async def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        if self.process.returncode is None:
            self.process.send_signal(sig)
        await self.process.wait()
