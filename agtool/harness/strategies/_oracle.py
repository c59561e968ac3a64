"""An independent reading of a contract: ``jsonschema`` over the exported schema.

The refused property re-checks each example with it, so that an example the
harness calls "one defect" is one defect to a validator that shares no code
with the gate's checks. The validator reads the schema as the gate does only
where ``agtool.STRICTER_THAN_JSON_SCHEMA`` lists a difference (integers,
numbers, patterns); nothing else is adjusted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

from ..._jsonschema import STRICTER_THAN_JSON_SCHEMA

__all__ = ["defect_count"]


def _accepts(name: str) -> Any:
    accepts = STRICTER_THAN_JSON_SCHEMA[name].accepts
    if accepts is None:  # pragma: no cover - only the echo entry has none
        raise LookupError(f"{name!r} has no reading a validator can apply")
    return accepts


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any
             ) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _accepts("pattern")(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_GateReading = validators.extend(
    Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many({
        "integer": lambda checker, instance: _accepts("integer")(instance),
        "number": lambda checker, instance: _accepts("number")(instance),
    }),
)


def defect_count(schema: Mapping[str, Any], args: Any) -> int:
    """How many defects the validator finds in ``args``: one per value that is wrong.

    A value can break several keywords at once (a number for an enum of strs is
    off both ``type`` and ``enum``): that is one defect, so errors count by
    where they are. Each missing and each unexpected key is a defect of its own.
    """
    plain = dict(dict.items(args)) if isinstance(args, dict) else args
    places: set[tuple[Any, ...]] = set()
    for error in _GateReading(schema).iter_errors(plain):
        place = tuple(error.absolute_path)
        if error.validator == "additionalProperties":
            known = error.schema.get("properties", {})
            places |= {(*place, "unexpected", key) for key in error.instance if key not in known}
        elif error.validator == "required":
            places.add((*place, "missing", error.message))
        else:
            places.add(place)
    return len(places)
