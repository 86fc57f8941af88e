"""Base classes of mosaic's typed messages, the type-tag registry, and field validation.

Every concrete message or record is a ``@dataclass(frozen=True, slots=True)`` that derives from
:class:`Request`, :class:`Response`, :class:`Notice` or :class:`Record`. Defining the class
registers it under its class name, which is its type tag on the wire. A message is validated
against its annotations when it is constructed and when it is decoded, so a message object always
holds what its annotations promise (``tuple`` fields hold tuples, even when built from lists).

Why one file of this length: the registry, the compiled field checkers and the decoder they
serve are one mechanism; the checkers are built once per class and kept together with it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, Union

from mosaic.core.errors import MessageFieldError, UnknownMessageType
from mosaic.core.frozen import fast_init

__all__ = ["Message", "Notice", "Record", "Request", "Response", "lookup", "registered"]

# A checker maps a value to its normalised form (a list becomes a tuple for a ``tuple`` field),
# or to _BAD when the value does not fit the annotation. Returning a sentinel instead of raising
# keeps the common path free of try/except.
_BAD: Any = object()
_MISSING: Any = object()
_Checker = Callable[[Any], Any]
# For annotations that one isinstance call decides: (types, whether bool is rejected).
_Simple = tuple[Any, bool]


class _Field(NamedTuple):
    """How one field is validated."""

    name: str
    check: _Checker | None  # None: ``Any``, nothing to check
    expected: str  # the annotation as error messages show it
    simple: _Simple | None  # set when ``check`` is a single isinstance call


class _Schema(NamedTuple):
    """Everything mosaic derives once per class from its annotations."""

    fields: tuple[_Field, ...]
    names: tuple[str, ...]
    decode: Callable[[Any], Any]  # {field: value} -> validated instance
    validate: Callable[[Any], None]  # checks and normalises a constructed instance


_REGISTRY: dict[str, type[_Typed]] = {}
_SCHEMAS: dict[type, _Schema] = {}


class _Typed:
    """Behaviour shared by :class:`Message` and :class:`Record`: registration and validation."""

    __slots__ = ()

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not abstract:
            _register(cls)

    def __post_init__(self) -> None:
        # Runs from the dataclass __init__: every constructed message holds what its
        # annotations promise. Raises MessageFieldError naming the field otherwise.
        cls = type(self)
        (_SCHEMAS.get(cls) or schema(cls)).validate(self)


class Record(_Typed, abstract=True):
    """Base of typed values carried inside messages (for example :class:`SensorSpec`).

    A subclass must be a ``@dataclass(frozen=True, slots=True)``; its class name is its type tag,
    unique across all records and messages. The codec encodes a record nested anywhere in a value.
    """

    __slots__ = ()


class Message(_Typed, abstract=True):
    """Base of everything sent between mosaic components. Derive from a subclass, not this."""

    __slots__ = ()


class Request(Message, abstract=True):
    """A message that expects exactly one :class:`Response` (or an ``ErrorResponse``)."""

    __slots__ = ()


class Response(Message, abstract=True):
    """The answer to one :class:`Request`; its envelope repeats the request's correlation id."""

    __slots__ = ()


class Notice(Message, abstract=True):
    """A one-way message: nobody answers it."""

    __slots__ = ()


def lookup(tag: str) -> type[Message | Record]:
    """Return the message or record class registered under ``tag``.

    Raises :class:`~mosaic.core.errors.UnknownMessageType` when no class has that tag.
    """
    try:
        return _REGISTRY[tag]  # type: ignore[return-value]
    except (KeyError, TypeError):
        shown = repr(tag[:100]) if isinstance(tag, str) else f"<{type(tag).__name__}>"
        raise UnknownMessageType(
            f"unknown message type {shown}; both sides must import the module that defines it"
        ) from None


def registered() -> dict[str, type[Message | Record]]:
    """Return a copy of the registry: type tag to class, for every concrete class defined so far."""
    return dict(_REGISTRY)  # type: ignore[arg-type]


def _register(cls: type[_Typed]) -> None:
    tag = cls.__name__
    previous = _REGISTRY.get(tag)
    # ``@dataclass(slots=True)`` builds a second class from the first one; that second class
    # replaces the first under the same tag. Anything else with a taken name is a real clash.
    if previous is not None and not _is_slots_rebuild(previous, cls):
        raise TypeError(
            f"message type tag {tag!r} is already taken by "
            f"{previous.__module__}.{previous.__qualname__}; rename "
            f"{cls.__module__}.{cls.__qualname__}"
        )
    _REGISTRY[tag] = cls
    if "__slots__" in cls.__dict__ and "__dataclass_fields__" in cls.__dict__:
        _fast_init(cls)


def _fast_init(cls: type) -> None:
    """Give a registered frozen slots dataclass the faster ``__init__`` of
    :func:`~mosaic.core.frozen.fast_init`, which validates as :meth:`_Typed.__post_init__`
    does; a class with a ``__post_init__`` of its own keeps the dataclass's."""
    if all(klass.__dict__.get("__post_init__", _Typed.__post_init__) is _Typed.__post_init__
           for klass in cls.__mro__):
        fast_init(cls, _validate)


def _validate(instance: Any) -> None:
    cls = type(instance)
    (_SCHEMAS.get(cls) or schema(cls)).validate(instance)


def _is_slots_rebuild(previous: type, cls: type) -> bool:
    return (
        previous.__module__ == cls.__module__
        and previous.__qualname__ == cls.__qualname__
        and "__slots__" not in previous.__dict__
        and "__slots__" in cls.__dict__
        and "__dataclass_fields__" in cls.__dict__
    )


def schema(cls: type) -> _Schema:
    """Return the validation schema of a registered class, built once from its annotations.

    Raises ``TypeError`` if the class is not a frozen slots dataclass or uses an annotation the
    validator does not support.
    """
    found = _SCHEMAS.get(cls)
    if found is not None:
        return found
    params = cls.__dict__.get("__dataclass_params__")
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__} must be declared with "
            "@dataclass(frozen=True, slots=True)"
        )
    try:
        hints = typing.get_type_hints(cls)
    except NameError as exc:
        raise TypeError(
            f"cannot resolve the annotations of {cls.__qualname__} ({exc}); define field types "
            "at module level"
        ) from None
    table = []
    for field in dataclasses.fields(cls):
        try:
            check, expected, simple = _checker(hints[field.name])
        except TypeError as exc:
            raise TypeError(f"{cls.__qualname__}.{field.name}: {exc}") from None
        table.append(_Field(field.name, check, expected, simple))
    fields = tuple(table)
    decode, validate = _compile(cls, fields)
    found = _Schema(fields, tuple(field.name for field in fields), decode, validate)
    _SCHEMAS[cls] = found
    return found


def _compile(cls: type, fields: tuple[_Field, ...]) -> tuple[Callable[[Any], Any], Any]:
    """Generate the per-class decode and validate functions.

    Validation runs on every decoded message in the hot loop, so instead of looping over the
    table it is specialised once per class (as ``dataclasses`` does for ``__init__``): one
    straight-line function with the isinstance checks inlined. Field names are identifiers, and
    every other value reaches the generated code through its namespace, never its text. On any
    failure the generated code defers to the loops below, which raise the precise error.
    """
    namespace: dict[str, Any] = {
        "_cls": cls,
        "_new": object.__new__,
        "_set": object.__setattr__,
        "_BAD": _BAD,
        "_decode_slowly": _decode_slowly,
        "_validate_slowly": _validate_slowly,
        "_dict": dict,
    }
    decode = [
        "def decode(values):",
        f"    if type(values) is not _dict or len(values) != {len(fields)}:",
        "        return _decode_slowly(_cls, values)",
    ]
    if fields:
        decode.append("    try:")
        decode += [f"        v{i} = values[{field.name!r}]" for i, field in enumerate(fields)]
        decode += ["    except KeyError:", "        return _decode_slowly(_cls, values)"]
    validate = ["def validate(self):"]
    for index, field in enumerate(fields):
        if field.check is None:
            continue
        value = f"v{index}"
        validate.append(f"    {value} = self.{field.name}")
        if field.simple is not None:
            namespace[f"t{index}"] = field.simple[0]
            test = f"isinstance({value}, t{index})"
            if field.simple[1]:
                test += f" and {value} is not True and {value} is not False"
            decode += [f"    if not ({test}):", "        return _decode_slowly(_cls, values)"]
            validate += [f"    if not ({test}):", "        _validate_slowly(self)"]
        else:
            namespace[f"c{index}"] = field.check
            decode += [
                f"    {value} = c{index}({value})",
                f"    if {value} is _BAD:",
                "        return _decode_slowly(_cls, values)",
            ]
            validate += [
                f"    n{index} = c{index}({value})",
                f"    if n{index} is _BAD:",
                "        _validate_slowly(self)",
                f"    if n{index} is not {value}:",
                f"        _set(self, {field.name!r}, n{index})",
            ]
    decode.append("    self = _new(_cls)")
    # Each field through its slot's own setter: object.__setattr__ would look the slot up by
    # name in the class first, for every field of every message decoded.
    for i, field in enumerate(fields):
        namespace[f"s{i}"] = cls.__dict__[field.name].__set__
        decode.append(f"    s{i}(self, v{i})")
    decode.append("    return self")
    validate.append("    return None")
    source = "\n".join(decode) + "\n\n" + "\n".join(validate) + "\n"
    exec(compile(source, f"<mosaic schema {cls.__qualname__}>", "exec"), namespace)
    return namespace["decode"], namespace["validate"]


def _decode_slowly(cls: type, values: Any) -> Any:
    """Validate field by field; raise the precise MessageFieldError for the first problem."""
    if type(values) is not dict:
        raise MessageFieldError(
            f"{cls.__name__}: fields must be a map of name to value, got {type(values).__name__}"
        )
    fields = schema(cls).fields
    instance: Any = object.__new__(cls)
    for name, check, expected, _ in fields:
        value = values.get(name, _MISSING)
        if value is _MISSING:
            raise MessageFieldError(f"{cls.__name__}: missing field {name!r}")
        if check is not None:
            value = check(value)
            if value is _BAD:
                raise _field_error(cls, name, expected, values[name])
        object.__setattr__(instance, name, value)
    if len(values) != len(fields):
        known = {field.name for field in fields}
        unknown = sorted(_describe(key) for key in values if key not in known)
        raise MessageFieldError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
    return instance


def _describe(key: Any) -> str:
    """A short repr of a decoded key, which may be hostile (repr of a huge int raises)."""
    if type(key) is str:
        return repr(key[:60])
    return f"<{type(key).__name__}>"


def _validate_slowly(instance: Any) -> None:
    cls = type(instance)
    for name, check, expected, _ in schema(cls).fields:
        if check is None:
            continue
        value = getattr(instance, name)
        normalised = check(value)
        if normalised is _BAD:
            raise _field_error(cls, name, expected, value)
        if normalised is not value:
            object.__setattr__(instance, name, normalised)


def _field_error(cls: type, name: str, expected: str, value: Any) -> MessageFieldError:
    got = type(value).__name__
    if isinstance(value, (tuple, list)):
        inner = sorted({type(item).__name__ for item in value})
        if inner:
            got += f" of {', '.join(inner)}"
    return MessageFieldError(f"{cls.__name__}.{name}: expected {expected}, got {got}")


# -- checkers ---------------------------------------------------------------------------------

_NONE_TYPE = type(None)


def _type_name(tp: Any) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return repr(tp).replace("typing.", "")


def _checker(tp: Any) -> tuple[_Checker | None, str, _Simple | None]:
    """Return (checker, expected-type text, simple form) for one annotation.

    Raises ``TypeError`` for an annotation outside the supported set.
    """
    expected = _type_name(tp)
    if tp is Any:
        return None, expected, None
    simple = _simple_types(tp)
    if simple is None:
        if tp in _MAPPINGS or typing.get_origin(tp) in _MAPPINGS:
            simple = (dict, False)
        elif tp is list or typing.get_origin(tp) is list:
            simple = (list, False)
    if simple is not None:
        return _isinstance_checker(*simple), expected, simple
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        return _union_checker(args), expected, None
    if origin is Literal:
        return _literal_checker(args), expected, None
    if tp is tuple or origin is tuple:
        return _tuple_checker(args), expected, None
    raise TypeError(f"unsupported annotation {tp!r}")


_MAPPINGS = (dict, collections.abc.Mapping, typing.Mapping)


def _simple_types(tp: Any) -> tuple[Any, bool] | None:
    """For annotations checked by one isinstance call: (types, whether bool is rejected)."""
    if tp is int:
        return int, True
    if tp is float:
        return (int, float), True
    if tp in (str, bool, bytes):
        return tp, False
    if isinstance(tp, type) and issubclass(tp, _Typed):
        return tp, False
    return None


def _isinstance_checker(types_: Any, reject_bool: bool) -> _Checker:
    if reject_bool:

        def check_number(value: Any) -> Any:
            if isinstance(value, types_) and value is not True and value is not False:
                return value
            return _BAD

        return check_number

    def check(value: Any) -> Any:
        return value if isinstance(value, types_) else _BAD

    return check


def _union_checker(args: tuple[Any, ...]) -> _Checker:
    others = tuple(arg for arg in args if arg is not _NONE_TYPE)
    accepts_none = len(others) != len(args)
    checks: list[_Checker] = []
    for arg in others:
        check = _checker(arg)[0]
        if check is None:  # ``Any | None`` accepts everything
            return _accept
        checks.append(check)
    if accepts_none and len(checks) == 1:
        only = checks[0]

        def check_optional(value: Any) -> Any:
            return value if value is None else only(value)

        return check_optional

    def check_union(value: Any) -> Any:
        if value is None and accepts_none:
            return value
        for check in checks:
            result = check(value)
            if result is not _BAD:
                return result
        return _BAD

    return check_union


def _accept(value: Any) -> Any:
    return value


def _literal_checker(args: tuple[Any, ...]) -> _Checker:
    allowed = frozenset((type(arg), arg) for arg in args)

    def check(value: Any) -> Any:
        try:
            return value if (type(value), value) in allowed else _BAD
        except TypeError:  # unhashable value: cannot be one of the literals
            return _BAD

    return check


def _tuple_checker(args: tuple[Any, ...]) -> _Checker:
    """Accept a tuple or a decoded list and return a tuple; check the elements' types."""
    if not args or (len(args) == 2 and args[1] is Ellipsis and args[0] is Any):
        return _to_tuple
    if len(args) == 2 and args[1] is Ellipsis:
        item = args[0]
        simple = _simple_types(item)
        if simple is not None:
            return _homogeneous_tuple_checker(*simple)
        item_check = _checker(item)[0]
        return _general_tuple_checker(None, item_check)
    if args == ((),):  # ``tuple[()]``: the empty tuple
        return _general_tuple_checker(0, None)
    return _general_tuple_checker(len(args), None, tuple(_checker(arg)[0] for arg in args))


def _to_tuple(value: Any) -> Any:
    kind = type(value)
    if kind is tuple:
        return value
    if kind is list:
        return tuple(value)
    return _BAD


def _homogeneous_tuple_checker(types_: Any, reject_bool: bool) -> _Checker:
    def check(value: Any) -> Any:
        kind = type(value)
        if kind is list:
            value = tuple(value)
        elif kind is not tuple:
            return _BAD
        for item in value:
            if not isinstance(item, types_) or (reject_bool and isinstance(item, bool)):
                return _BAD
        return value

    return check


def _general_tuple_checker(
    length: int | None,
    item_check: _Checker | None,
    positional: tuple[_Checker | None, ...] = (),
) -> _Checker:
    def check(value: Any) -> Any:
        if type(value) not in (tuple, list):
            return _BAD
        if length is not None and len(value) != length:
            return _BAD
        checks = positional or (item_check,) * len(value)
        out = []
        for item, item_check_ in zip(value, checks, strict=True):
            checked = item if item_check_ is None else item_check_(item)
            if checked is _BAD:
                return _BAD
            out.append(checked)
        return tuple(out)

    return check
