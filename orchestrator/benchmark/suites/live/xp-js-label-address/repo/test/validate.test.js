const test = require('node:test');
const assert = require('node:assert');
const { validateAddress } = require('../src/address/validate');

test('missing fields are named', () => {
  assert.throws(() => validateAddress({ name: 'A', street: 'B' }, 'x'),
    /x: missing city, postcode, country/);
});
