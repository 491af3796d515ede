"""Who pays no sales tax: customers holding an exemption certificate (First Nations
status, registered charities buying for their own use)."""


def is_exempt(customer):
    return customer.tax_exempt
