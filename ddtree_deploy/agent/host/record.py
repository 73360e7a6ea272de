"""The base of the protocol's typed records (wire.py, wire_results.py): dataclasses read
strictly from JSON objects and written back as plain JSON. Stdlib only."""

import dataclasses
from enum import Enum
from typing import Any, ClassVar, Dict, Optional, Tuple, Type, TypeVar

R = TypeVar("R", bound="Record")


class WireError(ValueError):
    """A record that does not match its dataclass: the message names the place and key."""


class Record:
    """Base of the typed records: strict `from_dict`, plain-JSON `to_dict`.

    A subclass is a dataclass; `NESTED` names fields holding records, as
    (field, record class, "one" | "list" | "map"); `OMIT_IF_NONE` names fields left out of
    `to_dict` when None (keys that older answers only carried when set).
    """

    NESTED: ClassVar[Tuple[Tuple[str, Any, str], ...]] = ()
    OMIT_IF_NONE: ClassVar[Tuple[str, ...]] = ()
    # Declared for the type checker (every subclass is a dataclass, which sets it): makes
    # Record a dataclasses.fields() argument.
    __dataclass_fields__: ClassVar[Dict[str, "dataclasses.Field[Any]"]]

    @classmethod
    def from_dict(cls: Type[R], raw: Any, where: Optional[str] = None) -> R:
        """Return an instance built from a JSON object; raises WireError naming `where`
        (default: the class name) and the first unknown or missing key."""
        where = where or cls.__name__
        if not isinstance(raw, dict):
            raise WireError("%s: expected an object, got %s" % (where, type(raw).__name__))
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in raw if k not in known)
        if unknown:
            raise WireError("%s: unknown key %r" % (where, unknown[0]))
        for name, field in known.items():
            required = field.default is dataclasses.MISSING
            if required and field.default_factory is dataclasses.MISSING and name not in raw:
                raise WireError("%s: missing key %r" % (where, name))
        values = dict(raw)
        for name, record, shape in cls.NESTED:
            value = values.get(name)
            if value is None:
                continue
            inner = "%s.%s" % (where, name)
            if shape == "one":
                values[name] = record.from_dict(value, inner)
            elif shape == "list":
                values[name] = [
                    record.from_dict(v, "%s[%d]" % (inner, i)) for i, v in enumerate(value)
                ]
            else:
                values[name] = {
                    k: record.from_dict(v, "%s[%r]" % (inner, k)) for k, v in value.items()
                }
        return cls(**values)

    def to_dict(self) -> Dict[str, Any]:
        """Return the record as a JSON-ready dict (nested records as dicts too)."""
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name in self.OMIT_IF_NONE:
                continue
            out[field.name] = _plain(value)
        return out


def _plain(value):
    """Return `value` with every Record, tuple and Enum turned into JSON-ready values."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
