from dataclasses import dataclass


@dataclass(frozen=True)
class Customer:
    name: str
    province: str
    tax_exempt: bool = False

    @classmethod
    def from_dict(cls, data):
        return cls(name=data["name"], province=data["province"].strip().upper(),
                   tax_exempt=bool(data.get("tax_exempt", False)))
