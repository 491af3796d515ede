const test = require('node:test');
const assert = require('node:assert');
const { Store } = require('./store');
const { rename } = require('./service');

test('rename returns the saved record', async () => {
  const store = new Store();
  await store.save(1, { id: 1, name: 'old' });
  const saved = await rename(store, 1, 'new');
  assert.deepStrictEqual(saved, { id: 1, name: 'new' });
});
