const test = require('node:test');
const assert = require('node:assert');
const { summarize } = require('./summary');

test('median of numbers', () => {
  assert.strictEqual(summarize([10, 9, 2]).median, 9);
});

test('even count', () => {
  assert.strictEqual(summarize([1, 100, 20, 3]).median, 11.5);
});
