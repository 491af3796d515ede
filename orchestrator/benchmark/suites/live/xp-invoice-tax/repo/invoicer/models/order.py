from dataclasses import dataclass
from decimal import Decimal

from invoicer.models.customer import Customer


@dataclass(frozen=True)
class OrderLine:
    sku: str
    description: str
    quantity: int
    unit_price: Decimal

    @property
    def amount(self):
        return self.unit_price * self.quantity


@dataclass(frozen=True)
class Order:
    number: int
    customer: Customer
    lines: tuple
    discount_code: str = ""


def parse_order(data):
    """An ``Order`` from its dict form; prices are strings ("12.50") to stay exact."""
    lines = tuple(OrderLine(sku=item["sku"], description=item.get("description", item["sku"]),
                            quantity=int(item.get("quantity", 1)),
                            unit_price=Decimal(str(item["unit_price"])))
                  for item in data["lines"])
    if not lines:
        raise ValueError("an order needs at least one line")
    return Order(number=int(data["number"]), customer=Customer.from_dict(data["customer"]),
                 lines=lines, discount_code=data.get("discount_code", ""))
