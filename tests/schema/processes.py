"""Running the child processes of tests/schema/worker.py and reading what they say."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

WORKER = Path(__file__).with_name("worker.py")


class Child:
    """One worker process; lines on its stdout are its events."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, *args: str) -> Child:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
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

    async def lines_until(self, prefix: str, timeout: float = 30.0) -> tuple[list[str], str]:
        """Every line before the first that starts with `prefix`, and that line."""
        said: list[str] = []
        while not (line := await self.line(timeout)).startswith(prefix):
            said.append(line)
        return said, line

    def say(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode() + b"\n")

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
