from __future__ import annotations

import logging

from kafkatxn.redact import redact, redacting_formatter, register_secret


def test_registered_secret_never_survives():
    register_secret("Pa55-w0rd!")
    assert "Pa55-w0rd!" not in redact("auth with Pa55-w0rd! failed; again Pa55-w0rd!")


def test_password_assignments_are_masked_even_unregistered():
    text = redact('sasl.password=abc ssl.key.password: "x y" password="q"')
    assert "abc" not in text and "x y" not in text and '"q"' not in text


def test_formatter_redacts_log_lines():
    register_secret("topsecret-42")
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "connecting with %s", ("topsecret-42",), None)
    assert "topsecret-42" not in redacting_formatter("%(message)s").format(record)
