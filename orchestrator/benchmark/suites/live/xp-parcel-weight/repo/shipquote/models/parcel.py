import re
from dataclasses import dataclass
from decimal import Decimal

_MEASURE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)x(\d+(?:\.\d+)?)x(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")


@dataclass(frozen=True)
class Parcel:
    weight: float
    weight_unit: str
    size: tuple
    size_unit: str
    declared_value: Decimal = Decimal("0")

    @classmethod
    def parse(cls, weight, size, declared_value="0"):
        w = _MEASURE.match(weight)
        if not w:
            raise ValueError(f"weight must look like 2.5kg or 4lb, not {weight!r}")
        s = _SIZE.match(size.lower())
        if not s:
            raise ValueError(f"size must look like 30x20x10cm, not {size!r}")
        dims = tuple(float(s.group(i)) for i in (1, 2, 3))
        return cls(float(w.group(1)), w.group(2).lower(), dims, s.group(4),
                   Decimal(str(declared_value)))
