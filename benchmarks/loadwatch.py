"""Machine load sampled during a benchmark (the 1-minute load average, every `every` seconds), so every figure
can be reported beside the load it ran under."""

from __future__ import annotations

import os
import statistics
import threading
import time


class LoadWatch:
    def __init__(self, every: float = 30.0):
        self.every = every
        self.samples: list[tuple[float, float]] = []  # (seconds since start, 1-min load average)
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - self._started, os.getloadavg()[0]))
            self._stop.wait(self.every)

    def __enter__(self) -> LoadWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def now(self) -> float:
        return os.getloadavg()[0]

    def summary(self) -> str:
        loads = [load for _, load in self.samples] or [self.now()]
        return (f"load average (1 min) over the run: mean {statistics.fmean(loads):.2f}, min {min(loads):.2f}, "
                f"max {max(loads):.2f} ({len(loads)} samples, {os.cpu_count()} CPUs)")
