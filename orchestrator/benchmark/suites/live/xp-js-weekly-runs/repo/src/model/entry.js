'use strict';
// A run in the log: { date: 'YYYY-MM-DD', km: number > 0, seconds: number > 0 }.

const DATE = /^\d{4}-\d{2}-\d{2}$/;

function validateRun(run, index) {
  if (!run || typeof run !== 'object') throw new TypeError(`run ${index}: not an object`);
  if (!DATE.test(String(run.date))) throw new TypeError(`run ${index}: bad date ${run.date}`);
  if (!(run.km > 0)) throw new TypeError(`run ${index}: km must be positive`);
  if (!(run.seconds > 0)) throw new TypeError(`run ${index}: seconds must be positive`);
  return run;
}

function validateLog(log) {
  if (!Array.isArray(log)) throw new TypeError('a log is a list of runs');
  return log.map(validateRun);
}

module.exports = { validateLog, validateRun };
