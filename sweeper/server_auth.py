"""MLflow's basic authentication for the tracking servers this tool starts (issue #41, item 5).

``python -m sweeper.servers`` (``make tracking-server``, cluster.yaml, cluster-local.yaml)
runs ``mlflow server --app-name basic-auth``: a request without a user and password gets 401,
and a user sees and changes only what MLflow's permissions give them. Everything it needs is
made in the server's directory the first time and kept after (so the users a team adds stay):

- ``DIR/auth/`` (mode 0700): ``basic_auth.ini`` (MLflow's auth config: the admin user
  ``sweeper`` and its random password, ``default_permission = READ``, the users' database
  ``basic_auth.db`` beside it) and ``secret_key`` (the Flask key of MLflow's CSRF protection),
  each 0600. The server gets both through its environment (``MLFLOW_AUTH_CONFIG_PATH``,
  ``MLFLOW_FLASK_SERVER_SECRET_KEY``), never on its command line.
- ``DIR/credentials`` (0600): the admin's user and password in MLflow's own credentials
  format, for the driver. It is installed as ``~/.mlflow/credentials`` (where every MLflow
  client, the driver and ``sweeper-report`` included, reads them) when that file is absent;
  one holding other credentials is left alone and the server says how to use these instead.

MLflow 2.22 and 3.x read the same ini keys (``admin_username``, ``admin_password``,
``database_uri``, ``default_permission``, ``authorization_function``); 3.x also needs the
Flask secret key. docs/slurm.md says how a team adds users.
"""

from __future__ import annotations

import configparser
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

ADMIN = "sweeper"
AUTH_DIR = "auth"
CREDENTIALS_FILE = "credentials"
INI = """[mlflow]
default_permission = READ
database_uri = sqlite:///{database}
admin_username = {admin}
admin_password = {password}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
"""


@dataclass(frozen=True)
class ServerAuth:
    """The basic authentication of one tracking server (see the module docstring).

    Parameters
    ----------
    config : Path
        MLflow's auth config (``DIR/auth/basic_auth.ini``).
    secret_key : str
        The Flask secret key of MLflow's CSRF protection.
    credentials : Path
        The admin's credentials for the driver (``DIR/credentials``, MLflow's format).
    username, password : str
        The admin's user and password.
    """

    config: Path
    secret_key: str
    credentials: Path
    username: str
    password: str

    def server_env(self) -> dict[str, str]:
        """What ``mlflow server --app-name basic-auth`` reads from its environment."""
        return {
            "MLFLOW_AUTH_CONFIG_PATH": str(self.config),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": self.secret_key,
        }


def write_private(path: Path, text: str) -> None:
    """Write ``text`` into ``path``, readable and writable by its owner only (0600), whatever
    the umask and whatever mode a file already there had."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)


def server_auth(directory: Path) -> ServerAuth:
    """The basic authentication of the server in ``directory``: made the first time (a random
    admin password and secret key), read after."""
    directory = Path(directory).resolve()
    folder = directory / AUTH_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    config, key = folder / "basic_auth.ini", folder / "secret_key"
    credentials = directory / CREDENTIALS_FILE
    if not config.exists():  # written last: the others exist once it does
        password = secrets.token_urlsafe(24)
        write_private(key, secrets.token_hex(32))
        write_private(credentials, credentials_text(ADMIN, password))
        text = INI.format(database=folder / "basic_auth.db", admin=ADMIN, password=password)
        write_private(config, text)
    username, password = read_credentials(credentials)
    return ServerAuth(config, key.read_text().strip(), credentials, username, password)


def credentials_text(username: str, password: str) -> str:
    """MLflow's credentials file (``~/.mlflow/credentials``) for ``username``."""
    return (
        f"[mlflow]\nmlflow_tracking_username = {username}\nmlflow_tracking_password = {password}\n"
    )


def read_credentials(path: Path) -> tuple[str | None, str | None]:
    """The user and password of an MLflow credentials file (None where it has none)."""
    parsed = configparser.ConfigParser(interpolation=None)
    parsed.read(path)
    section = parsed["mlflow"] if parsed.has_section("mlflow") else {}
    return section.get("mlflow_tracking_username"), section.get("mlflow_tracking_password")


def install_credentials(auth: ServerAuth, home: Path | None = None) -> str:
    """Put the server's credentials where MLflow's clients read them (``~/.mlflow/credentials``,
    0600 in a 0700 directory) unless that file holds other ones; what to tell the user."""
    target = Path(home or Path.home()) / ".mlflow" / CREDENTIALS_FILE
    if not target.exists():
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(target, auth.credentials.read_text())
    if read_credentials(target) == (auth.username, auth.password):
        return (
            f"the server asks for a user and password (MLflow basic auth); this user's MLflow "
            f"clients read them from {target}"
        )
    return (
        f"the server asks for a user and password (MLflow basic auth); {target} holds other "
        f"credentials and was left as it is: before a sweep, export MLFLOW_TRACKING_USERNAME "
        f"and MLFLOW_TRACKING_PASSWORD from {auth.credentials}"
    )
