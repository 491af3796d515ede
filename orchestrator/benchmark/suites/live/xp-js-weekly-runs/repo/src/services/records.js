'use strict';
// Personal records: the longest run and the fastest run of at least a given distance.

const { validateLog } = require('../model/entry');

function longestRun(log) {
  return validateLog(log).reduce((best, run) => (!best || run.km > best.km ? run : best), null);
}

function fastestRun(log, minKm) {
  const eligible = validateLog(log).filter((run) => run.km >= minKm);
  return eligible.reduce(
    (best, run) => (!best || run.seconds / run.km < best.seconds / best.km ? run : best), null);
}

module.exports = { longestRun, fastestRun };
