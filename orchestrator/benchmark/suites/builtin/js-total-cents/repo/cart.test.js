'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { totalCents } = require('./cart.js');

test('whole cents', () => assert.equal(totalCents(['1.10', '2.20']), 330));
test('is an integer', () => assert.ok(Number.isInteger(totalCents(['0.10', '0.20', '0.07']))));
