"""Loaded by the Python of a kafkatxn run that tests/integration/test_audit_durability.py starts with
this folder first on PYTHONPATH: after each audit intent is on disk, it says so on stderr and
sleeps, so the test can kill the run between intent and result. The product has no such hook."""

import sys
import time

from kafkatxn import auditlog

_intent = auditlog.AuditLog.intent


def _intent_then_pause(self, *args, **kwargs):
    action_id = _intent(self, *args, **kwargs)
    print(f"kafkatxn: test hook: intent {action_id} is on disk; pausing", file=sys.stderr, flush=True)
    time.sleep(120)
    return action_id


auditlog.AuditLog.intent = _intent_then_pause
