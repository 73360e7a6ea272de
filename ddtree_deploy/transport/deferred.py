"""Stand-ins that import a module on its first use instead of when it is first named.

Why: Paramiko's ssh_config reader does ``import invoke`` when Paramiko is imported, only to
run the command of a ``Match exec`` line. Invoke pulls in its vendored YAML, unittest.mock
and more: about half of Paramiko's import (65 of 134 ms on a quiet machine with pydantic,
Rich and Typer already loaded), paid by every command that connects, before its first event,
while almost no ssh_config has a ``Match exec`` line.

`defer_import("invoke")` puts a `Deferred` module under that name in ``sys.modules`` before
Paramiko is imported. Paramiko's ``import invoke`` then binds the stand-in; the first
attribute read on it (``invoke.run`` when a ``Match exec`` line is evaluated, or anyone's
``from invoke import ...``) imports the real module, puts it back under its name and answers
from it. A module that is not installed gets no stand-in, so ``import`` fails as before.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any


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
