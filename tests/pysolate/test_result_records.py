"""Receipts and call keys are built by hand-written ``__init__``s (the broker makes one of
each per call): they take exactly the dataclass fields, in order, with the fields' defaults,
and build the same frozen values the generated ``__init__`` would."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from occurrences import CallKey, Effect
from pysolate._report._result import CallRecord


@pytest.mark.parametrize("cls", [CallRecord, CallKey])
def test_the_init_takes_the_fields_in_order_with_their_defaults(cls: type) -> None:
    params = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    for p, f in zip(params, fields, strict=True):
        assert f.default_factory is dataclasses.MISSING
        expected = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert p.default == expected and type(p.default) is type(expected), f.name


def test_a_record_is_the_generated_dataclasses_value() -> None:
    """Equal, with the same hash and repr, to a record of a plain frozen dataclass of the same
    fields; frozen; ``replace`` and pickling keep it."""
    twin = dataclasses.make_dataclass(
        "CallRecord",
        [(f.name, f.type, f) for f in dataclasses.fields(CallRecord)],
        frozen=True,
        slots=True,
    )
    key = CallKey("tools", "echo", "1", '["d",[]]', "epoch:0")
    values = (3, "tools", "echo", (7,), {}, Effect.UNKNOWN, "1", "ok", 7, None, 0.5, 0.75, key)
    record = CallRecord(*values, lane="claimed")
    reference = twin(*values, lane="claimed")
    assert [getattr(record, f.name) for f in dataclasses.fields(CallRecord)] == [
        getattr(reference, f.name) for f in dataclasses.fields(twin)
    ]
    assert repr(record) == repr(reference)
    assert record == CallRecord(*values, lane="claimed") and record != CallRecord(*values)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.index = 4  # type: ignore[misc]
    assert dataclasses.replace(record, index=4).index == 4
    assert pickle.loads(pickle.dumps(record)) == record
    hashable = dataclasses.replace(record, kwargs=None)  # type: ignore[arg-type]
    assert hash(hashable) == hash(
        tuple(getattr(hashable, f.name) for f in dataclasses.fields(CallRecord))
    )
    assert hash(key) == hash(("tools", "echo", "1", '["d",[]]', "epoch:0"))
    with pytest.raises(TypeError):
        CallKey("tools", "echo")  # type: ignore[call-arg]
