"""The Sphinx directive and the MkDocs plugin: the example sites build, offline, as an author runs them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradtrace.docs_plugins.diagrams import DiagramOptions

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"
SPEC = EXAMPLES / "models" / "tiny-tanh.json"


def _build(kind: str, source: Path, out: Path) -> subprocess.CompletedProcess:
    if kind == "sphinx":
        cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", str(source), str(out)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-f",
            str(source / "mkdocs.yml"),
            "-d",
            str(out),
        ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=out.parent)


def _shown(page: Path) -> list[tuple[str, Path]]:
    """(tag, file) for every gradtrace diagram a built page shows, its src resolved from the page."""
    html = page.read_text()
    found = re.findall(r'<(img|iframe) class="gradtrace-[a-z]+" src="([^"]+)"', html)
    return [(tag, (page.parent / src).resolve()) for tag, src in found]


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    """What the example pages must show, drawn by the library itself from the same spec."""
    import gradtrace
    from gradtrace.render import diagram_svg, standalone_html

    trace = gradtrace.trace_spec(json.loads(SPEC.read_text()))
    return {
        "static": diagram_svg(trace),
        "animated": diagram_svg(trace, animated=True, phase="backward", theme="dark"),
        "player": standalone_html(trace, theme="light"),
    }


def _check_site(site: Path, home: str, guide: str, expected: dict[str, str]) -> None:
    home_diagrams = _shown(site / home)
    assert [tag for tag, _ in home_diagrams] == ["img", "img"]
    static, animated = (path.read_text() for _, path in home_diagrams)
    assert static == expected["static"] and animated == expected["animated"]
    ((tag, player),) = _shown(site / guide)
    assert tag == "iframe" and player.parent == (site / "_gradtrace").resolve()
    assert player.read_text() == expected["player"]


@pytest.mark.slow
def test_the_sphinx_example_site_builds(tmp_path: Path, expected: dict[str, str]) -> None:
    done = _build("sphinx", EXAMPLES / "sphinx", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    _check_site(tmp_path / "site", "index.html", "guide/player.html", expected)


@pytest.mark.slow
def test_the_mkdocs_example_site_builds(tmp_path: Path, expected: dict[str, str]) -> None:
    done = _build("mkdocs", EXAMPLES / "mkdocs", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    _check_site(tmp_path / "site", "index.html", "guide/player/index.html", expected)


@pytest.mark.slow
def test_a_saved_trace_draws_what_its_spec_draws(tmp_path: Path) -> None:
    import gradtrace

    source = tmp_path / "src"
    source.mkdir()
    gradtrace.trace_spec(json.loads(SPEC.read_text())).save(source / "saved.json")
    shutil.copy(SPEC, source / "spec.json")
    (source / "conf.py").write_text('extensions = ["gradtrace.docs_plugins.sphinx_ext"]\n')
    (source / "index.rst").write_text(
        "Saved\n=====\n\n.. gradtrace:: saved.json\n\n.. gradtrace:: /spec.json\n"
    )
    done = _build("sphinx", source, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    (_, from_trace), (_, from_spec) = _shown(tmp_path / "site" / "index.html")
    assert from_trace == from_spec  # files are named by content: the same picture, one file


@pytest.mark.slow
def test_mistakes_stop_the_build_and_say_where(tmp_path: Path) -> None:
    site = tmp_path / "mkdocs"
    shutil.copytree(EXAMPLES / "mkdocs", site)
    shutil.copytree(EXAMPLES / "models", tmp_path / "models")
    (site / "docs" / "index.md").write_text(
        "# Home\n\n```gradtrace\nsource: ../../models/tiny-tanh.json\ncolour: red\n```\n"
    )
    done = _build("mkdocs", site, tmp_path / "site")
    assert done.returncode != 0
    assert "gradtrace: index.md, line 3: unknown option(s) colour" in done.stderr

    bad = json.loads(SPEC.read_text())
    bad["forward"][1] = "y = out(z)"
    (tmp_path / "models" / "tiny-tanh.json").write_text(json.dumps(bad))
    (site / "docs" / "index.md").write_text(
        "# Home\n\n```gradtrace\nsource: ../../models/tiny-tanh.json\n```\n"
    )
    done = _build("mkdocs", site, tmp_path / "site")
    assert done.returncode != 0 and "invalid spec at /forward/1" in done.stderr and "'z'" in done.stderr


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"phase": "sideways"}, "phase must be one of forward, backward, both"),
        ({"format": "png"}, "format must be one of svg, html"),
        ({"animated": "yes"}, "animated must be true or false"),
        ({"height": True}, "height must be a whole number"),
        ({"height": 10}, "height must be a whole number"),
        ({"colour": "red"}, "unknown option(s) colour"),
    ],
)
def test_options_are_checked_by_name(given: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        DiagramOptions.from_mapping(given)


def test_a_missing_source_names_the_file(tmp_path: Path) -> None:
    from gradtrace.docs_plugins.diagrams import draw

    with pytest.raises(ValueError, match="cannot read .*nowhere.json"):
        draw(tmp_path / "nowhere.json", DiagramOptions())


def test_other_sphinx_builders_say_the_diagram_is_left_out(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "text",
        "-q",
        str(EXAMPLES / "sphinx"),
        str(tmp_path / "text"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0
    assert "index.rst:9: WARNING: gradtrace diagrams are shown by HTML builders only" in done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"spec_version": 1,', "is not JSON: Expecting"),
        ('{"schema_version": 2, "graph": {"nodes": 3}, "events": []}', "not a valid gradtrace trace"),
    ],
)
def test_a_broken_source_names_the_file_and_the_problem(tmp_path: Path, text: str, message: str) -> None:
    from gradtrace.docs_plugins.diagrams import draw

    source = tmp_path / "broken.json"
    source.write_text(text)
    with pytest.raises(ValueError, match=f"broken.json.*{message}"):
        draw(source, DiagramOptions())
