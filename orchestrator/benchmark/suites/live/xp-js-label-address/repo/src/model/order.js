'use strict';
// An order: id, customer, addresses { billing, shipping? }, items [{ sku, name, qty, price, grams }].

const { validateAddress } = require('../address/validate');

function validateOrder(order) {
  if (!order || !Number.isInteger(order.id)) throw new TypeError('an order needs an integer id');
  if (!order.addresses || !order.addresses.billing) {
    throw new TypeError(`order ${order.id}: no billing address`);
  }
  for (const [kind, address] of Object.entries(order.addresses)) {
    validateAddress(address, `order ${order.id} ${kind} address`);
  }
  if (!Array.isArray(order.items) || order.items.length === 0) {
    throw new TypeError(`order ${order.id}: no items`);
  }
  return order;
}

module.exports = { validateOrder };
