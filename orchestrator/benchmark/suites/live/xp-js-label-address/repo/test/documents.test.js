const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const { printInvoice, printLabel } = require('../src/index');

const order = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'examples', 'order.json'), 'utf8'));

test('the invoice goes to the billing address', () => {
  const lines = printInvoice(order).split('\n');
  assert.deepStrictEqual(lines.slice(0, 4),
    ['INVOICE 5561', 'Dana Whitfield', '12 Oak Lane', 'PORTLAND OR 97205']);
  assert.strictEqual(lines.at(-1), 'TOTAL                              $56.00');
});

test('the label ships to the shipping address', () => {
  assert.strictEqual(printLabel(order), [
    'GROUND ADVANTAGE (GA)  1.12 kg',
    'FROM:',
    '  Teacup & Co. Fulfilment',
    '  88 Depot Street',
    '  TACOMA WA 98402',
    'SHIP TO:',
    '  Dana Whitfield',
    '  Harbor Labs',
    '  400 Harbor Blvd, Suite 8',
    '  SEATTLE WA 98101',
    'REF: ORDER 5561',
  ].join('\n'));
});

test('an order without a shipping address ships to its billing address', () => {
  const single = { ...order, addresses: { billing: order.addresses.billing } };
  assert.match(printLabel(single), /SHIP TO:\n {2}Dana Whitfield\n {2}12 Oak Lane\n/);
});
