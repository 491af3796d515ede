const test = require('node:test');
const assert = require('node:assert');
const { weeklySummary, monthlySummary, describe } = require('../src/index');

const log = [
  { date: '2024-02-28', km: 8.0, seconds: 2640 },
  { date: '2024-03-03', km: 21.1, seconds: 7385 },
  { date: '2024-03-05', km: 10.0, seconds: 3300 },
  { date: '2024-03-07', km: 6.5, seconds: 2080 },
  { date: '2024-03-10', km: 15.0, seconds: 5100 },
];

test('a week is the last 7 days, today included', () => {
  assert.deepStrictEqual(weeklySummary(log, '2024-03-10'), {
    label: '2024-03-04 to 2024-03-10',
    runs: 3,
    km: 31.5,
    secondsPerKm: 333,
    longestKm: 15.0,
  });
});

test('a month is a calendar month', () => {
  const march = monthlySummary(log, '2024-03');
  assert.strictEqual(describe(march),
    '2024-03-01 to 2024-03-31: 4 runs, 52.6 km, pace 5:40 /km, longest 21.1 km');
});
