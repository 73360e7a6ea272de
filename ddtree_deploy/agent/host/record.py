"""The base of the protocol's typed records (wire.py, wire_results.py): frozen records read
strictly from JSON objects and written back as plain JSON. Stdlib only.

Deliberately not `dataclasses`: on python 3.11 the decorator writes and `exec`s five
functions per class, ≈ 1.3 ms a class on the 2-core bench box, and every agent process
defines 33 records (≈ 40 ms of its start, plus 10 ms to import dataclasses and inspect)
while the controller defines them at start-up too. A record's fields are read once from
its annotations (`__init_subclass__`) and one shared `__init__`, `__eq__`, `__hash__` and
`__repr__` serve every class, with the behaviour `@dataclass(frozen=True)` gave them:
keyword or positional construction, defaults, `field(default_factory=...)`, equality by
class and field values, no assignment after construction. Type checkers read the same
through `dataclass_transform` (PEP 681). bench/NOTES.md (session 12) has the numbers.
"""

from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Dict, Optional, Tuple, Type, TypeVar

if TYPE_CHECKING:  # the host's python may predate typing.dataclass_transform (3.11)
    from typing import dataclass_transform
else:

    def dataclass_transform(**_kwargs):
        """Run time: the decorator only informs type checkers."""
        return lambda cls: cls


R = TypeVar("R", bound="Record")


class WireError(ValueError):
    """A record that does not match its fields: the message names the place and key."""


class FrozenRecordError(AttributeError):
    """An assignment to a record's field after construction (records are frozen)."""


class _Factory:
    """A field default made anew for each record: `field(default_factory=list)`."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default `default_factory()` makes per record (a list, a dict)."""
    return _Factory(default_factory)


_MISSING = object()


def _is_class_var(annotation: Any) -> bool:
    """True for `ClassVar` / `ClassVar[...]`, also written as a string."""
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class Record:
    """Base of the typed records: strict `from_dict`, plain-JSON `to_dict`.

    A subclass declares its fields as annotated class attributes, in order, defaults last
    (a default is a plain value or `field(default_factory=...)`); fields of a record it
    extends come first. `NESTED` names fields holding records, as
    (field, record class, "one" | "list" | "map"); `OMIT_IF_NONE` names fields left out of
    `to_dict` when None (keys that older answers only carried when set).
    """

    NESTED: ClassVar[Tuple[Tuple[str, Any, str], ...]] = ()
    OMIT_IF_NONE: ClassVar[Tuple[str, ...]] = ()
    FIELDS: ClassVar[Tuple[str, ...]] = ()  # set per subclass: the field names, in order
    _DEFAULTS: ClassVar[Dict[str, Any]] = {}  # field -> default value or _Factory

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = list(cls.FIELDS)  # the record this one extends (Record's: none)
        defaults = dict(cls._DEFAULTS)
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if _is_class_var(annotation):
                continue
            if name not in names:
                names.append(name)
            if name in cls.__dict__:
                defaults[name] = cls.__dict__[name]
                if isinstance(defaults[name], _Factory):
                    delattr(cls, name)  # as dataclasses does: no shared mutable default
            elif name in defaults:
                del defaults[name]
        seen_default = None
        for name in names:
            if name in defaults:
                seen_default = name
            elif seen_default is not None:
                raise TypeError(
                    "%s: field %r without a default follows %r with one"
                    % (cls.__name__, name, seen_default)
                )
        cls.FIELDS, cls._DEFAULTS = tuple(names), defaults

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self.FIELDS
        if len(args) > len(fields):
            raise TypeError(
                "%s takes %d fields, %d given" % (type(self).__name__, len(fields), len(args))
            )
        values = {fields[i]: value for i, value in enumerate(args)}
        for name, value in kwargs.items():
            if name in values:
                raise TypeError("%s got field %r twice" % (type(self).__name__, name))
            if name not in fields:
                raise TypeError("%s has no field %r" % (type(self).__name__, name))
            values[name] = value
        for name in fields:
            value = values.get(name, _MISSING)
            if value is _MISSING:
                default = self._DEFAULTS.get(name, _MISSING)
                if default is _MISSING:
                    raise TypeError("%s: missing field %r" % (type(self).__name__, name))
                value = default.make() if isinstance(default, _Factory) else default
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenRecordError("cannot assign to field %r of a record" % (name,))

    def __delattr__(self, name: str) -> None:
        raise FrozenRecordError("cannot delete field %r of a record" % (name,))

    def _values(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join("%s=%r" % (name, getattr(self, name)) for name in self.FIELDS)
        return "%s(%s)" % (type(self).__name__, shown)

    def replace(self: R, **changes: Any) -> R:
        """A copy with `changes` applied (what `dataclasses.replace` did)."""
        values = {name: getattr(self, name) for name in self.FIELDS}
        unknown = sorted(set(changes) - set(values))
        if unknown:
            raise TypeError("%s has no field %r" % (type(self).__name__, unknown[0]))
        values.update(changes)
        return type(self)(**values)

    @classmethod
    def from_dict(cls: Type[R], raw: Any, where: Optional[str] = None) -> R:
        """Return an instance built from a JSON object; raises WireError naming `where`
        (default: the class name) and the first unknown or missing key."""
        where = where or cls.__name__
        if not isinstance(raw, dict):
            raise WireError("%s: expected an object, got %s" % (where, type(raw).__name__))
        unknown = sorted(k for k in raw if k not in cls.FIELDS)
        if unknown:
            raise WireError("%s: unknown key %r" % (where, unknown[0]))
        for name in cls.FIELDS:
            if name not in cls._DEFAULTS and name not in raw:
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
        for name in self.FIELDS:
            value = getattr(self, name)
            if value is None and name in self.OMIT_IF_NONE:
                continue
            out[name] = _plain(value)
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
