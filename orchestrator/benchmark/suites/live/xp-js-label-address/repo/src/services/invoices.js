'use strict';
// The invoice: billing address, one line per item, total.

const { addressFor } = require('../address/resolve');
const { addressLines } = require('../format/address');
const { usd } = require('../format/money');

function buildInvoice(order) {
  const lines = [`INVOICE ${order.id}`, ...addressLines(addressFor(order, 'invoice')), ''];
  let total = 0;
  for (const item of order.items) {
    const amount = item.qty * item.price;
    total += amount;
    lines.push(`${String(item.qty).padStart(3)} x ${item.name.padEnd(24)} ${usd(amount).padStart(9)}`);
  }
  lines.push(`${'TOTAL'.padEnd(31)} ${usd(total).padStart(9)}`);
  return lines;
}

module.exports = { buildInvoice };
