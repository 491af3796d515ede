'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { titleCase } = require('./title.js');

test('lower-case input', () => assert.equal(titleCase('hello world'), 'Hello World'));
test('mixed-case input', () => assert.equal(titleCase('hELLO wORLD'), 'Hello World'));
