'use strict';
// Which of an order's addresses each printed document carries.

const ADDRESS_FOR = {
  invoice: 'billing',
  packingSlip: 'shipping',
  label: 'billing',
};

function addressFor(order, document) {
  const kind = ADDRESS_FOR[document];
  if (!kind) throw new Error(`no address rule for document ${document}`);
  // an order without a separate shipping address ships to its billing address
  return order.addresses[kind] || order.addresses.billing;
}

module.exports = { addressFor };
