from dataclasses import dataclass


@dataclass(frozen=True)
class InvoiceLine:
    description: str
    quantity: int
    unit_price: object
    amount: object


@dataclass(frozen=True)
class Invoice:
    number: str
    customer: str
    province: str
    lines: tuple
    subtotal: object
    discount: object
    tax: object
    total: object
