'use strict';
// Report periods as inclusive ranges of calendar days: { start, end }.

const { addDays, parseDate } = require('./dates');

// The last `days` days, ending with `today` (today included).
function lastNDays(today, days) {
  return { start: addDays(today, -days), end: today };
}

// A calendar month given as 'YYYY-MM'.
function calendarMonth(month) {
  const start = parseDate(`${month}-01`);
  const next = new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1));
  return { start, end: addDays(next, -1) };
}

function contains(range, date) {
  return date >= range.start && date <= range.end;
}

module.exports = { lastNDays, calendarMonth, contains };
