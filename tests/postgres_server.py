"""A throwaway PostgreSQL server for tests: Debian's ``postgresql`` package (which
``make test`` installs with apt-get where it can), started on a free port of 127.0.0.1 in
a temporary folder and stopped at the end. As root, the server runs as the ``postgres``
user that package creates (PostgreSQL refuses to run as root)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

USER = "tilelab"


def binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl`` (on PATH, or Debian's versioned folder)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def unavailable() -> str | None:
    """Why no server can be started here (None: it can)."""
    if binaries() is None:
        return (
            "no PostgreSQL server here (initdb not found): `make test` installs Debian's "
            "postgresql package with apt-get as root; install it, or run as root with apt-get"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a `postgres` user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the server as `postgres`"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server() -> Iterator[str]:
    """Start a server; yields its URL without a database name (``postgresql://.../``)."""
    bindir = binaries()
    assert bindir is not None, unavailable()
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    home = Path(tempfile.mkdtemp(prefix="tilelab-pg-"))
    home.chmod(0o755)
    data, log = home / "data", home / "server.log"
    if as_root:
        entry = pwd.getpwnam("postgres")
        os.chown(home, entry.pw_uid, entry.pw_gid)
    port = _free_port()

    def run(*cmd: str) -> None:
        subprocess.run(
            [*prefix, *cmd], check=True, capture_output=True, text=True, timeout=120, cwd=home
        )

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8",
            "--no-sync")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
            "-o", f"-p {port} -h 127.0.0.1 -k {home} -c fsync=off", "start")
        try:
            yield f"postgresql://{USER}@127.0.0.1:{port}/"
        finally:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def create_database(base_url: str, name: str) -> str:
    """A new, empty database on the server; returns its URL."""
    import psycopg

    with psycopg.connect(base_url + "postgres", autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    return base_url + name
