const test = require('node:test');
const assert = require('node:assert');
const { formatPace } = require('../src/format/pace');

test('pace is m:ss per km', () => {
  assert.strictEqual(formatPace(330), '5:30 /km');
  assert.strictEqual(formatPace(305), '5:05 /km');
});
