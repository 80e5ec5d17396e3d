"""The Python bundler: the viewer in one script, and the module forms it handles or refuses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gradtrace.render.bundle import BundleError, bundle
from gradtrace.render.node_tool import frontend_dir, node_binary


def run_js(code: str) -> object:
    """Run a script in Node and return what it leaves in globalThis.out (after microtasks)."""
    program = code + "\nPromise.resolve().then(() => console.log(JSON.stringify(globalThis.out)));\n"
    done = subprocess.run([node_binary(), "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_viewer_bundles_into_one_script_without_module_syntax() -> None:
    code = bundle(frontend_dir() / "js" / "main.js")
    assert "createRenderer" in code and "function layoutGraph" in code
    assert not any(line.startswith(("import ", "export ")) for line in code.splitlines())


def test_imports_and_exports_are_wired_up(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text(
        'import * as b from "./b.js";\nimport c, { d as e } from "./c.js";\n'
        'globalThis.out = [b.x, c, e];\nimport("./b.js").then((m) => { globalThis.out.push(m.x); });\n'
    )
    (tmp_path / "b.js").write_text("const y = 1;\nexport { y as x };\n")
    (tmp_path / "c.js").write_text("export const d = 3;\nexport default 2;\n")
    assert run_js(bundle(tmp_path / "a.js")) == [1, 2, 3, 1]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("const name = './b.js';\nimport(name);\n", "literal relative path"),
        ('import x from "elkjs";\n', "only relative imports"),
        ('import "./b.js";\n', "side-effect imports"),
        ('export * from "./b.js";\n', "re-exports"),
        ("console.log(import.meta.url);\n", "import.meta"),
        ('import x from "./missing.js";\n', "cannot read missing.js (imported by bad.js)"),
    ],
)
def test_forms_it_cannot_bundle_are_refused_by_name(tmp_path: Path, source: str, message: str) -> None:
    (tmp_path / "b.js").write_text("export const x = 1;\n")
    (tmp_path / "bad.js").write_text(source)
    with pytest.raises(BundleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        bundle(tmp_path / "bad.js")


def test_an_import_cycle_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport const a = 1;\n')
    (tmp_path / "b.js").write_text('import { a } from "./a.js";\nexport const b = 2;\n')
    with pytest.raises(BundleError, match="import cycle through a.js"):
        bundle(tmp_path / "a.js")
