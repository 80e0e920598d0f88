"""`aiperf dev-fakes --for TYPE`: run one aiperf service alone, against fakes of its peers
(`aiperf.testing.devfakes.cli` has the whole story; `aiperf dev-fakes --help` prints it)."""

from aiperf.testing.devfakes.cli import main, parse_args

__all__ = ["main", "parse_args"]
