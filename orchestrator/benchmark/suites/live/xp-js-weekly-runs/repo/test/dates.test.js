const test = require('node:test');
const assert = require('node:assert');
const { parseDate, formatDate, addDays } = require('../src/time/dates');

test('adding days crosses month ends', () => {
  assert.strictEqual(formatDate(addDays(parseDate('2024-02-27'), 3)), '2024-03-01');
});

test('impossible dates are refused', () => {
  assert.throws(() => parseDate('2023-02-29'), RangeError);
});
