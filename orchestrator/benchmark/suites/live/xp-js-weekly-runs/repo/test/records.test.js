const test = require('node:test');
const assert = require('node:assert');
const { longestRun, fastestRun } = require('../src/services/records');

const log = [
  { date: '2024-01-02', km: 5, seconds: 1500 },
  { date: '2024-01-04', km: 12, seconds: 4200 },
  { date: '2024-01-06', km: 10, seconds: 3100 },
];

test('longest and fastest runs', () => {
  assert.strictEqual(longestRun(log).date, '2024-01-04');
  assert.strictEqual(fastestRun(log, 10).date, '2024-01-06');
});
