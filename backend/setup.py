"""Build hook: put the viewer inside the package, so an installed wheel needs no checkout.

Everything else about the package is declared in pyproject.toml. Two commands are extended:

- ``build_py`` copies the viewer into ``gradtrace/_frontend/`` of the build (never of the
  source tree): the checkout's ``../frontend`` when building from a checkout, or the copy an
  sdist already carries. Editable installs skip it (they use the checkout's ``frontend/``).
- ``sdist`` carries the same copy, since ``../frontend`` is outside the project directory.

Only what the viewer, the embed player and the Node tools use is copied: the HTML, CSS, JS,
assets and tools, and from ``node_modules`` the packages ``frontend/package.json`` depends on
(with their package.json and license files, and one THIRD_PARTY_LICENSES.txt naming each
package's version and license; no source maps, type stubs or READMEs). A build
without ``npm ci`` first fails: a wheel without its viewer is the bug this hook exists for.

The build's scratch directory lives in a temporary directory removed at exit, so building a
wheel leaves no ``build/`` behind and never packs a stale file from an earlier build.
"""

from __future__ import annotations

import atexit
import fnmatch
import json
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
CHECKOUT_FRONTEND = HERE.parent / "frontend"
PACKAGED = Path("gradtrace") / "_frontend"  # inside the package, relative to a build root

VIEWER_PARTS = ("index.html", "embed.html", "watch.html", "package.json", "css", "js", "assets", "tools")
# Per npm package, the parts the viewer loads (default: the whole package, filtered below).
NPM_PARTS = {"elkjs": ("lib",), "katex": ("dist",), "@humanwhocodes/momoa": ("dist",)}
NPM_ALWAYS = ("package.json", "LICENSE*", "LICENCE*", "NOTICE*", "*.LICENSE.txt")
LEFT_OUT = ("*.map", "*.ts", "*.mts", "*.cts", "README*", "CHANGELOG*", "log.*.txt", ".*")  # .ts: type stubs
NOTICES = "THIRD_PARTY_LICENSES.txt"  # in the copy's node_modules/: every package, its version and license


def _left_out(_directory: str, names: list[str]) -> set[str]:
    return {name for name in names if any(fnmatch.fnmatch(name, pattern) for pattern in LEFT_OUT)}


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, ignore=_left_out, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target)


def copy_viewer(frontend: Path, target: Path) -> None:
    """Copy the shipped part of ``frontend`` (a checkout's ``frontend/``) into ``target``."""
    modules = frontend / "node_modules"
    dependencies = json.loads((frontend / "package.json").read_text(encoding="utf-8")).get("dependencies", {})
    missing = [name for name in dependencies if not (modules / name / "package.json").is_file()]
    if missing:
        raise SystemExit(
            f"cannot build gradtrace: the viewer's packages {missing} are not in {modules}; "
            f"run `npm ci` in {frontend} first"
        )
    shutil.rmtree(target, ignore_errors=True)
    for part in VIEWER_PARTS:
        if (frontend / part).exists():
            _copy(frontend / part, target / part)
    notices = []
    for name in dependencies:
        package = modules / name
        for part in NPM_PARTS.get(name, (".",)):
            _copy(package / part, target / "node_modules" / name / part)
        for pattern in NPM_ALWAYS:
            for path in package.glob(pattern):
                _copy(path, target / "node_modules" / name / path.name)
        notices.append(_notice(name, package))
    (target / "node_modules" / NOTICES).write_text("\n\n".join(notices), encoding="utf-8")


def _notice(name: str, package: Path) -> str:
    """One package's entry in the notices: name, version, license, and its license text if shipped."""
    manifest = json.loads((package / "package.json").read_text(encoding="utf-8"))
    texts = [
        path.read_text(encoding="utf-8", errors="replace") for path in sorted(package.glob("LICEN[CS]E*"))
    ]
    head = f"{name} {manifest.get('version', '?')} ({manifest.get('license', 'license not declared')})"
    return "\n".join([head, "=" * len(head), *texts]) if texts else head


def _viewer_source() -> Path:
    """The checkout's frontend when there is one, else the copy inside an unpacked sdist."""
    if (CHECKOUT_FRONTEND / "package.json").is_file():
        return CHECKOUT_FRONTEND
    if (HERE / PACKAGED / "package.json").is_file():
        return HERE / PACKAGED
    raise SystemExit(f"cannot build gradtrace: no viewer at {CHECKOUT_FRONTEND} or {HERE / PACKAGED}")


class BuildWithViewer(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # the checkout's frontend/ serves an editable install
            return
        source = _viewer_source()
        target = Path(self.build_lib) / PACKAGED
        if source != HERE / PACKAGED:
            copy_viewer(source, target)
        else:  # from an sdist: its copy is already filtered
            shutil.rmtree(target, ignore_errors=True)
            _copy(source, target)


class SdistWithViewer(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        copy_viewer(_viewer_source(), Path(base_dir) / PACKAGED)


_scratch = tempfile.mkdtemp(prefix="gradtrace-build-")
atexit.register(shutil.rmtree, _scratch, ignore_errors=True)

setup(
    cmdclass={"build_py": BuildWithViewer, "sdist": SdistWithViewer},
    options={"build": {"build_base": _scratch}},
)
