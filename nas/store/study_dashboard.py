"""The Optuna dashboard's server process on a search's study database: ``nas ui --optuna``
starts ``python -m nas.store.study_dashboard --host H --port P`` with the database's URL in its
environment (``STUDY_STORAGE_ENV``), never on its command line, as ``nas.store.server`` does for
MLflow's server. (``optuna-dashboard URL``, the package's own command, would put a
``postgresql://`` password in every user's process list.)"""

from __future__ import annotations

import argparse
import os
import sys

from record.uri import STUDY_STORAGE_ENV

# The dashboard's page for one study, below the server's root.
STUDY_PATH = "/dashboard/studies/{study_id}"


def study_command(host: str, port: int) -> list[str]:
    """This module as a server process on ``host:port``; the database is in ``study_env``."""
    return [sys.executable, "-m", __name__, "--host", host, "--port", str(port)]


def study_env(url: str) -> dict[str, str]:
    """This process's environment with the study database's URL where ``main`` reads it."""
    return {**os.environ, STUDY_STORAGE_ENV: url}


def study_urls(url: str, base: str) -> list[tuple[str, str]]:
    """Each study in the database at ``url``, by name, with its dashboard page below ``base``;
    a database that holds no Optuna schema has none (and is left unwritten)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            if not sqlalchemy.inspect(conn).has_table("studies"):
                return []
            rows = conn.execute(
                sqlalchemy.text("SELECT study_id, study_name FROM studies ORDER BY study_id")
            ).all()
    finally:
        engine.dispose()
    return [(name, base + STUDY_PATH.format(study_id=sid)) for sid, name in rows]


def main(argv: list[str] | None = None) -> int:
    import optuna_dashboard

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    optuna_dashboard.run_server(os.environ[STUDY_STORAGE_ENV], host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
