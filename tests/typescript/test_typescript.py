"""The TypeScript client `@loopwarden/client` (clients/typescript) against a live server.

A gunicorn server on this run's test database, an agent under the `novelty` profile, one under
`default` (evidence mode) and an operator; then `npm test` in clients/typescript with their
tokens in the environment (LOOPWARDEN_URL, LOOPWARDEN_TOKEN, LOOPWARDEN_STRICT_TOKEN,
LOOPWARDEN_OPERATOR_TOKEN). It fails on any failing test and on none run. Needs Node 20+ and
`npm ci` done in clients/typescript (.ci/run does both). Run with `-m typescript`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from tests.live import ROOT, database_url, gunicorn_server

pytestmark = pytest.mark.typescript
# A live server reads the test database: committed rows, and the data migrations' (the `novelty`
# profile) put back for each test that flushed them.
live_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)

PACKAGE = ROOT / "clients" / "typescript"
README = ROOT / "README.md"
NPM = shutil.which("npm")


def _last_line(command: str, *args, **options) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, **options)
    return out.getvalue().strip().splitlines()[-1]


@pytest.fixture(scope="module")
def node_ready():
    if NPM is None:
        pytest.fail("npm is not installed: the TypeScript tests need Node 20+")
    if not (PACKAGE / "node_modules").is_dir():
        pytest.fail("run `npm ci` in clients/typescript first (.ci/run does)")


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, node_ready):
    """A gunicorn server on this run's test database (its rows are each test's own)."""
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    env = {"API_THROTTLE_RATE": "off", "DB_CONN_MAX_AGE": "60"}
    with gunicorn_server(database_url=url, workers=2, threads=4, env=env) as server:
        yield server


def _tokens() -> dict[str, str]:
    """The suite's agents and operator, made in the test (a transactional test flushes them)."""
    return {
        "LOOPWARDEN_TOKEN": _last_line("create_agent", "ts-bot", profile="novelty"),
        "LOOPWARDEN_STRICT_TOKEN": _last_line("create_agent", "ts-strict", profile="default"),
        "LOOPWARDEN_OPERATOR_TOKEN": _last_line("create_operator", "tessa", password="pw"),
    }


def _npm(*args: str, env: dict[str, str] | None = None, cwd: Path = PACKAGE, timeout: int = 900):
    return subprocess.run(
        [NPM or "npm", *args], cwd=cwd, env={**os.environ, **(env or {})},
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@live_db
def test_the_typescript_suite_passes_against_the_live_server(live):
    server = live
    done = _npm("test", env={"LOOPWARDEN_URL": server.api, **_tokens()})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:] + "\n--- server log ---\n" + server.log_tail()
    counts = dict(
        re.findall(r"^[#ℹ] (tests|pass|fail|cancelled|skipped|todo) (\d+)$", output, re.M)
    )
    assert counts.get("fail") == "0" and counts.get("cancelled") == "0", output[-4000:]
    assert counts.get("skipped") == "0" and counts.get("todo") == "0", output[-4000:]
    assert int(counts.get("pass", "0")) >= 20, output[-4000:]


def test_the_committed_schema_is_the_servers(tmp_path):
    """The types are generated from clients/typescript/openapi.yaml (`npm run schema`): it must
    be the server's schema as it is now, or the client is typed against an older API."""
    fresh = tmp_path / "openapi.yaml"
    # Made as the README says, on the default (embedded SQLite) settings: a model's integer
    # bounds follow the database backend, and the committed schema is the default one.
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env["LOOPWARDEN_DATA_DIR"] = str(tmp_path / "data")
    made = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "manage.py", "spectacular", "--file", str(fresh)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]
    committed = (PACKAGE / "openapi.yaml").read_text()
    assert fresh.read_text() == committed, (
        "the API changed: regenerate with `.venv/bin/python manage.py spectacular --file "
        "clients/typescript/openapi.yaml && (cd clients/typescript && npm run schema)` "
        "(without DATABASE_URL: the default settings' schema)"
    )


def code_block(language: str, containing: str) -> str:
    blocks = re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), re.S | re.M)
    matching = [block for block in blocks if containing in block]
    assert matching, f"README.md has no {language} block with {containing!r}"
    return matching[0]


def test_the_packed_package_installs_into_an_empty_project_and_type_checks(tmp_path, node_ready):
    """`npm pack`, installed into an empty project beside the AI SDK: the README's TypeScript
    block, as a user's file, type-checks against the shipped declarations and imports."""
    built = _npm("run", "build")
    assert built.returncode == 0, built.stdout + built.stderr
    packed = _npm("pack", "--json", "--pack-destination", str(tmp_path))
    assert packed.returncode == 0, packed.stderr
    tarball = tmp_path / json.loads(packed.stdout)[0]["filename"]
    files = {f["path"] for f in json.loads(packed.stdout)[0]["files"]}
    assert {"dist/index.js", "dist/index.d.ts", "dist/ai-sdk.d.ts", "package.json"} <= files
    assert not any(p.startswith(("src/", "test/", "node_modules/")) for p in files), files
    project = tmp_path / "user"
    project.mkdir()
    (project / "package.json").write_text('{"name": "user", "private": true, "type": "module"}')
    # The AI SDK the user has already: this checkout's, linked (no registry needed).
    ai = PACKAGE / "node_modules" / "ai"
    installed = _npm(
        "install", "--no-audit", "--no-fund", "--offline", str(tarball), str(ai), cwd=project
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    manifest = json.loads((project / "node_modules/@loopwarden/client/package.json").read_text())
    assert not manifest.get("dependencies"), "no runtime dependency"
    user_file = code_block("ts", "@loopwarden/client")
    (project / "agent.ts").write_text(user_file)
    (project / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": True,
        "noEmit": True, "lib": ["ES2022", "DOM"], "types": [], "skipLibCheck": True,
        "typeRoots": [str(PACKAGE / "node_modules" / "@types")], "noImplicitAny": True,
    }, "files": ["agent.ts"]}))  # fmt: skip
    tsc = PACKAGE / "node_modules" / ".bin" / "tsc"
    checked = subprocess.run(
        [str(tsc), "-p", ".", "--types", "node"], cwd=project, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A user's mistake is caught by the shipped declarations: a wrong option type fails.
    wrong = user_file + "\nnew Client('u', 't', { timeout: 'soon' });\n"
    (project / "agent.ts").write_text(wrong)
    failed = subprocess.run(
        [str(tsc), "-p", ".", "--types", "node"], cwd=project, capture_output=True, text=True
    )
    wrong_line = wrong.count("\n")  # the added line, as tsc numbers it
    assert failed.returncode != 0 and f"agent.ts({wrong_line}," in failed.stdout, failed.stdout
    assert "TS2322" in failed.stdout, failed.stdout
    imported = subprocess.run(
        ["node", "--input-type=module", "-e",
         "const m = await import('@loopwarden/client');"
         " const a = await import('@loopwarden/client/ai-sdk');"
         " console.log(typeof m.Client, typeof a.guardAiSdk)"],
        cwd=project, capture_output=True, text=True,
    )  # fmt: skip
    assert imported.stdout.strip() == "function function", imported.stderr


@live_db
def test_the_readme_typescript_examples_run_as_written(live, tmp_path):
    """The README's block, in bash at the repository root beside the server: a new agent's
    token, `npm ci`, the build and both examples, which tell the README's story."""
    server = live
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
    env.update(
        DATABASE_URL=database_url(connection.settings_dict),
        LOOPWARDEN_DATA_DIR=str(tmp_path / "data"),
        LOOPWARDEN_URL=server.api,
        PYTHONWARNINGS="ignore",
    )
    done = subprocess.run(
        ["bash", "-ec", code_block("sh", "npm run examples")], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    out = done.stdout
    # Each story told twice: by the AI SDK's agent, then by the OpenAI Agents SDK's.
    assert out.count("stopped: PARTIAL/repeated_output (GUARD_LOOP_DETECTED)") == 2, out
    assert out.count("stopped: NEEDS_HUMAN/unknown_commit (GUARD_LEDGER)") == 2, out
    assert out.count("answered, and finished: PARTIAL/goal_unverified") == 2, out
    assert out.count("search('refund policy') ran") == 2 * (2 + 1), out
    assert out.count("ran, and its response was lost") == 2, out  # each payment ran once
