"""`aiperf.runtime.zygote.import_numpy_single_threaded`, in fresh interpreters (it acts on the
process's threads and environment)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy  # noqa: F401  (the interpreters below import it: here so that Pants infers it)

import aiperf.runtime.zygote  # noqa: F401

CODE = ("import os\n"
        "from aiperf.runtime.zygote import import_numpy_single_threaded\n"
        "import_numpy_single_threaded()\n"
        "import numpy\n"
        "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))\n")


def _run(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, check=True,
                          env=env).stdout.strip()


def test_numpy_starts_no_blas_threads_and_the_environment_is_given_back() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _run(env) == "1 None"


def test_the_users_setting_is_kept() -> None:
    assert _run({**os.environ, "OPENBLAS_NUM_THREADS": "2"}).split()[1] == "2"
