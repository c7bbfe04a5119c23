"""``check`` begins its bootstrap on the IO thread (``Session.connect_ahead``) and imports what its pass
needs while it is in flight: its fact layer is not imported with the command's module (it was, before
the bootstrap began, on the code before), and what beginning the bootstrap meets is raised where the
wire is first used, as before. (``lso`` measured no faster so, on the held cluster: it does not; it
imports its library once its offsets are in flight, ``Session.send_now``.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkatxn.config import ConnectionConfig
from kafkatxn.errors import KafkatxnError
from kafkatxn.kafka.session import Session


def test_the_lso_defaults_the_cli_shows_are_the_librarys():
    from kafkatxn import defaults, facts_lso, lso, verdicts_groups

    assert (defaults.LSO_CRITICAL_AGE, defaults.PROBE_MAX_GAP, defaults.LAG_THRESHOLD) == (
        lso.DEFAULT_CRITICAL_AGE, facts_lso.DEFAULT_PROBE_MAX_GAP, verdicts_groups.DEFAULT_LAG_THRESHOLD)


@pytest.mark.parametrize("module, library", [("kafkatxn.cli.lso_cmd", "kafkatxn.facts_lso"),
                                             ("kafkatxn.cli.hanging_cmd", "kafkatxn.facts_scan"),
                                             ("kafkatxn.cli.check_cmd", "kafkatxn.facts_cluster")])
def test_a_command_module_leaves_its_library_to_import_once_the_bootstrap_has_begun(module, library):
    code = f"import sys, {module}; print({library!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_what_beginning_the_bootstrap_meets_is_raised_where_the_wire_is_first_used():
    session = Session(ConnectionConfig(bootstrap_servers="127.0.0.1:9", timeout_ms=0))  # no time left
    session.connect_ahead()  # raises nothing
    with pytest.raises(KafkatxnError):
        session.wire  # noqa: B018
    session.close()


def test_a_bootstrap_begun_and_never_used_is_closed_with_the_session():
    session = Session(ConnectionConfig(bootstrap_servers="127.0.0.1:9", timeout_ms=5_000))
    session.connect_ahead()
    pending = session._bootstrapping[0].wire  # the wire, as bootstrap_ahead hands it over (closing it resumes collection)
    session.close()
    assert session._bootstrapping is None and pending._manager.closed
