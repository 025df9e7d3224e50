"""The base of every EvalRun spec object (evalrun.py, placement.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class SpecModel(BaseModel):
    """Base for every spec object: camelCase aliases, unknown fields forbidden."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=True,
        allow_inf_nan=False,  # `.nan` passed `le` bounds' wording ("must be <= 3600"), `.inf` an unbounded rate
    )
