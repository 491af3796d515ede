"""The JSON Schema of an event line, for bot authors (``orchestrate schema events``): one event
of any kind (``events.py``), each with its run id required, as every written event has it."""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BaseModel, Field, TypeAdapter

from orchestrator.record.events import EVENT_TYPES, Event


def event_schema(extra: tuple[type[BaseModel], ...] = ()) -> dict[str, Any]:
    """The JSON Schema of one event (any kind), for bot authors; with ``extra``, of one line
    that is an event or one of those models (each with its own ``kind``: what ``--events``
    prints besides the events, its result and its error line)."""
    if extra:
        union: Any = Annotated[Union[(*EVENT_TYPES, *extra)],  # noqa: UP007 (built at runtime)
                               Field(discriminator="kind")]
        schema = TypeAdapter(union).json_schema(mode="serialization")
    else:
        schema = TypeAdapter(Event).json_schema(mode="serialization")
    defs = schema["$defs"]
    events = {cls.__name__ for cls in EVENT_TYPES}
    for name, spec in defs.items():  # a written event always has its run id
        if name in events and "run_id" in spec.get("properties", {}):
            defs[name] = _run_id_required(spec)
    return schema


def _run_id_required(spec: dict[str, Any]) -> dict[str, Any]:
    props = spec["properties"]
    props["run_id"].pop("default", None)
    required = {"run_id", *spec.get("required", ())}
    out: dict[str, Any] = {}
    for key, value in spec.items():  # in pydantic's order, for the same text
        if key != "required":
            out[key] = value
        if key == "properties":
            out["required"] = [name for name in props if name in required]
    return out
