'use strict';
// Calendar days as UTC midnights, so that adding days never meets a daylight-saving change.

const DAY_MS = 24 * 60 * 60 * 1000;

function parseDate(text) {
  const [y, m, d] = String(text).split('-').map(Number);
  const date = new Date(Date.UTC(y, m - 1, d));
  if (Number.isNaN(date.getTime()) || date.getUTCDate() !== d) {
    throw new RangeError(`not a calendar date: ${text}`);
  }
  return date;
}

function formatDate(date) {
  return date.toISOString().slice(0, 10);
}

function addDays(date, days) {
  return new Date(date.getTime() + days * DAY_MS);
}

module.exports = { DAY_MS, parseDate, formatDate, addDays };
