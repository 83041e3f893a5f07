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

pytestmark = [pytest.mark.typescript, pytest.mark.django_db(transaction=True)]

PACKAGE = ROOT / "clients" / "typescript"
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
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
        tokens = {
            "LOOPWARDEN_TOKEN": _last_line("create_agent", "ts-bot", profile="novelty"),
            "LOOPWARDEN_STRICT_TOKEN": _last_line("create_agent", "ts-strict", profile="default"),
            "LOOPWARDEN_OPERATOR_TOKEN": _last_line("create_operator", "tessa", password="pw"),
        }
    env = {"API_THROTTLE_RATE": "off", "DB_CONN_MAX_AGE": "60"}
    with gunicorn_server(database_url=url, workers=2, threads=4, env=env) as server:
        yield server, tokens


def _npm(*args: str, env: dict[str, str] | None = None, cwd: Path = PACKAGE, timeout: int = 900):
    return subprocess.run(
        [NPM or "npm", *args], cwd=cwd, env={**os.environ, **(env or {})},
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_the_typescript_suite_passes_against_the_live_server(live):
    server, tokens = live
    done = _npm("test", env={"LOOPWARDEN_URL": server.api, **tokens})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:] + "\n--- server log ---\n" + server.log_tail()
    counts = dict(re.findall(r"^[#ℹ] (tests|pass|fail|cancelled|skipped|todo) (\d+)$", output, re.M))
    assert counts.get("fail") == "0" and counts.get("cancelled") == "0", output[-4000:]
    assert counts.get("skipped") == "0" and counts.get("todo") == "0", output[-4000:]
    assert int(counts.get("pass", "0")) >= 20, output[-4000:]


def test_the_committed_schema_is_the_servers(tmp_path):
    """The types are generated from clients/typescript/openapi.yaml (`npm run schema`): it must
    be the server's schema as it is now, or the client is typed against an older API."""
    fresh = tmp_path / "openapi.yaml"
    call_command("spectacular", "--file", str(fresh))
    committed = (PACKAGE / "openapi.yaml").read_text()
    assert fresh.read_text() == committed, (
        "the API changed: regenerate with `.venv/bin/python manage.py spectacular --file "
        "clients/typescript/openapi.yaml && (cd clients/typescript && npm run schema)`"
    )


def test_the_packed_package_installs_into_an_empty_project_and_type_checks(tmp_path, node_ready):
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
    installed = _npm("install", "--no-audit", "--no-fund", "--offline", str(tarball), cwd=project)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    manifest = json.loads((project / "node_modules/@loopwarden/client/package.json").read_text())
    assert not manifest.get("dependencies"), "no runtime dependency"
    (project / "agent.ts").write_text(USER_FILE)
    (project / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": True,
        "noEmit": True, "lib": ["ES2022", "DOM"], "types": [],
    }, "files": ["agent.ts"]}))  # fmt: skip
    tsc = PACKAGE / "node_modules" / ".bin" / "tsc"
    checked = subprocess.run([str(tsc), "-p", "."], cwd=project, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A user's mistake is caught by the shipped declarations: a wrong option type fails.
    (project / "agent.ts").write_text(USER_FILE + "\nnew Client('u', 't', { timeout: 'soon' });\n")
    wrong = subprocess.run([str(tsc), "-p", "."], cwd=project, capture_output=True, text=True)
    assert wrong.returncode != 0 and "timeout" in wrong.stdout, wrong.stdout
    ran = subprocess.run(["node", "-e", "import('@loopwarden/client').then(m => console.log(typeof m.Client))"],
                         cwd=project, capture_output=True, text=True)  # fmt: skip
    assert ran.stdout.strip() == "function", ran.stderr


USER_FILE = """\
import { Client, TaskStopped, write, type Task } from "@loopwarden/client";

const client = new Client("http://127.0.0.1:8000/api/v1/", "token", { timeout: 10 });

export async function main(): Promise<Task | string> {
  const task: Task = await client.createTask("Pay invoice 42");
  const session = client.session(task.id);
  const spec = write({ key: "pay-{invoice}" });
  try {
    await session.modelCall({ model: "gpt-4o" }, (call) => call.usage(100, 20));
    const message = await session.tool("pay", { invoice: "42" }, () => "paid", {
      effect: spec.effect,
      operationKey: spec.operationKey({ invoice: "42" }),
    });
    return JSON.stringify(message);
  } catch (error) {
    if (error instanceof TaskStopped) return `${error.state}/${error.reason}`;
    throw error;
  }
}
"""
