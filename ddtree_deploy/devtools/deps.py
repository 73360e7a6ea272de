"""Prove the package's layering from its imports: `python -m ddtree_deploy.devtools.deps`.

Reads every module with the standard library's `ast` (nothing is imported or run).

Rooms are the top-level packages and modules of `ddtree_deploy/`. `ALLOWED` is the one table of
which rooms each room may import; the layers read top to bottom:

    cli -> fleet -> pipeline -> stages / transport / patchset / inventory -> gate -> agent protocol

with report/ (output) beside cli, and events, errors, results and lazy (the PEP 562 helper)
as leaves anyone may use. `ALLOWED_MODULES` names the few single modules a room may import
from a room it may not import as a whole: report/ reads the protocol's names (journal
states, op names) from agent/host/wire.py, their one definition, and nothing else of agent/.
Besides the table: only cli/ imports typer, only cli/ and report/ import rich, only gate/
imports prometheus_client, the agent's host code imports only the standard library and its
siblings (it runs on the host's bare python), and no product module imports the test sandbox
(`ddtree_deploy.sandbox`, `ddtree_sandbox`).

Prints one `file:line: message` per violation and exits 1 if there is any, else 0.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "ddtree_deploy"
LEAVES = frozenset({"events", "errors", "results", "lazy"})

# Room -> the rooms it may import (besides itself and the package root, which holds only
# metadata such as __version__). Nothing may import cli but __main__.
ALLOWED: dict[str, frozenset[str]] = {
    "__init__": frozenset(),
    "__main__": frozenset({"cli"}),
    "cli": frozenset(
        {
            "export",
            "fleet",
            "report",
            "pipeline",
            "stages",
            "transport",
            "patchset",
            "inventory",
            "gate",
            "agent",
        }
    )
    | LEAVES,
    "report": LEAVES,
    "fleet": frozenset(
        {"pipeline", "stages", "transport", "patchset", "inventory", "gate", "agent"}
    )
    | LEAVES,
    "pipeline": frozenset({"stages", "transport", "patchset", "inventory", "gate", "agent"})
    | LEAVES,
    "stages": frozenset({"transport", "patchset", "inventory", "gate", "agent"}) | LEAVES,
    # export/: a patchset as an OCI image, Kubernetes manifests, a Slurm bind-mount dir
    "export": frozenset({"stages", "patchset", "gate", "agent"}) | LEAVES,
    "transport": frozenset({"inventory", "agent"}) | LEAVES,
    "inventory": frozenset({"patchset", "gate"}) | LEAVES,
    "patchset": frozenset({"gate", "agent"}) | LEAVES,
    "gate": frozenset({"agent"}) | LEAVES,
    "agent": LEAVES,
    "events": frozenset(),
    "errors": frozenset(),
    "lazy": frozenset(),  # the PEP 562 helper package __init__ modules use
    # a result carries its stage records; its details name the agent's state records (types)
    "results": frozenset({"events", "agent"}),
    # devtools/: checkout-only tools, never in the wheel; the inventory page reads the models
    "devtools": frozenset({"inventory", "gate", "patchset"}) | LEAVES,
}
# Room -> single modules (with the names in them) it may import although ALLOWED does not
# give it their room: the agent protocol's shared names (wire.py: JournalState, OpName,
# Code; stdlib only, no models, no ops) for report/, which shows journal states.
ALLOWED_MODULES: dict[str, frozenset[str]] = {
    "report": frozenset({f"{PACKAGE}.agent.host.wire"}),
}
# Third-party packages only some rooms may import.
ONLY_IN: dict[str, frozenset[str]] = {
    "typer": frozenset({"cli"}),
    "click": frozenset({"cli"}),
    "rich": frozenset({"cli", "report"}),
    "prometheus_client": frozenset({"gate"}),
}
FORBIDDEN = ("ddtree_deploy.sandbox", "ddtree_sandbox")
# Code that runs on the host's python: the standard library only.
STDLIB_ONLY = ("agent/host/",)
SKIPPED = ("sandbox/",)


@dataclass(frozen=True)
class Violation:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def room_of(relative: Path) -> str:
    """The room of a file, from its path relative to the package: `cli`, `events`, `__main__`."""
    return relative.parts[0].removesuffix(".py")


def imported_modules(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute name) of everything `tree` imports, relative imports resolved.

    `from a.b import c` yields `a.b.c`, so `from ddtree_deploy import cli` names the cli room.
    `module` is the dotted name of the file; `is_package` when it is an `__init__.py`.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            parts = module.split(".")
            if node.level:
                parts = parts[: len(parts) - node.level + (1 if is_package else 0)]
            else:
                parts = []
            if node.module:
                parts.append(node.module)
            for alias in node.names:
                yield node.lineno, ".".join([*parts, alias.name])


def check_file(root: Path, path: Path) -> list[Violation]:
    """The violations of one file under `root` (the package folder)."""
    relative = path.relative_to(root)
    room = room_of(relative)
    is_package = path.name == "__init__.py"
    dotted = [root.name, *relative.with_suffix("").parts]
    module = ".".join(dotted[:-1] if is_package else dotted)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    stdlib_only = any(relative.as_posix().startswith(p) for p in STDLIB_ONLY)
    found: list[Violation] = []
    for line, name in imported_modules(tree, module, is_package):
        top = name.split(".")[0]
        if name.startswith(FORBIDDEN) or top == "ddtree_sandbox":
            found.append(Violation(path, line, f"{room} imports the test sandbox ({name})"))
        elif top == root.name:
            target = _target_room(root, name)
            if stdlib_only and name.startswith(f"{root.name}.agent.host."):
                continue  # a sibling: the bundle carries every agent/host module
            if stdlib_only:
                found.append(Violation(path, line, f"agent host code imports {name}: stdlib only"))
            elif room not in ALLOWED:
                found.append(Violation(path, line, f"room {room} is not in the ALLOWED table"))
            elif target not in (room, "__init__") and target not in ALLOWED[room]:
                if _single_module_allowed(room, name):
                    continue
                found.append(Violation(path, line, f"{room} may not import {target} ({name})"))
        elif stdlib_only and top not in sys.stdlib_module_names:
            found.append(Violation(path, line, f"agent host code imports {name}: stdlib only"))
        elif top in ONLY_IN and room not in ONLY_IN[top]:
            allowed = "/".join(sorted(ONLY_IN[top]))
            found.append(Violation(path, line, f"{room} imports {top}: only {allowed} may"))
    return found


def _single_module_allowed(room: str, name: str) -> bool:
    """Whether `name` (a module, or a name imported from one) is in ALLOWED_MODULES[room]."""
    return any(
        name == module or name.startswith(f"{module}.") for module in ALLOWED_MODULES.get(room, ())
    )


def _target_room(root: Path, name: str) -> str:
    """The room `name` (`ddtree_deploy.x...`) lies in; `__init__` for the package's own names."""
    parts = name.split(".")
    if len(parts) > 1 and ((root / parts[1]).is_dir() or (root / f"{parts[1]}.py").is_file()):
        return parts[1]
    return "__init__"


def _scanned(root: Path) -> list[Path]:
    """Every module under `root` but the skipped folders, in a stable order."""
    paths = sorted(root.rglob("*.py"))
    return [p for p in paths if not p.relative_to(root).as_posix().startswith(SKIPPED)]


def check_tree(root: Path) -> list[Violation]:
    """The violations of every module under `root` (the package folder), file by file."""
    return [v for path in _scanned(root) for v in check_file(root, path)]


def main(argv: list[str] | None = None) -> int:
    """Check the package folder (default: this installed `ddtree_deploy`); 1 on any violation."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    violations = check_tree(root)
    for violation in violations:
        print(violation)
    scanned = len(_scanned(root))
    verdict = f"{len(violations)} violation(s)" if violations else "layering ok"
    print(f"{root}: {verdict} ({scanned} files)", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
