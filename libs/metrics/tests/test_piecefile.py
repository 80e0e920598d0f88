"""`PieceFile`: rows appended in order come back in order, in blocks, from files or memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from aiperf.metrics.piecefile import PieceFile


def _rows(store: PieceFile, size: int) -> list[np.ndarray]:
    blocks = list(store.blocks(size))
    assert all(len(b) == 3 and b[0].size <= size for b in blocks)
    return [np.concatenate([b[i] for b in blocks]) if blocks else np.zeros(0) for i in range(3)]


@pytest.mark.parametrize("where", ["files", "memory", "missing dir"])
def test_rows_come_back_in_order(tmp_path: Path, where: str) -> None:
    spill = {"files": tmp_path, "memory": None, "missing dir": tmp_path / "gone"}[where]
    store = PieceFile([np.float64, np.int64, np.uint32], spill)
    rng = np.random.default_rng(3)
    want: list[list[np.ndarray]] = [[], [], []]
    for n in (5, 0, 1, 17, 3):
        cols = [rng.normal(size=n), rng.integers(-9, 9, n), rng.integers(0, 9, n).astype(np.float64)]
        store.append(*cols)
        for i, c in enumerate(cols):
            want[i].append(c)
    assert store.size == 26
    for size in (1, 4, 100):
        got = _rows(store, size)
        assert got[0].tobytes() == np.concatenate(want[0]).tobytes()
        assert got[1].tolist() == np.concatenate(want[1]).tolist() and got[1].dtype == np.int64
        assert got[2].tolist() == np.concatenate(want[2]).tolist() and got[2].dtype == np.uint32
    assert not list(tmp_path.iterdir())  # unnamed files
    store.close()
    assert store.size == 0 and list(store.blocks()) == []
