const { median, mean } = require('./stats');

function summarize(values) {
  return { median: median(values), mean: mean(values) };
}

module.exports = { summarize };
