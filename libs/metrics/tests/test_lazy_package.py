"""`aiperf.metrics` imports its names on first use: the `aiperf` command (which needs only
`write_atomic` and `join_parts`) never loads numpy, and every public name is what the eager
package gave (`summary_csv` the function, not its submodule). A fresh interpreter each, since
this one has long imported numpy."""

from __future__ import annotations

import os
import subprocess
import sys

import aiperf.metrics


def _run(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip()


def test_the_commands_names_do_not_import_numpy() -> None:
    out = _run("import sys\nfrom aiperf.metrics import RAW_JSONL, RawPartMismatch, join_parts, write_atomic\n"
               "print('numpy' in sys.modules)\nfrom aiperf.metrics import Aggregator\nprint('numpy' in sys.modules)")
    assert out.split() == ["False", "True"]


def test_a_name_shared_with_its_submodule_is_the_function() -> None:
    out = _run("from aiperf.metrics import write_summary_csv\nfrom aiperf.metrics import summary_csv\n"
               "print(callable(summary_csv), type(summary_csv).__name__)")
    assert out == "True function"


def test_every_public_name_resolves() -> None:
    for name in aiperf.metrics.__all__:
        assert getattr(aiperf.metrics, name) is not None, name
