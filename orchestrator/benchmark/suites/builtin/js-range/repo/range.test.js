'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { range } = require('./range.js');

test('includes both ends', () => assert.deepEqual(range(1, 3), [1, 2, 3]));
test('single value', () => assert.deepEqual(range(2, 2), [2]));
test('empty when reversed', () => assert.deepEqual(range(3, 1), []));
