"""Routes get what they use as typed dependencies (api/deps.py), and a spec is parsed once.

The app runs in this process (its lifespan, an ASGI transport). ``app.dependency_overrides``
hands the routes a second real SQLite store and other settings: the answers come from those.
With a real worker: one POST /trace parses its spec once, in the API process, and the worker
is handed that ModelSpec itself; a spec the schema would refuse but the engine can trace shows
the worker does not validate it again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from specs import tiny

import gradtrace.api
import gradtrace.spec
from gradtrace.api.app import create_app
from gradtrace.api.deps import client_key, get_settings, get_store
from gradtrace.service.hashing import permalink_id, spec_hash
from gradtrace.service.settings import Settings
from gradtrace.service.store import SpecStore
from gradtrace.spec import ModelSpec, SpecError, parse_spec


def settings_in(tmp_path: Path, **changes: Any) -> Settings:
    return Settings(
        sqlite_path=tmp_path / "permalinks.db",
        disk_cache_dir=tmp_path / "tier",
        rate_per_minute=0,
        **changes,
    )


@asynccontextmanager
async def running(app: Any, ready: bool = False) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120) as client:
            for _ in range(900 if ready else 0):
                if (await client.get("/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            yield client


def test_routes_answer_from_the_store_and_settings_they_are_given(tmp_path: Path) -> None:
    app = create_app(settings_in(tmp_path, start_workers=False, public_url="https://first.example"))
    second = SpecStore(None, tmp_path / "second.db")
    other = tiny("only in the second store")
    other_id = permalink_id(parse_spec(other).normalized())
    second.put(other_id, spec_hash(parse_spec(other).normalized()), parse_spec(other).normalized())

    async def the_second_store() -> SpecStore:
        return second

    async def other_settings() -> Settings:
        return settings_in(tmp_path, public_url="https://second.example")

    async def scenario() -> None:
        async with running(app) as client:
            first = await client.post("/api/v1/specs", json=tiny("in the first store"))
            assert first.status_code == 201, first.text
            first_id = first.json()["id"]
            assert first.json()["url"] == f"https://first.example/?spec={first_id}"
            assert (await client.get(f"/api/v1/specs/{other_id}")).status_code == 404

            app.dependency_overrides[get_store] = the_second_store
            app.dependency_overrides[get_settings] = other_settings
            got = await client.get(f"/api/v1/specs/{other_id}")
            assert got.status_code == 200, got.text
            assert got.json() == parse_spec(other).normalized()
            missing = await client.get(f"/api/v1/specs/{first_id}")
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "permalink_not_found"
            # A side of /compare named by id is looked up in the same store.
            unknown = await client.post("/api/v1/compare", json={"a": first_id, "b": other_id})
            assert unknown.status_code == 404 and unknown.json()["error"]["path"] == "/a"
            stored = await client.post("/api/v1/specs", json=tiny("stored in the second store"))
            assert stored.status_code == 201, stored.text
            new_id = stored.json()["id"]
            assert stored.json()["url"] == f"https://second.example/?spec={new_id}"
            assert stored.headers["location"] == f"https://second.example/api/v1/specs/{new_id}"
            assert second.get(new_id) == parse_spec(tiny("stored in the second store")).normalized()

            app.dependency_overrides.clear()
            assert (await client.get(f"/api/v1/specs/{first_id}")).status_code == 200
            assert (await client.get(f"/api/v1/specs/{new_id}")).status_code == 404

    try:
        asyncio.run(scenario())
    finally:
        second.close()


def test_a_spec_is_parsed_once_and_the_worker_gets_the_parsed_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parses: list[Any] = []
    real_parse = gradtrace.spec.parse_spec

    def counted_parse(doc: Any) -> ModelSpec:
        parses.append(doc)
        return real_parse(doc)

    # api/body.py imports parse_spec from gradtrace.spec when it checks a spec.
    monkeypatch.setattr(gradtrace.spec, "parse_spec", counted_parse)
    # the check in a thread of this process (not a helper process), where the count can see it
    app = create_app(settings_in(tmp_path, workers=1, api_cpu_processes=0))
    doc = tiny("parsed once", 0.25)

    async def scenario() -> None:
        async with running(app, ready=True) as client:
            pool = app.state.trace_service.pool
            handed: list[Any] = []
            run_trace = pool.run_trace

            def recorded(spec: Any) -> Awaitable[Any]:
                handed.append(spec)
                return run_trace(spec)

            monkeypatch.setattr(pool, "run_trace", recorded)
            traced = await client.post("/api/v1/trace", json=doc)
            assert traced.status_code == 200, traced.text
            assert traced.headers["x-cache"] == "miss"
            assert parses == [doc]  # once, in this (the API) process
            assert len(handed) == 1 and isinstance(handed[0], ModelSpec)
            assert handed[0] == real_parse(doc) and pool.tasks_run["run_trace"] == 1

            # The worker traces what it is handed without validating it again: a title over the
            # schema's 200 characters would be refused by a parse, and is traced as it is.
            too_long = "t" * 300
            with pytest.raises(SpecError):
                real_parse({**doc, "title": too_long})
            answer = await run_trace(real_parse(doc).model_copy(update={"title": too_long}))
            assert isinstance(answer.value, bytes), answer.value
            assert json.loads(answer.value)["title"] == too_long

    asyncio.run(scenario())


def test_only_the_dependencies_read_the_app_state() -> None:
    """Routes take the service objects as parameters: app.state is set by api/app.py and read
    by api/deps.py, and no other module of the API touches it."""
    api = Path(gradtrace.api.__file__).parent
    touching = {p.name for p in api.glob("*.py") if "app.state" in p.read_text()}
    assert touching == {"app.py", "deps.py"}


def test_clients_are_keyed_by_ipv6_prefix_and_ipv4_address() -> None:
    # Issue 38: an IPv6 /64 is one subscriber with any number of addresses
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:ffff:1:2:3") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("10.0.0.1") != client_key("10.0.0.2")
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"  # an IPv4 client on a dual-stack socket
    assert client_key("unknown") == "unknown"
