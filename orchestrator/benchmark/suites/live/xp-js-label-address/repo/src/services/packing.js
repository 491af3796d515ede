'use strict';
// The packing slip: what is in the box and where it goes; no prices.

const { addressFor } = require('../address/resolve');
const { addressLines } = require('../format/address');

function buildPackingSlip(order) {
  return [
    `PACKING SLIP - ORDER ${order.id}`,
    ...addressLines(addressFor(order, 'packingSlip')),
    '',
    ...order.items.map((item) => `[ ] ${String(item.qty).padStart(3)} x ${item.sku}  ${item.name}`),
  ];
}

module.exports = { buildPackingSlip };
