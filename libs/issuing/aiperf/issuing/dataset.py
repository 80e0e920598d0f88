"""`Conversations` over the memory-mapped dataset files (`DatasetReader`)."""

from __future__ import annotations

from collections.abc import Sequence

from aiperf.dataset.store import DatasetReader
from aiperf.issuing.ports import TurnTiming


class ReaderConversations:
    """The dataset in a directory, as the timing-manager needs it. Turn timings are decoded
    on first use per conversation and cached (a few floats per conversation)."""

    def __init__(self, reader: DatasetReader) -> None:
        self._reader = reader
        self._turns: dict[int, tuple[TurnTiming, ...]] = {}

    @classmethod
    def open(cls, directory: str) -> ReaderConversations:
        """Map the dataset in `directory`; raises `DatasetError` if missing or inconsistent."""
        return cls(DatasetReader(directory))

    def __len__(self) -> int:
        return len(self._reader)

    def ids(self) -> list[str]:
        """Conversation ids in storage order."""
        return self._reader.ids()

    def timestamps(self) -> list[float | None]:
        """First-turn timestamps (ms) in storage order."""
        return self._reader.timestamps()

    def turns(self, index: int) -> Sequence[TurnTiming]:
        """Timing of each turn of conversation `index` (an empty conversation counts as one turn)."""
        cached = self._turns.get(index)
        if cached is None:
            turns = self._reader.conversation(index).turns
            cached = tuple(TurnTiming(t.delay_ms, t.timestamp_ms) for t in turns) or (TurnTiming(None, None),)
            self._turns[index] = cached
        return cached

    def close(self) -> None:
        """Unmap the files."""
        self._reader.close()
