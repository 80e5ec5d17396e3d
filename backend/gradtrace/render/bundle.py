"""A small ES-module bundler for the viewer's own code (plain relative imports, no packages).

Standalone HTML files and notebook outputs carry the player inline, so they work offline and
from file:// (browsers refuse to load module files from there). Each module becomes a function
scope returning its exports, in dependency order. It understands exactly these forms and
refuses anything else by name, rather than guessing:

    import { a, b as c } from "./x.js";   import * as ns from "./x.js";   import d from "./x.js";
    export function f / async function / class / const|let|var name = …;
    export { a, b as c };   export default <expr>;
    import("./x.js")  (a literal relative path: bundled eagerly, the call becomes a resolved
                       promise of the module's exports)

Python, not Node: writing an HTML player needs no JavaScript runtime.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

_IMPORT = re.compile(r"""^import\s+([\s\S]*?)\s+from\s+["']([^"']+)["'];?[ \t]*$""", re.M)
_BARE_IMPORT = re.compile(r"""^import\s+["'][^"']+["'];?""", re.M)
_EXPORT_DECL = re.compile(
    r"^export\s+(async\s+function\*?|function\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)", re.M
)
_EXPORT_LIST = re.compile(r"^export\s*\{([^}]*)\}\s*;?[ \t]*$", re.M)
_EXPORT_DEFAULT = re.compile(r"^export\s+default\s+", re.M)
_DYNAMIC_IMPORT = re.compile(r"""\bimport\(\s*["'](\.[^"']+)["']\s*\)""")
_SPECIFIER = re.compile(r"^([\w$]+)(?:\s+as\s+([\w$]+))?$")


class BundleError(ValueError):
    """The code uses a module form this bundler does not handle (named in the message)."""


def _bindings(clause: str, file: str, module_var: str) -> list[str]:
    """``d``, ``* as ns``, ``{ a, b as c }``, ``d, { a }`` as const declarations."""
    rest = clause.strip()
    ns = re.fullmatch(r"\*\s+as\s+([\w$]+)", rest)
    if ns:
        return [f"const {ns.group(1)} = {module_var};"]
    out = []
    default = re.fullmatch(r"([\w$]+)\s*(,\s*([\s\S]*))?", rest)
    if default:
        out.append(f"const {default.group(1)} = {module_var}.default;")
        rest = (default.group(3) or "").strip()
        if not rest:
            return out
    named = re.fullmatch(r"\{([\s\S]*)\}", rest)
    if not named:
        raise BundleError(f'{file}: unsupported import form "import {clause} from …"')
    parts = []
    for spec in filter(None, (s.strip() for s in named.group(1).split(","))):
        m = _SPECIFIER.match(spec)
        if not m:
            raise BundleError(f'{file}: unsupported import specifier "{spec}"')
        parts.append(f"{m.group(1)}: {m.group(2)}" if m.group(2) else m.group(1))
    out.append(f"const {{ {', '.join(parts)} }} = {module_var};")
    return out


def _transform(file: str, source: str, var_of: Callable[[str], str]) -> str:
    if _BARE_IMPORT.search(source):
        raise BundleError(f"{file}: side-effect imports are not supported")
    if re.search(r"\bimport\s*\(", _DYNAMIC_IMPORT.sub("", source)):
        raise BundleError(f"{file}: dynamic import() needs a literal relative path to be bundled")
    if re.search(r"\bimport\.meta\b", source):
        raise BundleError(f"{file}: import.meta is not supported")
    if re.search(r"^export\s*\*", source, re.M) or re.search(r"^export\s*\{[^}]*\}\s*from", source, re.M):
        raise BundleError(f"{file}: re-exports are not supported")
    header: list[str] = []

    def imported(m: re.Match[str]) -> str:
        header.extend(_bindings(m.group(1), file, var_of(m.group(2))))
        return ""

    code = _IMPORT.sub(imported, source)
    code = _DYNAMIC_IMPORT.sub(lambda m: f"Promise.resolve({var_of(m.group(1))})", code)
    exported: list[tuple[str, str]] = []

    def declared(m: re.Match[str]) -> str:
        exported.append((m.group(2), m.group(2)))
        return f"{m.group(1)} {m.group(2)}"

    def listed(m: re.Match[str]) -> str:
        for spec in filter(None, (s.strip() for s in m.group(1).split(","))):
            s = _SPECIFIER.match(spec)
            if not s:
                raise BundleError(f'{file}: unsupported export specifier "{spec}"')
            exported.append((s.group(2) or s.group(1), s.group(1)))
        return ""

    code = _EXPORT_DECL.sub(declared, code)
    code = _EXPORT_LIST.sub(listed, code)
    if _EXPORT_DEFAULT.search(code):
        code = _EXPORT_DEFAULT.sub("const __default = ", code, count=1)
        exported.append(("default", "__default"))
    leftover = re.search(r"^export\b.*$", code, re.M)
    if leftover:
        raise BundleError(f'{file}: unsupported export form at "{leftover.group(0)}"')
    names = ", ".join(name if name == local else f"{name}: {local}" for name, local in exported)
    return f"{chr(10).join(header)}\n{code}\nreturn {{ {names} }};"


def bundle(entry: Path) -> str:
    """``entry`` and its relative imports as one script (a string) that runs the entry."""
    entry = entry.resolve()
    root = entry.parent
    order: list[tuple[Path, str]] = []
    ids: dict[Path, str] = {}
    visiting: set[Path] = set()

    def name(path: Path) -> str:
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    def visit(file: Path, importer: Path | None) -> None:
        if file in ids:
            return
        if file in visiting:
            raise BundleError(f"import cycle through {name(file)} (from {name(importer or file)})")
        visiting.add(file)
        try:
            source = file.read_text(encoding="utf-8")
        except OSError as exc:
            by = f" (imported by {name(importer)})" if importer else ""
            raise BundleError(f"cannot read {name(file)}{by}") from exc
        deps = [m.group(2) for m in _IMPORT.finditer(source)] + _DYNAMIC_IMPORT.findall(source)
        for spec in deps:
            if not spec.startswith("."):
                raise BundleError(f'{name(file)}: only relative imports can be bundled (got "{spec}")')
            visit((file.parent / spec).resolve(), file)
        visiting.discard(file)
        ids[file] = f"__m{len(ids)}"
        order.append((file, source))

    visit(entry, None)
    parts = []
    for file, source in order:

        def resolve(spec: str, f: Path = file) -> str:
            return ids[(f.parent / spec).resolve()]

        body = _transform(name(file), source, resolve)
        parts.append(f"// ---- {name(file)}\nconst {ids[file]} = (() => {{\n{body}\n}})();")
    return '"use strict";\n' + "\n".join(parts) + "\n"
