"""Real ``celery worker`` subprocesses for the tests (kill -9, SIGTERM, -E)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

HERE = Path(__file__).parent


def start_worker_process(
    app_module: str,
    *,
    queues: Sequence[str],
    env: Mapping[str, str],
    pool: str = "threads",
    concurrency: int = 4,
    events: bool = False,
    name: str = "worker",
    loglevel: str = "WARNING",
    paths: Sequence[Path] = (HERE,),
    extra: Sequence[str] = (),
    hostname: str | None = None,
) -> subprocess.Popen[bytes]:
    """``celery -A app_module worker`` in its own session (so ``os.killpg``
    reaches its pool children). Its node name is ``hostname`` if given, else
    ``name-<random>@<host>``."""
    pythonpath = [str(p) for p in paths]
    if os.environ.get("PYTHONPATH"):
        pythonpath.append(os.environ["PYTHONPATH"])
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        app_module,
        "worker",
        "-P",
        pool,
        "-c",
        str(concurrency),
        "-Q",
        ",".join(queues),
        "-n",
        hostname or f"{name}-{uuid.uuid4().hex[:6]}@%h",
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        loglevel,
        *(["-E"] if events else []),
        *extra,
    ]
    return subprocess.Popen(
        command,
        env={**os.environ, **env, "PYTHONPATH": os.pathsep.join(pythonpath)},
        cwd=paths[0],
        stdout=subprocess.DEVNULL,  # the banner; warnings and errors go to stderr
        start_new_session=True,
    )


def kill_group(process: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the worker and its pool children, and reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
    process.wait(timeout=20)


@contextlib.contextmanager
def worker_process(app_module: str, **kwargs: object) -> Iterator[subprocess.Popen[bytes]]:
    """A worker subprocess for the block; warm-stopped (SIGTERM) at its end,
    killed if it does not stop in time."""
    process = start_worker_process(app_module, **kwargs)  # type: ignore[arg-type]
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                kill_group(process)
        else:
            kill_group(process)  # the pool children, if any
