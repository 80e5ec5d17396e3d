"""Checks shared by the diagram/export tests: real traces of the examples, self-contained SVGs."""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from typing import Any

import gradtrace
from gradtrace.examples import get_example

SVG_NS = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"


@functools.cache
def example_trace(example_id: str) -> gradtrace.Trace:
    return gradtrace.trace_spec(get_example(example_id))


def assert_self_contained_svg(svg: str) -> ET.Element:
    """Parses as XML; no script, no foreignObject, no reference leaving the document."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG_NS}svg"
    for el in root.iter():
        tag = el.tag.removeprefix(SVG_NS)
        assert tag not in ("script", "foreignObject", "iframe", "image"), f"<{tag}> in the SVG"
        for name, value in el.attrib.items():
            assert not name.startswith("on"), f"event handler attribute {name}"
            if name in ("href", XLINK_HREF, "src"):
                assert value.startswith("#"), f"external reference {name}={value!r}"
            if "url(" in value:
                assert all(u.startswith("#") for u in re.findall(r"url\(\s*['\"]?([^)'\"]*)", value)), value
    css = "".join(s.text or "" for s in root.iter(f"{SVG_NS}style"))
    assert "@import" not in css
    for target in re.findall(r"url\(\s*['\"]?([^)'\"]*)", css):
        assert target.startswith("#"), f"CSS url({target}) leaves the document"
    assert "javascript:" not in svg.lower()
    return root


def drawn_node_ids(root: ET.Element) -> set[str]:
    return {
        el.attrib["data-node-id"]
        for el in root.iter(f"{SVG_NS}g")
        if "gt-node" in el.attrib.get("class", "").split() and "data-node-id" in el.attrib
    }


def trace_dict(trace: Any) -> dict[str, Any]:
    return trace.to_dict()
