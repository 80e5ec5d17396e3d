"""Helpers for the browser tests: the expected node states computed in Python from the trace
JSON with the documented rule (trace_schema.py), independently of the viewer's JS."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return json.loads(resp.read())


def post_json(url: str, body: Any) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())


def expected_states(trace: dict[str, Any], i: int) -> dict[str, str]:
    """The node-state rule of trace_schema.py, written out plainly in Python."""
    events = trace["events"]
    ids = {n["id"] for n in trace["graph"]["nodes"]}

    def node_of(ev: dict[str, Any]) -> str | None:
        if ev.get("node") in ids:
            return ev["node"]
        return ev["target"] if ev.get("target") in ids else None

    cur = events[i]["pass_index"]
    phase = next((p["phase"] for p in trace["passes"] if p["index"] == cur), events[i]["phase"])
    created = {}
    for ev in events:
        n = node_of(ev)
        if ev["kind"] == "node_created" and n and n not in created:
            created[n] = ev["seq"]
    out = {}
    for node in trace["graph"]["nodes"]:
        nid = node["id"]
        c = node.get("created_seq")
        c = created.get(nid, 0) if c is None else c
        if c > i:
            out[nid] = "hidden"
            continue
        running = finished = False
        for ev in events[: i + 1]:
            if ev["pass_index"] != cur or node_of(ev) != nid:
                continue
            if ev["kind"] == "node_pre":
                running = True
            elif ev["kind"] == "node_post":
                running, finished = False, True
            elif ev["kind"] == "grad_write" and node["kind"] == "tensor":
                finished = True
        if node_of(events[i]) == nid or running:
            out[nid] = "active"
        elif phase == "backward" and finished:
            out[nid] = "done"
        else:
            out[nid] = "shown"
    return out


def drawn_states(page: Any) -> dict[str, str]:
    return page.eval_on_selector_all(
        "#graph .gt-node:not(.gt-node--module)[data-node-id]",  # trace nodes, not collapsed boxes
        "els => Object.fromEntries(els.map(e => [e.dataset.nodeId, e.dataset.state]))",
    )


def nodes_under_minimap(page: Any) -> list[str]:
    """The drawn nodes whose box (client px) meets the minimap's, where it stands now: none may
    at the opening view (the minimap hidden, as when the whole graph is on screen: none)."""
    return page.evaluate(
        """() => {
          const m = document.getElementById('minimap').getBoundingClientRect();
          if (!m.width) return [];
          return [...document.querySelectorAll('#graph .gt-node:not([data-state=hidden])')].filter((e) => {
            const b = e.getBoundingClientRect();
            return b.left < m.right && b.right > m.left && b.top < m.bottom && b.bottom > m.top;
          }).map((e) => e.dataset.nodeId);
        }"""
    )


def wait_step(page: Any, step: int) -> None:
    # A selector, not wait_for_function: the page's CSP (script-src 'self') forbids string eval.
    page.wait_for_selector(f'body[data-step="{step}"]', state="attached", timeout=15000)


def open_example(page: Any, base: str, example_id: str, extra: str = "") -> None:
    page.goto(f"{base}/#example={example_id}{extra}")
    page.wait_for_selector("body.is-ready", timeout=60000)


def chosen_steps(trace: dict[str, Any]) -> list[int]:
    """A forward step, the end of the forward, and steps spread over every backward pass."""
    steps = set()
    for p in trace["passes"]:
        first, last = p["first_seq"], p["last_seq"]
        steps.update({first, (first + last) // 2, last})
        if p["phase"] == "backward":
            steps.update({first + (last - first) // 4, first + 3 * (last - first) // 4})
    return sorted(s for s in steps if 0 <= s < len(trace["events"]))


def fmt4(x: float) -> str:
    """The viewer's format for ordinary magnitudes: 4 significant digits, a real minus."""
    return f"{x:#.4g}".replace("-", "\u2212")


def expected_scalar_edge_chips(trace: dict[str, Any], i: int) -> dict[str, str]:
    """Edge id -> chip text for one-number gradients that have travelled by step i in its pass."""
    cur = trace["events"][i]["pass_index"]
    out = {}
    for e in trace["graph"]["edges"]:
        for g in e["grads"]:
            v = g["value"]
            if g["pass_index"] == cur and g["seq"] <= i and v and len(v.get("values") or []) == 1:
                x = v["values"][0]
                if isinstance(x, (int, float)) and (x == 0 or 1e-4 <= abs(x) < 1e4):
                    out[e["id"]] = "0" if x == 0 else fmt4(x)
    return out


def drawn_edge_chips(page: Any) -> dict[str, str]:
    return page.eval_on_selector_all(
        "#graph .gt-grad--edge:not([data-state=hidden])",
        "els => Object.fromEntries(els.map(e => [e.dataset.edgeId, e.querySelector('text').textContent]))",
    )


@contextlib.contextmanager
def docs_server(html: str) -> Iterator[str]:
    """Serve one HTML page from another loopback origin (a blog embedding our iframe)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/docs.html"
    finally:
        server.shutdown()
        server.server_close()
