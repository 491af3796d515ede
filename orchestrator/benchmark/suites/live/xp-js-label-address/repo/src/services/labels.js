'use strict';
// The shipping label: carrier service, weight, sender, recipient, order reference.

const { addressFor } = require('../address/resolve');
const { addressLines } = require('../format/address');
const { parcelGrams, serviceFor } = require('../carriers/services');

const SENDER = {
  name: 'Teacup & Co. Fulfilment', street: '88 Depot Street', city: 'Tacoma', region: 'WA',
  postcode: '98402', country: 'US',
};

function buildLabel(order) {
  const grams = parcelGrams(order.items);
  const service = serviceFor(grams);
  return [
    `${service.name.toUpperCase()} (${service.code})  ${(grams / 1000).toFixed(2)} kg`,
    'FROM:',
    ...addressLines(SENDER).map((line) => `  ${line}`),
    'SHIP TO:',
    ...addressLines(addressFor(order, 'label')).map((line) => `  ${line}`),
    `REF: ORDER ${order.id}`,
  ];
}

module.exports = { buildLabel };
