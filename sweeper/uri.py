"""A store's or server's URI as text: its scheme, and every credential in it (or in any text
that may hold one) redacted before it is recorded, printed or written (issue #41, item 5).

Imports nothing of sweeper: the store, the driver and the servers all use it.
"""

from __future__ import annotations

import re

CREDENTIALS = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^\s:/@'\"]*):(?P<secret>[^\s@'\"]+)@")
"""``scheme://user:password@`` in any text (a URI of a database or a server)."""
SECRET_WORDS = r"(?:password|passwd|pwd|secret|token|api_?key|access_?key|credentials?)"
SECRET_PARAMETER = re.compile(
    rf"(?P<head>[?&;]\w*{SECRET_WORDS}=)(?P<secret>[^&;#\s'\"]+)", re.IGNORECASE
)
"""A query parameter holding a secret: ``?password=``, ``&sslpassword=``, ``?token=``, ..."""
SECRET_VARIABLE = re.compile(
    r"(?P<head>\b[A-Z][A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY)"
    r"[A-Z0-9_]*=)(?P<secret>[^\s'\"]+)"
)
"""An environment variable given on a command line: ``PGPASSWORD=...``,
``MLFLOW_TRACKING_PASSWORD=...``, ``RAY_AUTH_TOKEN=...``."""
SECRET_KEY = re.compile(
    rf"(?P<head>^\s*[\"']?\w*{SECRET_WORDS}[\"']?\s*:\s+)(?P<secret>\S.*)$",
    re.IGNORECASE | re.MULTILINE,
)
"""A YAML key naming a secret (``password: ...``, ``auth_token: ...``), its whole value."""
REDACTED = "***"


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``***`` (what is recorded or printed: a
    parent run's config.yaml, the lease's and the sweep's command, the resume command, Hydra's
    files): a URI's password (``scheme://user:password@``), a secret query parameter
    (``?password=``, ``&sslpassword=``, ``?token=``), a secret variable on a command line
    (``PGPASSWORD=``, ``MLFLOW_TRACKING_PASSWORD=``, ``RAY_AUTH_TOKEN=``) and a YAML key
    naming one (``password: ...``)."""
    text = CREDENTIALS.sub(rf"\g<head>:{REDACTED}@", text)
    for pattern in (SECRET_PARAMETER, SECRET_VARIABLE, SECRET_KEY):
        text = pattern.sub(rf"\g<head>{REDACTED}", text)
    return text


def scheme(uri: str) -> str:
    """``postgresql`` of ``postgresql+psycopg://...``; ``""`` for a plain path."""
    head, sep, _ = uri.partition("://")
    if not sep:
        head, sep, _ = uri.partition(":")
        if not sep or "/" in head:
            return ""
    return head.split("+", 1)[0].lower()
