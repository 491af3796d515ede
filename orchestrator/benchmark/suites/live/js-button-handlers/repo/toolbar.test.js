const test = require('node:test');
const assert = require('node:assert');
const { clickAll } = require('./toolbar');

test('each handler knows its button', () => {
  assert.deepStrictEqual(clickAll(3), ['button 0 clicked', 'button 1 clicked', 'button 2 clicked']);
});
