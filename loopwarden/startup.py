"""Startup and configuration errors as one clear line with the fix, never a traceback.

`manage.py` runs every command inside `explained_errors()`; `./dev run` checks its port with
`python -m loopwarden port HOST PORT` before it starts anything or prints a banner, and reads
the few variables it uses itself from the `.env` file with `python -m loopwarden env NAME...`.
This module imports no Django settings at import time: it must work when they are broken.
"""

from __future__ import annotations

import shlex
import socket
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from loopwarden.env import ConfigError, read_env_file

PREFIX = "loopwarden: "


def fail(message: str, status: int = 2) -> None:
    """Print one line to stderr and exit."""
    print(PREFIX + " ".join(message.split()), file=sys.stderr)
    raise SystemExit(status)


@contextmanager
def one_line_on_config_error(status: int = 2) -> Iterator[None]:
    """Inside it, a bad setting stops the program with one line (`fail`), not a traceback:
    for what reads settings outside `manage.py` (gunicorn's config, Celery's worker and beat).
    Status 3 is gunicorn's "failed to boot": it stops the server instead of respawning."""
    try:
        yield
    except ConfigError as exc:
        fail(str(exc), status)


def database_label(settings_dict: Mapping[str, Any]) -> str:
    """The database as a URL without its password, for messages."""
    engine = settings_dict.get("ENGINE", "")
    name = settings_dict.get("NAME") or ""
    if engine.endswith("sqlite3"):
        return f"sqlite:///{name}"
    user = settings_dict.get("USER") or ""
    host = settings_dict.get("HOST") or "localhost"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{user + '@' if user else ''}{host}:{port}/{name}"


def database_problem(settings_dict: Mapping[str, Any], error: BaseException) -> str:
    """One line: which database could not be reached, why, and what to do about it."""
    label = database_label(settings_dict)
    why = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    why = why.removeprefix("connection failed: ")
    if settings_dict.get("ENGINE", "").endswith("sqlite3"):
        return (
            f"cannot open the database {label} ({why}): make LOOPWARDEN_DATA_DIR a writable "
            "directory, or set DATABASE_URL"
        )
    name = settings_dict.get("NAME") or ""
    if "does not exist" in why and f'"{name}"' in why:
        host = settings_dict.get("HOST") or "localhost"
        port = settings_dict.get("PORT") or 5432
        user = settings_dict.get("USER") or "postgres"
        return (
            f"the database {label} does not exist: create it with "
            f"`createdb -h {host} -p {port} -U {user} {name}`, or fix DATABASE_URL"
        )
    if "password" in why or "authentication" in why:
        return (
            f"the database {label} refused the login ({why}): fix the user or password in "
            "DATABASE_URL"
        )
    return (
        f"cannot connect to the database {label} ({why}): start PostgreSQL there, or fix "
        "DATABASE_URL (unset it to use the embedded SQLite file)"
    )


def _database_unreachable() -> str | None:
    """A one-line problem if the default database cannot be connected to now, else None."""
    from django.db import connections

    connection = connections["default"]
    try:
        connection.close()
        connection.ensure_connection()
    except Exception as exc:  # each driver raises its own kinds; any failure to connect counts
        return database_problem(connection.settings_dict, exc)
    return None


def _database_unmigrated() -> str | None:
    """A one-line problem if the default database has migrations not applied, else None."""
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    connection = connections["default"]
    try:
        executor = MigrationExecutor(connection)
        if not executor.migration_plan(executor.loader.graph.leaf_nodes()):
            return None
    except Exception:  # a database that cannot say: keep the command's own error
        return None
    return (
        f"the database {database_label(connection.settings_dict)} is not migrated: run "
        "`.venv/bin/python manage.py migrate` (./dev run does), with the same DATABASE_URL and "
        "LOOPWARDEN_DATA_DIR"
    )


@contextmanager
def explained_errors(*, migrating: bool = False) -> Iterator[None]:
    """Turn a configuration error, a database that cannot be reached, or one not migrated yet
    (outside `migrate` itself), into one line.

    A database error is explained only when a fresh connection fails too, or migrations are
    missing: an error raised by a command that did reach a migrated database (or a failing
    migration) keeps its traceback.
    """
    from django.core.exceptions import ImproperlyConfigured
    from django.db.utils import InterfaceError, OperationalError, ProgrammingError

    try:
        yield
    except (ConfigError, ImproperlyConfigured) as exc:
        fail(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    except (OperationalError, InterfaceError, ProgrammingError) as exc:
        problem = None if isinstance(exc, ProgrammingError) else _database_unreachable()
        if problem is None and not migrating:
            problem = _database_unmigrated()
        if problem is None:
            raise
        fail(problem, status=1)


def check_port(host: str, raw_port: str) -> None:
    """Exit with one line unless `raw_port` is a TCP port nothing listens on at `host`."""
    if not raw_port.isdigit() or not 1 <= int(raw_port) <= 65535:
        fail(f"PORT={raw_port!r} is not a TCP port number (1-65535); e.g. PORT=8001 ./dev run")
    port = int(raw_port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the web server will: TIME_WAIT leftovers do not count as busy, a listener does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            fail(
                f"port {port} on {host} is already in use ({exc.strerror}): stop what listens "
                f"there (another ./dev run?) or choose another port, e.g. "
                f"PORT={port + 1} ./dev run",
                status=1,
            )


def env_file_exports(names: list[str]) -> str:
    """`export NAME=value` lines, for `eval` in bash, for each of `names` the `.env` file sets
    and the environment does not: `./dev run` reads its own few variables the way the settings
    read all of them."""
    added = read_env_file()
    return "".join(f"export {name}={shlex.quote(added[name])}\n" for name in names if name in added)


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "port":
        check_port(argv[1], argv[2])
        return
    if argv and argv[0] == "env" and all(name.isidentifier() for name in argv[1:]):
        with one_line_on_config_error():
            print(env_file_exports(argv[1:]), end="")
        return
    fail("usage: python -m loopwarden port HOST PORT | python -m loopwarden env NAME...")
