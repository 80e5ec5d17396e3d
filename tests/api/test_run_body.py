"""``POST /api/v1/run`` before any jail: the body's checks, and the refusal where no jail runs.

In-process (no worker, no template is started): a server that cannot confine programs
answers 503 ``runner_unavailable`` and runs nothing; bad bodies are 4xx naming the field or
the line, checked before a runner is asked.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from gradtrace.api.app import create_app
from gradtrace.service.settings import Settings


def _post_all(tmp_path: Path, bodies: list[object]) -> list[httpx.Response]:
    settings = Settings(
        sqlite_path=tmp_path / "permalinks.db",
        disk_cache_dir=None,
        rate_per_minute=0,
        start_workers=False,
        run_max_source_bytes=1000,
    )
    app = create_app(settings)

    async def scenario() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return [await client.post("/api/v1/run", json=body) for body in bodies]

    return asyncio.run(scenario())


def test_no_jail_no_run(tmp_path: Path) -> None:
    (r,) = _post_all(tmp_path, [{"python": "print('hi')"}])
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "runner_unavailable"
    assert "retry-after" in r.headers


@pytest.mark.parametrize(
    ("body", "status", "code", "path", "line"),
    [
        ({"python": "x = (1,\n"}, 422, "python_syntax", "/python", 1),
        ({"python": "a = 1\nb = = 2\n"}, 422, "python_syntax", "/python", 2),
        ({"python": 3}, 422, "invalid_request", "/python", None),
        ({"python": "pass", "spec": {}}, 422, "invalid_request", "/spec", None),
        (["print(1)"], 422, "invalid_request", "", None),
        ({"python": "#" * 2000}, 413, "too_large", "/python", None),
    ],
)
def test_bad_bodies_name_the_field_or_line(
    tmp_path: Path, body: object, status: int, code: str, path: str, line: int | None
) -> None:
    (r,) = _post_all(tmp_path, [body])
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and (error["path"] or "") == path, error
    assert error.get("line") == line, error
