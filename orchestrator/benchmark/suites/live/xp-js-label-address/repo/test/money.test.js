const test = require('node:test');
const assert = require('node:assert');
const { usd } = require('../src/format/money');

test('two decimals', () => {
  assert.strictEqual(usd(29), '$29.00');
  assert.strictEqual(usd(0.1 + 0.2), '$0.30');
});
