"""Sphinx builds fail on a gradtrace mistake, as MkDocs builds do (issue 24, item 6): a bad
option or a missing source is an ERROR naming the page and line, and ``sphinx-build`` exits
non-zero, on this build and the next, until it is fixed; ``gradtrace_warn_only`` makes it a
warning. Real ``sphinx-build`` runs in a temporary directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytestmark = pytest.mark.slow

SPEC = Path(__file__).resolve().parents[2] / "docs" / "examples" / "models" / "tiny-tanh.json"
CONF = 'extensions = ["gradtrace.docs_plugins.sphinx_ext"]\n'


def site(tmp_path: Path, page: str, conf: str = CONF) -> Path:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    shutil.copy(SPEC, source / "model.json")
    (source / "conf.py").write_text(conf)
    (source / "index.rst").write_text("Home\n====\n\n" + page)
    return source


def build(source: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    out = source.parent / "out"
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", *extra, str(source), str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_a_bad_option_and_a_missing_file_fail_the_build_until_fixed(tmp_path: Path) -> None:
    source = site(
        tmp_path,
        ".. gradtrace:: model.json\n   :phase: sideways\n\n"
        ".. gradtrace:: nowhere.json\n\n"
        ".. gradtrace:: model.json\n   :colour: red\n\n"
        ".. gradtrace:: model.json\n   :animated: yes\n",
    )
    done = build(source)
    assert done.returncode == 1, done.stderr
    page = source / "index.rst"
    for line, message in [
        (4, "phase must be one of forward, backward, both, not 'sideways'"),
        (7, "cannot read"),
        (9, "unknown option(s) :colour: (use :alt:, :animated:"),
        (12, ":animated: is a flag, written alone (got 'yes')"),
    ]:
        assert f"{page}:{line}: ERROR: gradtrace: {message}" in done.stderr
    assert "4 diagram(s) could not be drawn: the build failed" in done.stderr
    # Nothing changed: Sphinx would not read the page again, but a failed page is.
    again = build(source)
    assert again.returncode == 1 and "nowhere.json" in again.stderr
    # Fixed: the build succeeds and the page shows the diagram.
    (source / "index.rst").write_text("Home\n====\n\n.. gradtrace:: model.json\n   :phase: backward\n")
    fixed = build(source, "-W")
    assert fixed.returncode == 0, fixed.stderr
    assert '<img class="gradtrace-diagram"' in (source.parent / "out" / "index.html").read_text()


def test_a_missing_argument_or_content_is_a_mistake_too(tmp_path: Path) -> None:
    source = site(tmp_path, ".. gradtrace::\n\n.. gradtrace:: model.json\n\n   some content\n")
    done = build(source)
    assert done.returncode == 1
    assert "index.rst:4: ERROR: gradtrace: the directive needs the spec or trace JSON" in done.stderr
    assert "index.rst:6: ERROR: gradtrace: the directive takes no content" in done.stderr


def test_warn_only_makes_mistakes_warnings(tmp_path: Path) -> None:
    source = site(
        tmp_path,
        ".. gradtrace:: nowhere.json\n\n.. gradtrace:: model.json\n",
        conf=CONF + "gradtrace_warn_only = True\n",
    )
    done = build(source)
    assert done.returncode == 0, done.stderr
    assert "index.rst:4: WARNING: gradtrace: cannot read" in done.stderr
    html = (source.parent / "out" / "index.html").read_text()
    assert html.count('<img class="gradtrace-diagram"') == 1  # the good one is drawn
    assert build(source, "-W", "-E").returncode != 0  # -W: warnings are errors, as usual
