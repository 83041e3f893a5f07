"""compose.yaml and deploy/nginx/loopwarden.conf, checked without a container runtime: the
services the README describes, run with the commands it gives, on variables `.env.example`
documents, started in an order their health checks can satisfy, and nginx proxying to the web
service and serving the static files where the settings collect them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
APP = ("web", "worker", "beat")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def nginx() -> str:
    return (ROOT / "deploy" / "nginx" / "loopwarden.conf").read_text()


def command(service: dict[str, Any]) -> list[str]:
    value = service["command"]
    return shlex.split(value) if isinstance(value, str) else list(value)


def documented() -> set[str]:
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))


def test_the_services_of_a_deployment_exist(compose):
    assert {"web", "worker", "beat", "db", "redis", "nginx"} <= set(compose["services"])


def test_web_runs_gunicorn_with_the_repositorys_config(compose):
    web = command(compose["services"]["web"])

    assert web[:2] == ["gunicorn", "loopwarden.wsgi"]
    assert web[web.index("-c") + 1] == "gunicorn.conf.py"
    # Run from the repository root (where the image copies it), as the README says.
    assert "WORKDIR /app" in (ROOT / "Dockerfile").read_text()
    assert (ROOT / "gunicorn.conf.py").is_file()


def test_worker_and_beat_run_the_readmes_celery_commands(compose):
    readme = (ROOT / "README.md").read_text()
    for name in ("worker", "beat"):
        argv = command(compose["services"][name])
        assert argv[:4] == ["celery", "-A", "loopwarden", name]
        assert f"`celery -A loopwarden {name}`" in readme
    assert compose["services"]["beat"].get("deploy", {}).get("replicas", 1) == 1


def test_every_variable_set_is_documented_in_env_example(compose):
    names = set()
    for service in compose["services"].values():
        if service.get("image", "").startswith(("postgres", "redis", "nginx")):
            continue  # the images' own variables
        environment = service.get("environment", {})
        names |= set(environment if isinstance(environment, dict) else
                     (item.split("=", 1)[0] for item in environment))  # fmt: skip
    text = (ROOT / "compose.yaml").read_text()
    names |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]+)", text))

    assert {"DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY"} <= names
    assert sorted(names - documented()) == []


def test_the_app_points_at_the_compose_database_and_broker(compose):
    services = compose["services"]
    env = services["web"]["environment"]
    db = services["db"]["environment"]

    assert env["DATABASE_URL"] == (
        f"postgres://{db['POSTGRES_USER']}:{db['POSTGRES_PASSWORD']}@db:5432/{db['POSTGRES_DB']}"
    )
    assert env["CELERY_BROKER_URL"].startswith("redis://redis:6379/")
    for name in APP:
        assert services[name]["environment"] == env  # one environment for all three


def test_depends_on_and_healthchecks_are_coherent(compose):
    services = compose["services"]
    for name, service in services.items():
        for other, condition in (service.get("depends_on") or {}).items():
            assert other in services, (name, other)
            wanted = condition["condition"]
            if wanted == "service_healthy":
                assert "healthcheck" in services[other], (name, other)
            elif wanted == "service_completed_successfully":
                assert services[other].get("restart") == "no", (name, other)
            else:
                assert wanted == "service_started", (name, other)
    for name in (*APP, "migrate"):
        depends = services[name]["depends_on"]
        assert depends["db"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"
    for name in APP:
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
    assert "migrate" in " ".join(command(services["migrate"]))
    assert services["nginx"]["depends_on"]["web"]["condition"] == "service_healthy"
    # The web health check asks the port gunicorn binds.
    bind = command(services["web"])[command(services["web"]).index("-b") + 1]
    assert f":{bind.rsplit(':', 1)[1]}/" in " ".join(services["web"]["healthcheck"]["test"])


def test_nginx_proxies_to_the_web_service(compose, nginx):
    web = command(compose["services"]["web"])
    port = web[web.index("-b") + 1].rsplit(":", 1)[1]
    upstream = re.search(r"upstream\s+(\w+)\s*\{([^}]*)\}", nginx)
    assert upstream is not None
    assert re.search(rf"\bserver\s+web:{port}\s*;", upstream.group(2))
    assert f"proxy_pass http://{upstream.group(1)};" in nginx
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in nginx
    assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in nginx
    mounts = compose["services"]["nginx"]["volumes"]
    assert "./deploy/nginx/loopwarden.conf:/etc/nginx/conf.d/default.conf:ro" in mounts


def test_nginx_serves_the_static_files_where_the_settings_collect_them(compose, nginx):
    from django.conf import settings

    location = re.search(r"location\s+(\S+)\s*\{\s*alias\s+(\S+);", nginx)
    assert location is not None
    url, alias = location.group(1), location.group(2)
    assert url == settings.STATIC_URL
    services = compose["services"]
    data_dir = services["web"]["environment"]["LOOPWARDEN_DATA_DIR"]
    # STATIC_ROOT is <data dir>/staticfiles; `collectstatic` (run by migrate) writes a volume
    # there that nginx mounts at the alias.
    assert settings.STATIC_ROOT == settings.DATA_DIR / "staticfiles"
    collected = f"static:{data_dir}/staticfiles"
    assert collected in services["migrate"]["volumes"]
    assert "collectstatic" in " ".join(command(services["migrate"]))
    assert f"static:{alias.rstrip('/')}:ro" in services["nginx"]["volumes"]


def test_the_image_makes_every_folder_a_volume_is_mounted_at_for_its_user(compose):
    """A named volume mounted where the image has no folder is created root-owned and empty:
    the app, which runs as a plain user, could not write to it (collectstatic failed, so the
    migrate service failed, so web never started). Mounted over a folder the image made, the
    volume takes that folder's owner."""
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    user = re.search(r"^USER\s+(\S+)", dockerfile, re.M).group(1)
    steps = [step.split() for step in re.split(r"&&|\n|;", dockerfile)]
    made = {path for words in steps if words[:2] == ["mkdir", "-p"] for path in words[2:]}
    owned = []  # (path, recursive)
    for words in steps:
        if words[:1] == ["chown"]:
            recursive = "-R" in words
            args = [w for w in words[1:] if not w.startswith("-")]
            assert args[0].split(":")[0] == user, words
            owned += [(path, recursive) for path in args[1:]]
    for name, service in compose["services"].items():
        if service.get("image") != "loopwarden:latest":
            continue
        for mount in service.get("volumes", []):
            source, target = mount.split(":")[:2]
            if source.startswith((".", "/")):
                continue  # a bind mount: the host's folder
            assert target in made, f"{name}: {target} is not made in the Dockerfile"
            assert any(
                target == path or (recursive and target.startswith(path.rstrip("/") + "/"))
                for path, recursive in owned
            ), f"{name}: {target} is not owned by {user}"


def _host_nginx_forwards(nginx: str, browser_host: str) -> str:
    """The Host header nginx sends upstream for a browser's `host:port`, by its config."""
    variable = re.search(r"proxy_set_header\s+Host\s+(\S+);", nginx).group(1)
    return {"$host": browser_host.split(":")[0], "$http_host": browser_host}[variable]


@pytest.mark.parametrize("browser_host", ["localhost:8080", "127.0.0.1:8080", "localhost:9090"])
def test_signing_in_through_nginx_passes_the_csrf_check(
    compose, nginx, browser_host, make_user, settings
):
    """README: http://localhost:8080/, LOOPWARDEN_HTTP_PORT for another port; the browser's
    Origin is the address it typed."""
    app_env = compose["services"]["web"]["environment"]
    settings.CSRF_TRUSTED_ORIGINS = re.sub(
        r"\$\{\w+:-(.*)\}", r"\1", app_env["CSRF_TRUSTED_ORIGINS"]
    ).split(",")
    make_user("olivia")
    browser = Client(enforce_csrf_checks=True)
    host = _host_nginx_forwards(nginx, browser_host)
    page = browser.get("/login/", HTTP_HOST=host)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)

    answer = browser.post(
        "/login/", {"username": "olivia", "password": "pw", "csrfmiddlewaretoken": token},
        HTTP_HOST=host, HTTP_ORIGIN=f"http://{browser_host}",
    )  # fmt: skip

    assert answer.status_code == 302, answer.content[:300]
