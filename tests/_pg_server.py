"""A throwaway PostgreSQL server for one test run, where its binaries can be had.

``.ci/run`` starts one and sets ``AGTOOL_TEST_POSTGRES``. A developer running
the README's test command on a machine with Debian's ``postgresql`` package
gets the same without a step of their own: the session starts a cluster in a
temporary folder, on a free loopback port, runs the Postgres tests against it
and removes it afterwards. Where there are no binaries nothing is started and
those tests skip, saying so (``tests/_pg.py``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable


def _binaries() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda path: [int(part) for part in path.split("/")[4].split(".")
                                     if part.isdigit()])
    return os.path.dirname(found[-1]) if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start() -> tuple[str, Callable[[], None]] | None:
    """``(url, stop)`` of a server started now, or ``None`` when none can be started here."""
    bin_dir = _binaries()
    if bin_dir is None:
        return None
    # initdb and postgres refuse to run as root: as root, the package's postgres user runs them.
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return None
        as_user = ["runuser", "-u", "postgres", "--"]
    folder = tempfile.mkdtemp(prefix="agtool-test-pg-")
    if as_user:
        shutil.chown(folder, "postgres")
    port = _free_port()
    data, log = os.path.join(folder, "data"), os.path.join(folder, "log")

    def run(*command: str) -> None:
        subprocess.run([*as_user, *command], check=True, capture_output=True, timeout=120)  # noqa: S603 - the package's own binaries

    def stop() -> None:
        subprocess.run([*as_user, f"{bin_dir}/pg_ctl", "-D", data, "-s", "-m", "fast", "stop"],  # noqa: S603
                       check=False, capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)

    try:
        run(f"{bin_dir}/initdb", "-D", data, "-U", "agtool", "-A", "trust", "-E", "UTF8",
            "--no-sync")
        # Loopback only, its socket inside its own folder; durability is not what the tests
        # are about, so fsync is off.
        run(f"{bin_dir}/pg_ctl", "-D", data, "-l", log, "-w", "-s", "start", "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        run(f"{bin_dir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "agtool",
            "agtool_test")
    except (OSError, subprocess.SubprocessError):
        stop()
        return None
    return f"postgresql://agtool@127.0.0.1:{port}/agtool_test", stop
