'use strict';
// shopdocs: the printed documents of an order.

const { validateOrder } = require('./model/order');
const { buildInvoice } = require('./services/invoices');
const { buildPackingSlip } = require('./services/packing');
const { buildLabel } = require('./services/labels');

function printInvoice(order) {
  return buildInvoice(validateOrder(order)).join('\n');
}

function printPackingSlip(order) {
  return buildPackingSlip(validateOrder(order)).join('\n');
}

function printLabel(order) {
  return buildLabel(validateOrder(order)).join('\n');
}

module.exports = { printInvoice, printPackingSlip, printLabel };
