const test = require('node:test');
const assert = require('node:assert');
const { handle } = require('./routes');

const items = [{ name: 'a', qty: 3 }, { name: 'b', qty: 1 }, { name: 'c', qty: 3 }];

test('the qty from the query string selects items', () => {
  assert.deepStrictEqual(handle(items, 'qty=3'), ['a', 'c']);
});
