#!/usr/bin/env node
'use strict';

const fs = require('node:fs');
const { weeklySummary, monthlySummary, describe } = require('../src/index');

function main(argv) {
  const [command, file, when] = argv;
  if (!command || !file || !when) {
    console.error('usage: runlog week|month LOG.json DATE');
    return 2;
  }
  const log = JSON.parse(fs.readFileSync(file, 'utf8'));
  const summary = command === 'week' ? weeklySummary(log, when) : monthlySummary(log, when);
  console.log(describe(summary));
  return 0;
}

process.exitCode = main(process.argv.slice(2));
