from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings, strategies as st

from kafkatxn import redact as redact_mod
from kafkatxn.redact import MASK, WHOLE_TOKEN_BELOW, redact, redacting_formatter, register_secret


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


# -- short secrets: masked as whole tokens only, never the text around them -------------------------

# Words made of what never separates tokens: a short secret inside one of them is not a token.
WORD = st.text(alphabet=st.characters(blacklist_characters='"\'=:,;(){}[]<>@/.', blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
               min_size=1, max_size=12).filter(lambda w: not any(c.isspace() for c in w))


@pytest.fixture(autouse=True)
def no_secrets_from_other_tests():
    saved = set(redact_mod._SECRETS)
    redact_mod._SECRETS.clear()
    yield
    redact_mod._SECRETS.clear()
    redact_mod._SECRETS.update(saved)


def only(secret: str) -> None:
    redact_mod._SECRETS.clear()
    register_secret(secret)


def test_a_one_letter_password_does_not_mangle_the_words_around_it():
    only("b")
    assert redact("the broker at b-1.example.com:9092 refused the login") == "the broker at b-1.example.com:9092 refused the login"
    assert redact("login with password b failed") == "login with password ****** failed"
    assert redact("sasl.password=b") == "sasl.password=******"
    assert redact("user:b@broker1:9092 and 'b' and \"b\".") == "user:******@broker1:9092 and '******' and \"******\"."
    assert redact("the password is b.") == "the password is ******."


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=WHOLE_TOKEN_BELOW, max_size=30).filter(str.strip), st.text(max_size=40), st.text(max_size=40))
def test_a_long_secret_never_survives_wherever_it_stands(secret, before, after):
    only(secret)
    assert secret not in redact(before + secret + after)


@settings(max_examples=200, deadline=None)
@given(WORD.filter(lambda w: len(w) < WHOLE_TOKEN_BELOW), st.lists(WORD, max_size=8), st.integers(0, 8),
       st.sampled_from([" ", "=", ": ", "\t", ", ", "'", "/"]))
def test_a_short_secret_is_masked_as_a_token_and_nothing_else_changes(secret, words, at, separator):
    only(secret)
    words = [w for w in words if w != secret and "password" not in w.lower() and "secret" not in w.lower()]
    plain = separator.join(words)
    assert redact(plain) == plain  # inside a longer word, or absent: not a token, nothing changes
    at = min(at, len(words))
    with_secret = separator.join(words[:at] + [secret] + words[at:])
    assert redact(with_secret) == separator.join(words[:at] + [MASK] + words[at:])
