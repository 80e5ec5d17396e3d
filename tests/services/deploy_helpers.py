"""Reading docker-compose.yml and deploy/nginx.conf for the tests, and running nginx locally."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
NGINX_CONF = REPO / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def load_compose() -> dict:
    return YAML(typ="safe").load(COMPOSE.read_text())


def upstream_servers(conf: str) -> list[tuple[str, int]]:
    """(host, port) of every ``server`` line inside ``upstream`` blocks."""
    out = []
    for block in re.findall(r"upstream\s+\w+\s*\{(.*?)\}", conf, re.S):
        for host, port in re.findall(r"^\s*server\s+([\w.-]+):(\d+)", block, re.M):
            out.append((host, int(port)))
    return out


def local_nginx_conf(workdir: Path, listen_port: int, upstreams: list[int]) -> Path:
    """The deployment's nginx.conf, rewritten for loopback: same limits, local paths and ports."""
    conf = NGINX_CONF.read_text()
    servers = "".join(f"        server 127.0.0.1:{p} max_fails=2 fail_timeout=5s;\n" for p in upstreams)
    conf = re.sub(r"^\s*server\s+api:8000[^\n]*\n", servers, conf, count=1, flags=re.M)
    conf = conf.replace("listen 80;", f"listen 127.0.0.1:{listen_port};")
    conf = conf.replace("/tmp/nginx", str(workdir / "nginx"))
    conf = conf.replace("access_log /dev/stdout;", f"access_log {workdir / 'access.log'};")
    conf = conf.replace("error_log /dev/stderr warn;", f"error_log {workdir / 'error.log'} warn;")
    path = workdir / "nginx.conf"
    path.write_text(conf)
    return path


def nginx_cmd(conf: Path, workdir: Path, *extra: str) -> list[str]:
    return [NGINX, "-p", str(workdir), "-c", str(conf), "-e", str(workdir / "error.log"), *extra]


def nginx_test(conf: Path, workdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(nginx_cmd(conf, workdir, "-t"), capture_output=True, text=True, timeout=30)
