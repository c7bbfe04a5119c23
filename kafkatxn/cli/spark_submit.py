"""The spark-submit entry of ``kafkatxn audit``: the same command and options, on the session
spark-submit made (``spark-submit --py-files kafkatxn.zip kafkatxn/cli/spark_submit.py -b B …``).

It lives with the CLI because it is the CLI; the auditor (:mod:`kafkatxn.audit.job`) does not
import the CLI. The stage functions are pickled by reference to :mod:`kafkatxn.audit`, never to
this ``__main__``.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from kafkatxn.cli.app import main as cli_main

    cli_main(["audit", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
