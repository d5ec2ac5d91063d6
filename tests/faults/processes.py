"""The fault suite's processes: each in its own session (a signal reaches
its whole group: a worker's pool dies with it), its output in a log file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).parent


class ProcessTable:
    """Named processes started with :meth:`environment`, in ``logs``."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def environment(self) -> dict[str, str]:
        raise NotImplementedError

    def launch(
        self, name: str, command: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                command,
                env=self.environment() if env is None else env,
                cwd=HERE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes[name] = process
        return process

    def signal(self, name: str, sig: int) -> None:
        process = self.processes[name]
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)

    def alive(self, name: str) -> bool:
        return name in self.processes and self.processes[name].poll() is None

    def stop_all(self, timeout: float) -> None:
        """SIGTERM to every process (woken first if paused), SIGKILL to
        those still there after ``timeout`` seconds."""
        for name in list(self.processes):
            self.signal(name, signal.SIGCONT)
            self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
        for name in list(self.processes):
            self.signal(name, signal.SIGKILL)
