from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Quote:
    zone: int
    chargeable_kg: float
    price: Decimal
    insurance: Decimal = Decimal("0")

    @property
    def total(self):
        return self.price + self.insurance

    def summary(self):
        text = f"Zone {self.zone}, chargeable weight {self.chargeable_kg:.1f} kg: ${self.total:.2f}"
        if self.insurance:
            text += f" (incl. ${self.insurance:.2f} insurance)"
        return text
