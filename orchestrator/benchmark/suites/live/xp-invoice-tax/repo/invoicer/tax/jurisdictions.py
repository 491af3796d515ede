"""Canadian sales tax by province: GST, or HST where it replaces GST and the provincial
tax, plus the provincial sales tax where there is one."""

from decimal import Decimal

# Combined rate charged on a sale shipped to the province, as a fraction of the amount.
COMBINED_RATES = {
    "AB": Decimal("0.05"),     # Alberta: GST 5%
    "BC": Decimal("0.12"),     # British Columbia: GST 5% + PST 7%
    "MB": Decimal("0.12"),     # Manitoba: GST 5% + RST 7%
    "NB": Decimal("0.15"),     # New Brunswick: HST 15%
    "NL": Decimal("0.15"),     # Newfoundland and Labrador: HST 15%
    "NS": Decimal("0.15"),     # Nova Scotia: HST 15%
    "NT": Decimal("0.05"),     # Northwest Territories: GST 5%
    "NU": Decimal("0.05"),     # Nunavut: GST 5%
    "ON": Decimal("0.13"),     # Ontario: HST 13%
    "PE": Decimal("0.15"),     # Prince Edward Island: HST 15%
    "QC": Decimal("0.05"),     # Quebec: GST 5% + QST 9.975%
    "SK": Decimal("0.11"),     # Saskatchewan: GST 5% + PST 6%
    "YT": Decimal("0.05"),     # Yukon: GST 5%
}


def combined_rate(province):
    try:
        return COMBINED_RATES[province]
    except KeyError:
        raise ValueError(f"unknown province code: {province!r}") from None


def sales_tax(province, amount):
    """The tax on ``amount`` for goods shipped to ``province`` (not rounded)."""
    return amount * combined_rate(province)
