"""Which failures of the store a restart explains (waited for) and which it does not.

A failure is judged by what the libraries state in structured form, never by the words of its
message (PostgreSQL translates its messages into the server's language): the exception's
class, PostgreSQL's SQLSTATE, SQLite's result code, the HTTP status of a tracking server's
answer. The chain of exceptions is read from the outside in (MLflow wraps SQLAlchemy, which
wraps the database driver; MLflow's REST client wraps requests, which wraps urllib3), and the
first link that says something decides. Waited for:

- a connection refused, reset, lost or timed out (Python's, requests' or the driver's);
- PostgreSQL's SQLSTATE classes 08 (connection exception) and 53 (insufficient resources,
  but 53100, a full disk), 57P01-57P03 (shut down by the administrator or a crash, cannot
  connect now: starting, stopping, recovering), 40001 and 40P01 (serialization failure,
  deadlock: the transaction is to be run again);
- a psycopg ``OperationalError`` without a SQLSTATE (libpq could not connect or lost the
  connection, and gives only text), unless the server asked for a password: then it is up
  and refused the connection;
- SQLite's SQLITE_BUSY and SQLITE_LOCKED (``database is locked``);
- HTTP 408, 429, 502, 503 and 504 (a server or the proxy before it restarting or overloaded).

Anything else (a full disk, a bad schema, a refused password, a certificate) stops the sweep
at once.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Iterator
from types import ModuleType

import requests
from mlflow.exceptions import MlflowException
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from urllib3.exceptions import ResponseError

STORE_ERRORS: tuple[type[BaseException], ...] = (
    MlflowException,
    SQLAlchemyError,
    sqlite3.Error,
    OSError,
)
"""What a failing store raises through MLflow (an HTTP error is an ``OSError`` too)."""
HTTP_STATUSES = frozenset({408, 429, 502, 503, 504})
"""Statuses of a server (or the proxy before it) that is restarting or overloaded."""
SQLSTATE_CLASSES = frozenset({"08", "53"})
SQLSTATES = frozenset({"57P01", "57P02", "57P03", "40001", "40P01"})
SQLSTATES_NOT = frozenset({"53100"})
"""``disk_full``: in an insufficient-resources class, but no restart frees the disk."""
SQLITE_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
POSTGRES_DRIVERS = ("psycopg", "psycopg2")
DISCONNECTED = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
    ConnectionError,
    TimeoutError,
)
"""A connection refused, reset, cut mid-answer or timed out (requests', Python's)."""
# urllib3 keeps the status of a response it gave up on only in this message of its own
# (fixed, never translated): the one place where words are read.
_TOO_MANY = re.compile(
    re.escape(ResponseError.SPECIFIC_ERROR).replace(re.escape("{status_code}"), r"(\d{3})")
)


def transient(err: BaseException) -> bool:
    """Whether a store restart explains ``err`` (see the module docstring)."""
    for link in _chain(err):
        verdict = _verdict(link)
        if verdict is not None:
            return verdict
    return False


SQLITE_DAMAGED = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
"""SQLite's codes for a damaged file: what the store held may be lost."""


def damaged(err: BaseException) -> bool:
    """Whether ``err`` says the store's file is damaged (SQLite's SQLITE_CORRUPT or
    SQLITE_NOTADB), so that what it held may be lost."""
    return any(
        isinstance(link, sqlite3.Error)
        and ((getattr(link, "sqlite_errorcode", None) or 0) & 0xFF) in SQLITE_DAMAGED
        for link in _chain(err)
    )


def _chain(err: BaseException) -> Iterator[BaseException]:
    """``err``, then what it wraps, outermost first: SQLAlchemy's ``orig``, urllib3's
    ``reason``, exceptions among the arguments (requests'), the cause and the context."""
    seen: set[int] = set()
    todo: list[object] = [err]
    while todo:
        link = todo.pop(0)
        if not isinstance(link, BaseException) or id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        todo += [getattr(link, "orig", None), getattr(link, "reason", None), *link.args]
        todo += [link.__cause__, link.__context__]


def _verdict(err: BaseException) -> bool | None:
    """What ``err`` itself says: transient, not, or nothing (None: ask what it wraps)."""
    if isinstance(err, DBAPIError) and err.connection_invalidated:
        return True  # SQLAlchemy's dialect saw the connection drop
    if isinstance(err, sqlite3.Error):
        code = getattr(err, "sqlite_errorcode", None)
        return None if code is None else (code & 0xFF) in SQLITE_CODES
    driver = _postgres_driver(err)
    if driver is not None:
        return _postgres(err, driver)
    return _http(err)


def _http(err: BaseException) -> bool | None:
    """The verdict on an error of a tracking server's API (or of Python's sockets)."""
    if isinstance(err, requests.HTTPError) and err.response is not None:
        return err.response.status_code in HTTP_STATUSES
    if isinstance(err, ResponseError):  # too many error responses, each one's status
        found = _TOO_MANY.search(str(err))
        return found is not None and int(found.group(1)) in HTTP_STATUSES
    if isinstance(err, requests.exceptions.SSLError):
        return False  # a certificate: no restart changes it
    if isinstance(err, DISCONNECTED):
        return True
    if isinstance(err, MlflowException) and err.__cause__ is None and err.__context__ is None:
        return err.get_http_status_code() in HTTP_STATUSES  # a server's answer, as MLflow has it
    return None


def _postgres_driver(err: BaseException) -> ModuleType | None:
    """The PostgreSQL driver ``err`` comes from (only a driver already imported can have
    raised it: none is imported for this)."""
    for name in POSTGRES_DRIVERS:
        module = sys.modules.get(name)
        if module is not None and isinstance(err, module.Error):
            return module
    return None


def _postgres(err: BaseException, driver: ModuleType) -> bool:
    code = getattr(err, "sqlstate", None) or getattr(err, "pgcode", None)  # psycopg 3; 2
    if code:
        return code in SQLSTATES or (code[:2] in SQLSTATE_CLASSES and code not in SQLSTATES_NOT)
    if not isinstance(err, driver.OperationalError):
        return False  # the client's own mistake (a closed cursor, a bad query)
    # libpq gives no code when it cannot connect or loses the connection; a connection
    # attempt's error carries the connection, which says whether the server asked for a
    # password: then the server is up and refuses (a wrong or missing password).
    attempt = getattr(err, "pgconn", None)
    return not (attempt is not None and (attempt.needs_password or attempt.used_password))
