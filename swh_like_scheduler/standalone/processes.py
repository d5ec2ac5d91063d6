"""Child processes of the standalone platform.

Each child runs in a new session, hence its own process group (its pid is the
group id), with stdin closed and stdout/stderr appended to a log file. Stopping
a child signals the whole group, so what the child started itself (the pool
processes of a Celery prefork worker, say) goes with it. On Linux each child
also gets ``PR_SET_PDEATHSIG`` = SIGTERM: if the standalone process is killed
without a chance to clean up, its children are told to stop anyway.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

#: How long the children of one stop stage may take to exit after SIGTERM.
STOP_TIMEOUT = 10.0
#: How long to wait for the groups to vanish after SIGKILL.
KILL_TIMEOUT = 5.0


@dataclass(frozen=True)
class ChildSpec:
    """What to run: ``argv`` with ``env``, output appended to ``log_path``."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class Child:
    """A started child process (the leader of its own process group);
    ``started``, when (``time.monotonic()``)."""

    spec: ChildSpec
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_code(self) -> int | None:
        """The child's exit code, or ``None`` while it runs."""
        return self.process.poll()

    def group_alive(self) -> bool:
        """Whether any process of the child's group still exists (the leader
        is reaped first, so an exited leader does not count)."""
        self.process.poll()
        return group_alive(self.pid)

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a group id reused by someone else
        return False
    return True


def _pdeathsig_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGTERM when we die (Linux).

    The signal fires when the *thread* that forked the child exits, so it is
    only armed when spawning from the main thread.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # we died before prctl took effect
            os._exit(1)

    return preexec


def spawn(spec: ChildSpec) -> Child:
    """Start ``spec`` in a new session (own process group), output to its log."""
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(spec.log_path, "ab") as log_file:
        process = subprocess.Popen(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=dict(spec.env) if spec.env else None,
            start_new_session=True,
            preexec_fn=_pdeathsig_preexec(),
            close_fds=True,
        )
    logger.info("started %s (pid %d): %s", spec.name, process.pid, " ".join(spec.argv))
    return Child(spec, process)


def _wait_gone(children: Sequence[Child], deadline: float) -> list[Child]:
    """Wait until every child's group is gone or ``deadline``; the ones left."""
    left = list(children)
    while left:
        left = [c for c in left if c.group_alive()]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return left


def stop_children(
    stages: Iterable[Sequence[Child]],
    *,
    timeout: float = STOP_TIMEOUT,
    kill_timeout: float = KILL_TIMEOUT,
) -> list[str]:
    """Stop the children stage by stage: SIGTERM to every group of a stage,
    wait up to ``timeout`` for them to exit, SIGKILL the groups still there.

    Returns the names of the children that had to be killed; raises nothing.
    """
    killed: list[str] = []
    for stage in stages:
        stage = [c for c in stage if c.group_alive()]
        if not stage:
            continue
        for child in stage:
            child.signal_group(signal.SIGTERM)
        left = _wait_gone(stage, time.monotonic() + timeout)
        for child in left:
            logger.warning(
                "%s (pid %d) did not stop in %.0f s: killed", child.name, child.pid, timeout
            )
            child.signal_group(signal.SIGKILL)
            killed.append(child.name)
        still = _wait_gone(left, time.monotonic() + kill_timeout)
        for child in still:  # pragma: no cover - unkillable (uninterruptible sleep)
            logger.error("%s (pid %d) survived SIGKILL", child.name, child.pid)
        for child in stage:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=0.5)
    return killed
