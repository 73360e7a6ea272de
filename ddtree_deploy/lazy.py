"""Package re-exports loaded on first use (PEP 562 module ``__getattr__``).

A package ``__init__`` that imports every submodule makes importing any one of them pay for
all: `inventory` needs `gate.settings`, and an eager `gate/__init__` would load the gate's
comparisons with it. Packages whose re-exports are heavy list them here instead, by home
module; type checkers read the same names from an ``if TYPE_CHECKING:`` block beside the
table (tests/test_lazy_exports.py checks that the two agree and that nothing loads early).
Why it matters: the CLI opens its first hosts' connections before it loads the modules it
needs only after that (fleet/ahead.py), so everything loaded before is start-up on the
critical path.
"""

from __future__ import annotations

import importlib
import sys
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
