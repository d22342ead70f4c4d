"""Who may do what on the HTTP API: bearer tokens, each with a role — `read` (every GET) or
`admin` (everything) — from a token file named by `metaplane serve --tokens FILE`.

The file has one token a line, `ROLE NAME TOKEN`; blank lines and `#` comments are skipped:

    # role   name      token (at least 16 characters)
    admin    alice     3f6c1a0e9b7d4c2a8e5f
    read     grafana   9d2e7b4a1c6f8e3b5a0d

Without a token file the server listens on loopback only: anyone on the machine may then
read and write, which it says when it starts.
"""

from __future__ import annotations

import enum
import hmac
import stat
from dataclasses import dataclass
from pathlib import Path

from metaplane.store import InvalidRequest

MIN_TOKEN_LENGTH = 16


class Role(enum.StrEnum):
    READ = "read"
    ADMIN = "admin"


@dataclass(frozen=True)
class Caller:
    name: str
    role: Role

    def may(self, write: bool) -> bool:
        return self.role is Role.ADMIN or not write


class TokenFileError(InvalidRequest):
    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")


@dataclass(frozen=True)
class Tokens:
    """The token file's tokens; `caller` finds who a presented token belongs to."""

    by_token: dict[str, Caller]

    @classmethod
    def read(cls, path: Path) -> Tokens:
        try:
            text = path.read_text(encoding="utf-8")
            mode = path.stat().st_mode
        except (OSError, UnicodeDecodeError) as error:
            raise TokenFileError(path, 0, f"cannot read it: {error}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise TokenFileError(path, 0, "others may read it: chmod 600 it first")
        found: dict[str, Caller] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            token, caller = parse_line(path, number, words)
            if token in found:
                raise TokenFileError(path, number, "this token is given twice")
            found[token] = caller
        if not found:
            raise TokenFileError(path, 0, "no token in it")
        return cls(found)

    def caller(self, presented: str) -> Caller | None:
        """The caller whose token `presented` is (compared in constant time), or None."""
        match = None
        for token, caller in self.by_token.items():
            if hmac.compare_digest(token.encode(), presented.encode()):
                match = caller
        return match


def parse_line(path: Path, number: int, words: list[str]) -> tuple[str, Caller]:
    if len(words) != 3:
        raise TokenFileError(path, number, "a line is ROLE NAME TOKEN")
    role, name, token = words
    if role not in {member.value for member in Role}:
        raise TokenFileError(path, number, f"role {role!r} is neither read nor admin")
    if len(token) < MIN_TOKEN_LENGTH:
        raise TokenFileError(path, number, f"a token has at least {MIN_TOKEN_LENGTH} characters")
    return token, Caller(name, Role(role))


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer …` header."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
