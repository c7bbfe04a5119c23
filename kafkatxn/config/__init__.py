"""Connection settings for both Kafka clients: flags > environment > profile.

The modules, from the bottom up (none imports one above it; tests/unit/test_layering.py checks
that they form no cycle):

* :mod:`~kafkatxn.config.properties` — ``java.util.Properties`` lines, JAAS, librdkafka keys;
* :mod:`~kafkatxn.config.providers` — Kafka's config providers (``${file:...}``, ``${env:...}``);
* :mod:`~kafkatxn.config.files` — a properties file as Kafka's tools read it, file modes,
  client certificate dates;
* :mod:`~kafkatxn.config.profiles` — named profiles and kafkatxn's directories;
* :mod:`~kafkatxn.config.clients` — the settings each client gets (librdkafka, kafka-python);
* :mod:`~kafkatxn.config.resolution` — flags > environment > profile, into one ``ConnectionConfig``.

What callers used from the single module this package replaces is re-exported here.
"""

from __future__ import annotations

from kafkatxn.config.clients import (
    DEFAULT_TIMEOUT_MS,
    KAFKA_PYTHON_ARGUMENTS,
    ConnectionConfig,
    check_settings_as_librdkafka,
)
from kafkatxn.config.files import (
    client_certificate_problem,
    load_properties_file,
    private_file_warning,
    read_properties_file,
)
from kafkatxn.config.profiles import config_dir, load_profile, profiles_file, state_dir
from kafkatxn.config.properties import (
    JAVA_KEYS_IGNORED,
    LIBRDKAFKA_KEYS,
    SASL_MECHANISMS,
    SECRET_KEYS,
    SECURITY_PROTOCOLS,
    PropertyLine,
    is_secret,
    mask,
    normalize_properties,
    parse_properties,
)
from kafkatxn.config.resolution import (
    ASKED_PASSWORDS,
    SECRET_ENVIRONMENT,
    Prompt,
    SecretNeeded,
    refuse_secret_argument,
    resolve,
)

__all__ = [
    "ASKED_PASSWORDS", "DEFAULT_TIMEOUT_MS", "JAVA_KEYS_IGNORED", "KAFKA_PYTHON_ARGUMENTS", "LIBRDKAFKA_KEYS",
    "SASL_MECHANISMS", "SECRET_ENVIRONMENT", "SECRET_KEYS", "SECURITY_PROTOCOLS", "ConnectionConfig", "Prompt",
    "PropertyLine", "SecretNeeded", "check_settings_as_librdkafka", "client_certificate_problem", "config_dir",
    "is_secret", "load_profile", "load_properties_file", "mask", "normalize_properties", "parse_properties",
    "private_file_warning", "profiles_file", "read_properties_file", "refuse_secret_argument", "resolve", "state_dir",
]
