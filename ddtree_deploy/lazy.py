"""Modules loaded on first use: package re-exports (PEP 562 module ``__getattr__``), and
stand-ins in ``sys.modules`` that the console script asks for (`defer_invoke`).

A package ``__init__`` that imports every submodule makes importing any one of them pay for
all: `inventory` needs `gate.settings`, and an eager `gate/__init__` would load the gate's
comparisons with it. Packages whose re-exports are heavy list them here instead, by home
module; type checkers read the same names from an ``if TYPE_CHECKING:`` block beside the
table (tests/test_lazy_exports.py checks that the two agree and that nothing loads early).
Why it matters: the CLI opens its first hosts' connections before it loads the modules it
needs only after that (fleet/ahead.py), so everything loaded before is start-up on the
critical path.

Stand-ins. Paramiko's ssh_config reader does ``import invoke`` when Paramiko is imported,
only to run the command of a ``Match exec`` line; Invoke pulls in its vendored YAML,
unittest.mock and more: about half of Paramiko's import, paid by every command that
connects, before its first event (bench/NOTES.md has the numbers), while almost no
ssh_config has a ``Match exec`` line. `defer_import("invoke")` puts a `Deferred` module
under that name in ``sys.modules``; Paramiko's ``import invoke`` then binds the stand-in,
and the first attribute read on it (``invoke.run`` when a ``Match exec`` line is evaluated,
or anyone's ``from invoke import ...``) imports the real module, puts it back under its
name and answers from it. A process-wide change: only `cli.main` (the console script) makes
it, never an import, so a library caller's own Fabric or Invoke is left alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of `package`: a name listed under its home submodule in `homes`
    ({submodule: names}) is imported from there when first asked for, then kept on the
    package; any other name raises AttributeError as a plain module would."""
    home_of = {name: home for home, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        """A lazily re-exported name, imported from its home module (see lazy_exports)."""
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    __getattr__.homes = home_of  # type: ignore[attr-defined]  # {name: home}, for the tests
    return __getattr__


class Deferred(types.ModuleType):
    """The stand-in for a module not imported yet: any attribute it lacks is read from the
    real module, which the first such read imports (once, whichever thread asks first).

    Raises what the real import raises (ImportError for a broken install), at that read.
    """

    def __init__(self, name: str):
        super().__init__(name, f"stand-in for {name}, imported on first use")
        self._deferred_lock = threading.Lock()
        self._deferred_real: types.ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.loaded(), attribute)

    def loaded(self) -> types.ModuleType:
        """The real module, imported now if this is the first use."""
        with self._deferred_lock:
            if self._deferred_real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]  # let the import system load the real one
                self._deferred_real = importlib.import_module(self.__name__)
            return self._deferred_real


def defer_import(name: str) -> bool:
    """Put a `Deferred` stand-in for top-level module `name` in ``sys.modules``; return
    whether one was put there (not when the module is already imported or not installed)."""
    if name in sys.modules or importlib.util.find_spec(name) is None:
        return False
    sys.modules[name] = Deferred(name)
    return True


def defer_invoke() -> bool:
    """The console script's stand-in for Invoke (see above), put in place unless Paramiko
    is loaded already (its ``import invoke`` has run: too late); return whether it was."""
    if "paramiko" in sys.modules:  # every Paramiko import of the package is in transport/
        return False
    return defer_import("invoke")
