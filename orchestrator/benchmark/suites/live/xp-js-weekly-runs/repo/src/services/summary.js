'use strict';
// Totals over the runs of a period: count, distance, pace, longest run.

const { validateLog } = require('../model/entry');
const { parseDate, formatDate } = require('../time/dates');
const { lastNDays, calendarMonth, contains } = require('../time/ranges');

const WEEK_DAYS = 7;

function periodOf(options) {
  if (options.kind === 'week') return lastNDays(parseDate(options.today), WEEK_DAYS);
  if (options.kind === 'month') return calendarMonth(options.month);
  throw new Error(`unknown period kind: ${options.kind}`);
}

function summarize(log, options) {
  const period = periodOf(options);
  const runs = validateLog(log).filter((run) => contains(period, parseDate(run.date)));
  const km = runs.reduce((sum, run) => sum + run.km, 0);
  const seconds = runs.reduce((sum, run) => sum + run.seconds, 0);
  return {
    label: `${formatDate(period.start)} to ${formatDate(period.end)}`,
    runs: runs.length,
    km: Math.round(km * 100) / 100,
    secondsPerKm: km > 0 ? Math.round(seconds / km) : 0,
    longestKm: runs.reduce((max, run) => Math.max(max, run.km), 0),
  };
}

module.exports = { summarize };
