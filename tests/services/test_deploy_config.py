"""docker-compose.yml, deploy/nginx.conf and backend/Dockerfile agree with each other and the code.

Docker cannot run here, so: the compose file is validated against the Compose Specification's
JSON Schema, cross-references are checked (services, ports, env vars, files), and nginx
itself tests its configuration (``nginx -t``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
from deploy_helpers import (
    COMPOSE,
    NGINX_CONF,
    REPO,
    load_compose,
    local_nginx_conf,
    nginx_test,
    upstream_servers,
)

from gradtrace.service.settings import Settings

pytestmark = pytest.mark.services


def test_compose_matches_the_compose_spec_schema() -> None:
    exe = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run(
        [str(exe), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_referenced_service_exists_and_has_a_healthcheck() -> None:
    services = load_compose()["services"]
    assert {"nginx", "api", "postgres", "redis"} <= set(services)
    for name, svc in services.items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            if cond.get("condition") == "service_healthy":
                assert "healthcheck" in services[dep], (
                    f"{name} waits for {dep} to be healthy but it has no healthcheck"
                )
        assert "healthcheck" in svc, f"{name} has no healthcheck"
    assert services["api"]["deploy"]["replicas"] >= 2, "the hosted deployment runs several API replicas"


def test_nginx_upstreams_match_the_api_service_and_port() -> None:
    services = load_compose()["services"]
    conf = NGINX_CONF.read_text()
    ups = upstream_servers(conf)
    assert ups, "nginx.conf has no upstream servers"
    dockerfile = (REPO / "backend" / "Dockerfile").read_text()
    cmd_port = int(re.search(r'"--port",\s*"(\d+)"', dockerfile).group(1))
    for host, port in ups:
        assert host in services, f"nginx upstream {host} is not a compose service"
        exposed = {int(str(p).split(":")[-1]) for p in services[host].get("expose", [])}
        assert port in exposed, f"nginx proxies to {host}:{port} but {host} exposes {exposed}"
        assert port == cmd_port, "the API container listens on a different port than nginx uses"
    # nginx publishes its listen port.
    listen = int(re.search(r"listen\s+(\d+);", conf).group(1))
    published = [str(p) for p in services["nginx"]["ports"]]
    assert any(p.endswith(f":{listen}") for p in published)


def test_mounted_and_built_files_exist() -> None:
    services = load_compose()["services"]
    for name, svc in services.items():
        for vol in svc.get("volumes", []):
            src = vol.split(":", 1)[0]
            if src.startswith("./"):
                assert (REPO / src).exists(), f"{name} mounts missing {src}"
        build = svc.get("build")
        if build:
            assert (REPO / build["context"] / build["dockerfile"]).is_file()
    dockerfile = (REPO / "backend" / "Dockerfile").read_text()
    for src in re.findall(r"^COPY\s+(?!--from)(\S+)", dockerfile, re.M):  # --from: another stage
        assert (REPO / src).exists(), f"Dockerfile copies missing {src}"
    assert "torch==2.13.0" in dockerfile and "whl/cpu" in dockerfile


def test_env_vars_are_consistent_with_services_and_settings() -> None:
    compose = load_compose()
    services = compose["services"]
    env = {k: str(v) for k, v in services["api"]["environment"].items()}
    # Every GRADTRACE_* variable the compose file sets is one Settings reads.
    settings_src = (REPO / "backend" / "gradtrace" / "service" / "settings.py").read_text()
    for key in env:
        assert f'"{key}"' in settings_src, f"compose sets {key}, which Settings does not read"
    # The URLs point at the compose services, with the credentials postgres is created with.
    pg_env = services["postgres"]["environment"]
    db = urlparse(env["DATABASE_URL"].replace("${POSTGRES_PASSWORD:-gradtrace}", "gradtrace"))
    assert db.scheme == "postgresql" and db.hostname == "postgres" and db.port == 5432
    assert db.username == pg_env["POSTGRES_USER"] and db.path == "/" + pg_env["POSTGRES_DB"]
    assert db.password == pg_env["POSTGRES_PASSWORD"].replace("${POSTGRES_PASSWORD:-gradtrace}", "gradtrace")
    redis = urlparse(env["REDIS_URL"])
    assert redis.hostname == "redis" and redis.port == 6379
    # And Settings really turns them into a PostgreSQL + Redis + proxy-aware configuration.
    s = Settings.from_env(env)
    assert s.database_url and s.redis_url and s.trust_proxy
    # The body caps of nginx and the API agree.
    nginx_body = re.search(r"client_max_body_size\s+(\d+)k;", NGINX_CONF.read_text()).group(1)
    assert int(nginx_body) * 1024 == s.max_body_bytes


def test_nginx_accepts_its_configuration(tmp_path: Path) -> None:
    conf = local_nginx_conf(tmp_path, 18080, [18001, 18002])
    result = nginx_test(conf, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr


def test_nginx_rejects_a_broken_configuration(tmp_path: Path) -> None:
    """The check above has teeth: a typo makes nginx -t fail."""
    conf = local_nginx_conf(tmp_path, 18080, [18001])
    conf.write_text(conf.read_text().replace("client_max_body_size", "client_max_bodysize"))
    assert nginx_test(conf, tmp_path).returncode != 0
