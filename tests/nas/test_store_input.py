"""A tracking store that cannot be opened, given to ``nas sweep``, ``nas report`` and ``nas ui``:
one line naming the store (its password as ***) and what failed, exit status 2, before any trial
starts or any server is launched, and nothing written.

The stores: PostgreSQL on a closed port; a database that does not exist on the real server; a
scheme MLflow has no store for; a wrong password. The PostgreSQL these tests run against uses
trust authentication, so it accepts any password and a wrong one cannot be provoked there: the
wrong-password case talks to a stand-in server on 127.0.0.1 that speaks just enough of the
PostgreSQL protocol to ask for the password and refuse it as PostgreSQL does (SQLSTATE 28P01),
so the real client library reports a real authentication failure.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from record.stores import DATABASE_SCHEMES, OTHER_SCHEMES, check_store
from tests.cli import run_nas
from tests.postgres import Database

SECRET = "hunter2-secret"
COMMANDS = {"sweep": ["sweep", "smoke"], "report": ["report", "smoke"], "ui": ["ui"]}


def _send_error(conn: socket.socket, user: str) -> None:
    """An ErrorResponse as PostgreSQL sends it for a wrong password."""
    fields = [b"SFATAL", b"VFATAL", b"C28P01"]
    fields.append(f'Mpassword authentication failed for user "{user}"'.encode())
    body = b"".join(f + b"\0" for f in fields) + b"\0"
    conn.sendall(b"E" + struct.pack("!i", len(body) + 4) + body)


def _refuse_login(conn: socket.socket) -> None:
    """One client: decline SSL and GSS encryption, ask for a cleartext password, refuse it."""
    stream = conn.makefile("rb")
    while True:
        (length,) = struct.unpack("!i", stream.read(4))
        body = stream.read(length - 4)
        if struct.unpack("!i", body[:4])[0] in (80877103, 80877104):  # SSLRequest, GSSENCRequest
            conn.sendall(b"N")
            continue
        params = body[4:].split(b"\0")
        user = params[params.index(b"user") + 1].decode()
        conn.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
        stream.read(1)  # 'p', the PasswordMessage
        (length,) = struct.unpack("!i", stream.read(4))
        stream.read(length - 4)
        _send_error(conn, user)
        return


@pytest.fixture
def refusing_server() -> Iterator[str]:
    """A PostgreSQL URI, with a password, whose server refuses that password."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                _refuse_login(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"postgresql://someone:{SECRET}@127.0.0.1:{server.getsockname()[1]}/db"
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def _missing_database(db: Database) -> str:
    """The test database's URI, naming a database that does not exist on the same server."""
    return db.url.replace(db.password, SECRET) + "_missing"


STORES = {
    "unreachable": (lambda r: f"postgresql://someone:{SECRET}@127.0.0.1:1/nowhere", "refused"),
    "no database": (lambda r: _missing_database(r.getfixturevalue("postgres_db")), "not exist"),
    "unknown scheme": (lambda r: f"foo://someone:{SECRET}@x/y", "unknown scheme 'foo'"),
    "wrong password": (lambda r: r.getfixturevalue("refusing_server"), "authentication failed"),
}


@pytest.mark.parametrize("store", list(STORES))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_store_that_cannot_be_opened_is_one_line_exit_2(
    command: str, store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Exit status 2; one stderr line naming the store with its password as *** and what
    failed; the password nowhere in the output; nothing written in the working folder."""
    make_uri, what = STORES[store]
    uri = make_uri(request)
    proc = run_nas(tmp_path, *COMMANDS[command], "--tracking-uri", uri, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"nas: error: --tracking-uri {uri.replace(SECRET, '***')}: ")
    assert what in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert not list(tmp_path.iterdir())


def test_the_schemes_allowed_are_mlflows() -> None:
    """The schemes ``check_store`` lets through are those MLflow has a tracking store for
    (less Unity Catalog's, which MLflow refuses for tracking)."""
    from mlflow.tracking._tracking_service.utils import _tracking_store_registry

    mlflow_schemes = set(_tracking_store_registry._registry) - {"databricks-uc", "uc"}
    assert set(DATABASE_SCHEMES) | set(OTHER_SCHEMES) == mlflow_schemes


@pytest.mark.parametrize(
    "uri",
    ["sqlite:///mlflow.db", "sqlite:////abs/mlflow.db", "mysql+pymysql://u@h/db", "http://h:5000",
     "https://h", "file:///tmp/mlruns", "mlruns", "/tmp/mlruns", "databricks"],
)  # fmt: skip
def test_every_store_form_mlflow_opens_passes_the_scheme_check(uri: str) -> None:
    """A URI of every form MLflow opens (other than PostgreSQL, which is tried) passes."""
    check_store(uri)


def test_postgres_scheme_is_refused_with_the_spelling_to_use() -> None:
    """``postgres://`` (libpq's alias, which MLflow and SQLAlchemy refuse) names the fix."""
    with pytest.raises(ValueError, match="unknown scheme 'postgres'; write postgresql://"):
        check_store("postgres://u:pw@127.0.0.1/db")


def test_the_study_storage_can_come_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """NAS_STUDY_STORAGE stands for --study-storage, so its URL need not be on a command line:
    a grid given one is refused as it would be with the flag, in one line, nothing written."""
    monkeypatch.setenv("NAS_STUDY_STORAGE", f"sqlite:///{tmp_path / 'study.db'}")
    from nas.cli import main

    assert main(["sweep", "smoke", "--storage-path", str(tmp_path / "ray")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--study-storage: only a search has an Optuna study" in err
    assert list(tmp_path.iterdir()) == []
