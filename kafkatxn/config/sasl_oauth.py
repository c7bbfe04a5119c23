"""The token provider kafka-python asks at each SASL/OAUTHBEARER login: OIDC client credentials (KIP-768).

A Java ``--command-config`` file says::

    sasl.mechanism=OAUTHBEARER
    sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
    sasl.oauthbearer.token.endpoint.url=https://idp.example/oauth2/token
    sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
        clientId="kafkatxn" clientSecret="..." scope="kafka";

(Kafka 4.x also takes ``sasl.oauthbearer.client.credentials.client.id`` / ``.client.secret`` and
``sasl.oauthbearer.scope`` as properties, which win over the JAAS options.) Here that becomes
librdkafka's ``sasl.oauthbearer.method=oidc`` keys (:mod:`kafkatxn.config.properties` maps them), which
confluent-kafka uses as they are, and :class:`ClientCredentials` for kafka-python: it fetches a token
from the endpoint with the client credentials and fetches a new one once 80% of its life has passed
(``sasl.login.refresh.window.factor``). The secret goes in the request's Authorization header only.

The request is the one Kafka's OAuthBearerLoginCallbackHandler sends (``grant_type=client_credentials``,
the scope, HTTP Basic client authentication), and the token is checked as its client-side validator does.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from kafkatxn.config.properties import (
    OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_EXTENSIONS, OAUTH_REFRESH_FACTOR, OAUTH_SCOPE, OAUTH_SCOPE_CLAIM, OAUTH_SUB_CLAIM, OAUTH_URL,
)
from kafkatxn.errors import AuthenticationError, UnreachableError

# -- the token provider kafka-python asks ------------------------------------------------------

Post = Callable[[str, bytes, dict, float], tuple[int, bytes]]  # (url, body, headers, timeout_s) -> (status, body)


def _post(url: str, body: bytes, headers: dict, timeout_s: float) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - the user's token endpoint
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UnreachableError(f"cannot reach the OAuth token endpoint {url}: {reason}") from None


@dataclass
class ClientCredentials:
    """Fetches OAUTHBEARER tokens with the OAuth client-credentials grant, as Kafka's
    OAuthBearerLoginCallbackHandler does, and keeps one until ``refresh_factor`` of its life has passed."""

    url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str | None = None
    sasl_extensions: dict[str, str] = field(default_factory=dict)
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    refresh_factor: float = 0.8
    timeout_s: float = 30.0
    post: Post = field(default=_post, repr=False)
    clock: Callable[[], float] = field(default=time.time, repr=False)
    fetched: int = 0  # tokens fetched so far
    _token: str | None = field(default=None, repr=False)
    _refresh_at: float = 0.0

    @classmethod
    def from_settings(cls, settings: Mapping[str, str], timeout_s: float) -> "ClientCredentials":
        extensions = dict(item.split("=", 1) for item in settings.get(OAUTH_EXTENSIONS, "").split(",") if "=" in item)
        return cls(
            settings[OAUTH_URL], settings[OAUTH_CLIENT_ID], settings[OAUTH_CLIENT_SECRET], settings.get(OAUTH_SCOPE) or None,
            extensions, settings.get(OAUTH_SUB_CLAIM) or "sub", settings.get(OAUTH_SCOPE_CLAIM) or "scope",
            float(settings.get(OAUTH_REFRESH_FACTOR, 0.8)), timeout_s,
        )

    def token(self) -> str:
        now = self.clock()
        if self._token is None or now >= self._refresh_at:
            self._token, expires = self._fetch()
            self._refresh_at = now + max(expires - now, 0) * self.refresh_factor
        return self._token

    def extensions(self) -> dict[str, str]:
        return dict(self.sasl_extensions)

    def _fetch(self) -> tuple[str, float]:
        from urllib.parse import urlencode

        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        basic = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        headers = {
            "Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json", "Cache-Control": "no-cache",
        }
        status, body = self.post(self.url, urlencode(form).encode(), headers, self.timeout_s)
        self.fetched += 1
        answer = _json_object(body)
        if status != 200:
            error = answer.get("error") if isinstance(answer.get("error"), str) else None
            raise AuthenticationError(
                f"the OAuth token endpoint {self.url} refused client {self.client_id}: HTTP {status}"
                + (f" {error[:60]}" if error else "") + " (check clientId, clientSecret and scope)"
            )
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise AuthenticationError(f"the OAuth token endpoint {self.url} answered without an access_token")
        claims = _jwt_claims(token)
        if claims is None:
            raise AuthenticationError(f"the access token from {self.url} is not a JWT, which OAUTHBEARER logins send")
        if not isinstance(claims.get(self.sub_claim), str):
            raise AuthenticationError(f"the access token from {self.url} has no {self.sub_claim!r} claim ({OAUTH_SUB_CLAIM})")
        scope = claims.get(self.scope_claim)
        if scope is not None and not (isinstance(scope, str) or isinstance(scope, list) and all(isinstance(s, str) for s in scope)):
            raise AuthenticationError(f"the access token from {self.url} has a malformed {self.scope_claim!r} claim ({OAUTH_SCOPE_CLAIM})")
        expires = claims.get("exp")
        if not isinstance(expires, (int, float)):
            raise AuthenticationError(f"the access token from {self.url} has no 'exp' claim")
        return token, float(expires)


def _json_object(body: bytes) -> dict:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _jwt_claims(token: str) -> dict | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None
