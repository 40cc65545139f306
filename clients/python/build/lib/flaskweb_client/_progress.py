"""Progress while a job runs: a tqdm bar when tqdm is installed (the notebook widget in
Jupyter), else one plain line rewritten in place on stderr."""

from __future__ import annotations

import sys
from typing import Any, TextIO


class Progress:
    """`update(done, total, status)` as often as the job is polled; `close()` at the end."""

    def __init__(self, label: str, *, enabled: bool = True, stream: TextIO | None = None):
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._bar: Any = None
        self._line = ""
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                self._bar = None
            else:
                self._bar = tqdm(desc=label, total=None, unit="", file=self.stream)

    def update(self, done: int | float | None, total: int | float | None, status: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            if total:
                self._bar.total = total
            if done is not None:
                self._bar.n = done
            self._bar.set_postfix_str(status, refresh=False)
            self._bar.refresh()
            return
        if total:
            figure = f"{done or 0}/{total} ({100 * (done or 0) / total:.0f}%)"
        else:
            figure = "" if done is None else str(done)
        line = f"{self.label}: {figure} {status}".replace("  ", " ")
        if line != self._line:
            self.stream.write("\r" + line.ljust(len(self._line)))
            self.stream.flush()
            self._line = line

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        elif self._line:
            self.stream.write("\n")
            self.stream.flush()
