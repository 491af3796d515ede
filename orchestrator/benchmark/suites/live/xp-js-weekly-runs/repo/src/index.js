'use strict';
// The public API of runlog: summaries of a training log, and their one-line description.

const { summarize } = require('./services/summary');
const { formatDistance } = require('./format/distance');
const { formatPace } = require('./format/pace');

function weeklySummary(log, today) {
  return summarize(log, { kind: 'week', today });
}

function monthlySummary(log, month) {
  return summarize(log, { kind: 'month', month });
}

function describe(summary) {
  if (summary.runs === 0) return `${summary.label}: no runs`;
  return `${summary.label}: ${summary.runs} runs, ${formatDistance(summary.km)}, ` +
    `pace ${formatPace(summary.secondsPerKm)}, longest ${formatDistance(summary.longestKm)}`;
}

module.exports = { weeklySummary, monthlySummary, describe };
