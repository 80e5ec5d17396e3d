"""After the schema refuses parts of a spec: set them aside so the rest can still be checked.

parse_spec validates a document with pydantic; when that fails, each refused part is set aside
(a module, an input, a hook, a step, a retain_grad entry, a malformed optional field) and the
rest goes through the semantic checks too, so every mistake of a spec is reported in one answer.
Gaps describes what was set aside: later checks do not report what follows from it (a call to a
module whose type is unknown, one of its parameters, a name a refused step assigns). A refused
forward program or spec_version stops here: nothing checked after them could be trusted.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import pointer
from .program import assigned_names

# Top-level fields whose refused value can be dropped: the default takes its place.
_DEFAULTED = frozenset({"title", "description", "seed", "dtype"})
_KNOWN = _DEFAULTED | {"spec_version", "modules", "inputs", "forward", "hooks", "retain_grad", "steps"}
# Schema-valid stand-ins that keep a refused list entry's index (the checks skip their pointer).
_STAND_INS: dict[str, Any] = {
    "hooks": {"type": "tensor", "tensor": "x"},
    "steps": {"do": "zero_grad"},
    "retain_grad": "x",
}
_DEFINE_NOTHING = frozenset({"backward", "zero_grad", "sgd_step"})


@dataclass
class Gaps:
    """What the schema refused, for the checks that run on the rest."""

    modules: set[str] = field(default_factory=set)  # dotted paths of refused modules
    inputs: set[str] = field(default_factory=set)  # refused inputs: still tensors, of unknown kind
    skip: set[str] = field(default_factory=set)  # pointers of refused hooks, steps, retain_grad entries
    names: set[str] = field(default_factory=set)  # tensor names refused steps seem to assign
    any_name: bool = False  # a refused part assigns names that cannot be told

    def unknown_name(self, name: str) -> bool:
        """Whether a tensor name or parameter reference may be defined by a refused part."""
        if self.any_name or name in self.names or name in self.inputs:
            return True
        owner, _, _ = name.rpartition(".")
        return bool(owner) and self.unknown_module(owner)

    def unknown_module(self, path: str) -> bool:
        """Whether a module path is a refused module or lies inside one."""
        return any(path == m or path.startswith(m + ".") for m in self.modules)

    def note_step(self, raw: Any) -> None:
        """A refused step: the names it would assign (its `as`, its program's targets)."""
        if not isinstance(raw, dict) or raw.get("do") in _DEFINE_NOTHING:
            return
        results = raw.get("as")
        if isinstance(results, list):
            self.names |= {n for n in results if isinstance(n, str)}
        lines = raw.get("program")
        for line in lines if isinstance(lines, list) else ():
            guessed = assigned_names(line) if isinstance(line, str) else None
            if guessed is None:
                self.any_name = True
            else:
                self.names |= set(guessed)


def set_aside(data: dict[str, Any], locations: Sequence[Sequence[Any]]) -> tuple[dict[str, Any], Gaps] | None:
    """The document without the parts at ``locations`` (paths of refused values, as lists of
    keys), and what those parts were; None when what is left cannot be checked meaningfully."""
    doc = copy.deepcopy(data)
    gaps = Gaps()
    slots: set[tuple[str, ...]] = set()
    for parts in locations:
        head = parts[0] if parts else None
        if head in _DEFAULTED:
            doc.pop(head, None)
        elif head == "spec_version" and "spec_version" not in data:
            doc["spec_version"] = 1  # forgotten, not another version: check the rest as version 1
        elif head in ("modules", "inputs") and len(parts) >= 2:
            if head == "modules":
                slots.add(_module_slot(data["modules"], parts[1:]))
            else:
                gaps.inputs.add(parts[1])
                doc["inputs"].pop(parts[1], None)
        elif head in _STAND_INS:
            _set_aside_entry(doc, data, head, parts[1] if len(parts) >= 2 else None, gaps)
        elif head is None or head in _KNOWN:
            return None  # the forward program, spec_version, a whole map: the rest depends on it
        else:
            doc.pop(head, None)  # an unknown top-level field
    for slot in sorted(slots, key=len):
        if not any(slot[: len(s)] == s for s in slots if len(s) < len(slot)):
            _remove_module(doc["modules"], slot)
            gaps.modules.add(".".join(slot))
    return doc, gaps


def _set_aside_entry(doc: dict[str, Any], data: dict[str, Any], head: str, index: Any, gaps: Gaps) -> None:
    """A refused hook, step or retain_grad entry (or the whole list, when ``index`` is None)."""
    if index is None or not isinstance(doc.get(head), list):
        doc.pop(head, None)
        gaps.any_name = gaps.any_name or head == "steps"
        return
    gaps.skip.add(pointer(head, index))
    doc[head][index] = copy.deepcopy(_STAND_INS[head])
    if head == "steps":
        gaps.note_step(data["steps"][index])


def _module_slot(modules: dict[str, Any], parts: Sequence[Any]) -> tuple[str, ...]:
    """The module a refused value belongs to: the deepest composite child on its path."""
    slot = [parts[0]]
    node, rest = modules.get(parts[0]), list(parts[1:])
    while (
        len(rest) >= 2
        and rest[0] == "modules"
        and isinstance(node, dict)
        and isinstance(node.get("modules"), dict)
        and rest[1] in node["modules"]
    ):
        slot.append(rest[1])
        node, rest = node["modules"][rest[1]], rest[2:]
    return tuple(slot)


def _remove_module(modules: dict[str, Any], slot: tuple[str, ...]) -> None:
    for name in slot[:-1]:
        modules = modules[name]["modules"]
    modules.pop(slot[-1], None)
