"""What the user named on a `kube` verb: a run, a sweep, or one child of a sweep (`--kind`,
`-v/--variation`, `-t/--trial`). Standard library only: `aiperf.cli.kube_app` imports it to
parse, `aiperf.cli.kube_runref` resolves it in the cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["job", "sweep"]


@dataclass(frozen=True)
class Selector:
    """What the user named: run `name` (`kind` job), or sweep `name`, or one child of it
    (`variation` from 0, `trial` from 1)."""

    name: str
    kind: Kind = "job"
    variation: int | None = None
    trial: int | None = None

    @property
    def child(self) -> bool:
        """A child of a sweep is named (-v or -t given)."""
        return self.variation is not None or self.trial is not None

    def problem(self) -> str | None:
        """What is wrong with `--kind`/`-v`/`-t` as given (None when fine)."""
        if self.kind == "job" and self.child:
            return "-v/--variation and -t/--trial name a child of a sweep: add --kind sweep"
        if self.variation is not None and self.variation < 0:
            return f"-v/--variation {self.variation}: variations count from 0"
        if self.trial is not None and self.trial < 1:
            return f"-t/--trial {self.trial}: trials count from 1"
        return None


__all__ = ["Kind", "Selector"]
