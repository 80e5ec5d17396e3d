"""`pip install gradtrace` as a user meets it: the wheel, a fresh venv, no checkout, no Node.

The sdist and the wheel (built from the sdist, as a release is) come from this checkout; the
wheel goes into a new virtualenv outside it, first alone (the library: a notebook user, a docs
author), then with the ``[server]`` extra. Everything runs from another directory with a PATH
that holds only the venv's scripts, so neither the checkout's ``frontend/`` nor a system
``node`` can help. Slow: 2-3 minutes here (pip installs torch from local disk and its cache).
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from server_process import ctrl_c_as_at_a_terminal, free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TORCH_VERSION = "2.13.0"  # the version the Makefile pins; the package asks for torch>=2.4


@dataclass
class Venv:
    root: Path
    workdir: Path  # where the user runs things: neither the checkout nor the venv
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def run(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        """A command as the user types it (``gradtrace …`` resolves through PATH = the venv's bin/)."""
        done = subprocess.run(
            list(args), cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            pytest.fail(
                f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def python_script(self, code: str, timeout: float = 300) -> str:
        return self.run(str(self.python), "-c", code, timeout=timeout).stdout


def _pip(python: Path, *args: str) -> None:
    # pip itself keeps the developer's environment (its configuration, local wheels, cache), but
    # not a PYTHONPATH naming the checkout (the way to test a worktree): pip would find the
    # checkout's gradtrace.egg-info there and skip installing the wheel as already installed.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *args], check=True, timeout=900, env=env)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release build: an sdist, then the wheel built from it (what `python -m build` does)."""
    out = tmp_path_factory.mktemp("dist")
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), "backend"],
        cwd=REPO,
        check=True,
        timeout=600,
        capture_output=True,
    )
    after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    assert after == before, "building the package left files in the checkout"
    (sdist,) = out.glob("gradtrace-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "setup.py", "gradtrace/_frontend/index.html"} <= names
    (built,) = out.glob("gradtrace-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with the wheel (no extras) and torch 2.13 from local disk."""
    base = tmp_path_factory.mktemp("user")
    root, workdir, bin_dir = base / "venv", base / "work", base / "venv" / "bin"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    _pip(root / "bin" / "python", f"torch=={TORCH_VERSION}", str(wheel))
    workdir.mkdir()
    env = {
        "PATH": str(bin_dir),  # the venv's scripts only: no system node, no checkout tools
        "HOME": str(base / "home"),
        "XDG_DATA_HOME": str(base / "data"),
        "LANG": "C.UTF-8",
        "TMPDIR": str(base),
    }
    assert shutil.which("node", path=env["PATH"]) is None and shutil.which("nodejs", path=env["PATH"]) is None
    return Venv(root, workdir, env)


def test_the_wheel_carries_the_viewer_and_its_licenses(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    viewer = "gradtrace/_frontend/"
    for part in (
        "index.html",
        "embed.html",
        "watch.html",  # the run view (gradtrace view RUN_DIR, the hosted service's runs)
        "js/main.js",
        "css/app.css",
        "tools/render.mjs",
        "tools/snapshot.cjs",
        "tools/snapshot-warmup.json",  # (the snapshot warms up on it: without it, a toy)
        "node_modules/elkjs/lib/elk-worker.min.js",
        "node_modules/elkjs/lib/elk.bundled.js",
        "node_modules/elkjs/LICENSE.md",
        "node_modules/swagger-ui-dist/swagger-ui-bundle.js",
        "node_modules/swagger-ui-dist/swagger-ui.css",
        "node_modules/swagger-ui-dist/LICENSE",
    ):
        assert viewer + part in names, part
    # Every package the viewer depends on (katex, momoa, … as it adds them), named with its
    # version and license in the notices (with the license text, where the package has one).
    notices = zipfile.ZipFile(wheel).read(viewer + "node_modules/THIRD_PARTY_LICENSES.txt").decode()
    modules = REPO / "frontend" / "node_modules"
    for name in json.loads((REPO / "frontend" / "package.json").read_text())["dependencies"]:
        assert any(n.startswith(f"{viewer}node_modules/{name}/") for n in names), name
        manifest = json.loads((modules / name / "package.json").read_text())
        assert f"{name} {manifest['version']} ({manifest['license']})" in notices
    assert not [n for n in names if n.endswith((".map", ".d.ts"))]
    assert not [n for n in names if "/tests/" in n or n.startswith("tests/")]
    metadata = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/METADATA").decode()
    requires = re.findall(r"^Requires-Dist: (.+)$", metadata, re.M)
    assert "torch>=2.4" in requires and not any("==" in r for r in requires if "extra ==" not in r)
    assert all('extra == "server"' in r for r in requires if r.startswith(("fastapi", "uvicorn", "pebble")))
    assert "License-Expression: BSD-3-Clause" in metadata


LIBRARY_CHECK = """
import json, sys
import torch
from torch import nn
import gradtrace

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
x, y = torch.randn(5, 4), torch.randn(5, 2)
loss_fn = lambda out: ((out - y) ** 2).mean()
trace = gradtrace.trace(model, x, loss_fn)
# PyTorch itself, with no hooks, is the oracle.
params = dict(model.named_parameters())
expected = torch.autograd.grad(loss_fn(model(x)), list(params.values()))
error = max(float(abs(torch.as_tensor(trace.grads[n]) - g).max()) for n, g in zip(params, expected))
for suffix in ("json", "svg", "html"):
    trace.save("mlp." + suffix)
print(json.dumps({"error": error, "server_loaded": "fastapi" in sys.modules, "version": gradtrace.__version__}))
"""


def test_the_library_works_without_the_server_extra_or_node(venv: Venv) -> None:
    assert venv.run(str(venv.python), "-c", "import fastapi", check=False).returncode != 0
    version = venv.python_script("import gradtrace; print(gradtrace.__version__)").strip()
    assert venv.run("gradtrace", "--version").stdout.strip().endswith(version)

    result = json.loads(venv.python_script(LIBRARY_CHECK).strip().splitlines()[-1])
    assert result["error"] == 0.0 and not result["server_loaded"]
    svg = (venv.workdir / "mlp.svg").read_text()
    assert svg.lstrip().startswith(("<svg", "<?xml")) and "<script" not in svg
    page = (venv.workdir / "mlp.html").read_text()
    assert "<html" in page.lower() and "<script src=" not in page
    # The one-file player carries its trace gzipped and base64-encoded (the browser unpacks it).
    packed = page.split('id="gradtrace-packed-data">')[1].split("</script>")[0]
    player_data = json.loads(gzip.decompress(base64.b64decode(packed)))
    assert {"AddmmBackward0", "TanhBackward0"} <= {n["op"] for n in player_data["trace"]["graph"]["nodes"]}
    assert json.loads((venv.workdir / "mlp.json").read_text())["graph"]["nodes"]

    # The service is the [server] extra: without it, `gradtrace serve` says what to install.
    serve = venv.run("gradtrace", "serve", "--port", str(free_port()), check=False, timeout=60)
    assert serve.returncode != 0 and "gradtrace[server]" in serve.stderr and "Traceback" not in serve.stderr


def _readme_blocks(heading: str, language: str) -> list[str]:
    """The ``language`` code blocks of a README section, in order (those inside a list item
    dedented)."""
    section = (REPO / "README.md").read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [textwrap.dedent(block) for block in re.findall(rf"```{language}\n(.*?)```", section, re.S)]


def _readme_block(heading: str, language: str) -> str:
    return _readme_blocks(heading, language)[0]


def test_the_readme_examples_work_as_written(venv: Venv) -> None:
    """'Trace your own model' (every Python block: the quickstart, then reading its trace.json
    without gradtrace) and 'Command line' (all but `serve`), verbatim from the README."""
    first, *more = _readme_blocks("Trace your own model (Python)", "python")
    venv.run(str(venv.python), "-c", first)
    assert json.loads((venv.workdir / "trace.json").read_text())["grads"]["0.weight"]
    for block in more:
        venv.run(str(venv.python), "-c", block)
    # `gradtrace run train.py`: the reader's own program; here, the autograd tutorial's
    (venv.workdir / "train.py").write_text(
        "import torch\n"
        "x = torch.ones(5)\n"
        "y = torch.zeros(3)\n"
        "w = torch.randn(5, 3, requires_grad=True)\n"
        "b = torch.randn(3, requires_grad=True)\n"
        "z = torch.matmul(x, w) + b\n"
        "loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)\n"
        "loss.backward()\n"
    )
    for line in _readme_block("Command line", "sh").splitlines():
        command = line.split("#", 1)[0].strip()
        # `serve` and `view` run servers (and need [server]): tried below, once the extra is in.
        if command and not command.startswith(("gradtrace serve", "gradtrace view")):
            venv.run("/bin/sh", "-c", command)
    assert json.loads((venv.workdir / "spec.json").read_text())["spec_version"] == 1
    assert "<svg" in (venv.workdir / "diagram.svg").read_text()
    assert "<html" in (venv.workdir / "trace.html").read_text()[:2000].lower()


def test_the_mkdocs_plugin_works_from_the_wheel(venv: Venv) -> None:
    """An author's site (the example, copied out of the checkout) built with the installed plugin."""
    _pip(venv.python, "mkdocs")
    shutil.copytree(REPO / "docs" / "examples", venv.workdir / "examples")
    venv.run(
        "mkdocs",
        "build",
        "--strict",
        "-q",
        "-f",
        "examples/mkdocs/mkdocs.yml",
        "-d",
        str(venv.workdir / "site"),
    )
    drawn = sorted(path.suffix for path in (venv.workdir / "site" / "_gradtrace").iterdir())
    assert drawn == [".html", ".svg", ".svg"]


@pytest.fixture(scope="module")
def server(wheel: Path, venv: Venv) -> Iterator[str]:
    """``gradtrace serve`` from the wheel with its [server] extra (installed after the library tests)."""
    _pip(venv.python, f"{wheel}[server]")
    port = free_port()
    log = open(venv.workdir / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        ["gradtrace", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=venv.workdir,
        env={**venv.env, "GRADTRACE_WORKERS": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the workers end with it
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    "gradtrace serve did not become ready:\n" + (venv.workdir / "serve.log").read_text()
                )
            time.sleep(0.5)
        yield url
    finally:
        # SIGTERM to the API alone: it stops its worker (SIGTERM to the group would kill the
        # worker at once and have the pool start a replacement while shutting down)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):  # whatever of its group is left
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=5)
        log.close()


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.headers.get("content-type", ""), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("content-type", ""), exc.read()


def _post_json(url: str, doc: object) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(doc).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())


def test_serve_from_the_wheel_answers_the_viewer_docs_api_and_embeds(server: str, venv: Venv) -> None:
    status, kind, body = _get(server + "/")
    assert status == 200 and kind.startswith("text/html") and b"<html" in body.lower()
    status, kind, _ = _get(server + "/js/main.js")
    assert status == 200 and "javascript" in kind
    assert _get(server + "/vendor/elkjs/elk-worker.min.js")[0] == 200

    status, _, page = _get(server + "/docs")
    assert status == 200 and b"swagger-ui-bundle.js" in page
    status, kind, _ = _get(server + "/vendor/swagger-ui/swagger-ui-bundle.js")
    assert status == 200 and "javascript" in kind

    status, _, listing = _get(server + "/api/v1/examples")
    examples = json.loads(listing)
    assert status == 200 and {"id", "title", "description"} <= set(examples[0])

    spec = json.loads(_get(f"{server}/api/v1/examples/{examples[0]['id']}")[2])
    link = _post_json(server + "/api/v1/specs", spec)
    status, kind, embed = _get(f"{server}/embed/{link['id']}")
    assert status == 200 and kind.startswith("text/html") and b"<html" in embed.lower()
    status, kind, svg = _get(f"{server}/api/v1/specs/{link['id']}/diagram.svg")
    assert status == 200 and kind.startswith("image/svg") and b"<svg" in svg

    # The permalink went to the user's data directory, not into site-packages.
    assert (Path(venv.env["XDG_DATA_HOME"]) / "gradtrace" / "gradtrace.db").is_file()
    assert not list(venv.root.rglob("gradtrace.db"))


def test_view_from_the_wheel_serves_a_saved_trace_until_ctrl_c(server: str, venv: Venv) -> None:
    """The README's `gradtrace view trace.json` on a machine without a display: it prints the URL,
    the page there opens that trace, and Ctrl-C ends it cleanly."""
    venv.run("/bin/sh", "-c", "gradtrace examples two-layer-linear > view-spec.json")
    venv.run("gradtrace", "trace", "view-spec.json", "-o", "view-trace.json")
    env = {**venv.env, "GRADTRACE_WORKERS": "1"}  # venv.env has no DISPLAY: the URL is printed
    proc = subprocess.Popen(
        ["gradtrace", "view", "view-trace.json"],
        cwd=venv.workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 90
        while not any("http://" in line for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            lines.append(proc.stdout.readline())
        url = next(word for line in lines for word in line.split() if word.startswith("http://"))
        assert "/?opened=view-trace.json" in url
        origin = url.split("/?", 1)[0]
        status, kind, page = _get(url)
        assert status == 200 and kind.startswith("text/html") and b"<html" in page.lower()
        status, _, opened = _get(origin + "/api/v1/opened-trace")
        assert status == 200
        assert opened == (venv.workdir / "view-trace.json").read_bytes()
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends
        assert proc.wait(timeout=60) == 130  # 128 + SIGINT, as a shell reports it
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
