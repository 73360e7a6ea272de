"""A mypy plugin: `.get("key")` on one of our TypedDicts must name one of its keys.

mypy lets `TypedDict.get` take any string (PEP 589 allows it, for introspection) and types
an unknown key's value `object`, so a misspelled key such as `result.details.get("wvae")`
would pass `make lint` and read None in every report. This plugin makes it the error that
`result.details["wvae"]` already is, for the TypedDicts defined in ddtree_deploy, then lets
mypy's own hook type the value. Loaded by pyproject's [tool.mypy] `plugins`; checkout-only,
like the rest of devtools/ (tests/test_results_typecheck.py proves it).
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.errorcodes import TYPEDDICT_ITEM
from mypy.nodes import StrExpr
from mypy.plugin import MethodContext, Plugin
from mypy.plugins.default import typed_dict_get_callback
from mypy.types import Type, TypedDictType

PACKAGE = "ddtree_deploy."
GET = "typing.Mapping.get"  # the name mypy's own TypedDict.get hook is registered under


class TypedDictKeysPlugin(Plugin):
    """Checks the literal key of `.get` on the package's TypedDicts."""

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        """Our hook for `Mapping.get` (it replaces mypy's, and calls it); none for others."""
        return check_get_key if fullname == GET else None


def check_get_key(ctx: MethodContext) -> Type:
    """Report `.get("key")` on a package TypedDict without that key; return the value's
    type as mypy's default plugin infers it."""
    typed = ctx.type
    key = ctx.args[0][0] if ctx.args and len(ctx.args[0]) == 1 else None
    if (
        isinstance(typed, TypedDictType)
        and isinstance(key, StrExpr)
        and key.value not in typed.items
        and typed.fallback.type.fullname.startswith(PACKAGE)
    ):
        name = typed.fallback.type.name
        ctx.api.fail(
            f'TypedDict "{name}" has no key "{key.value}"', ctx.context, code=TYPEDDICT_ITEM
        )
    return typed_dict_get_callback(ctx)


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the plugin class (any mypy version; pyproject pins it)."""
    return TypedDictKeysPlugin
