'use strict';

function usd(amount) {
  return `$${(Math.round(amount * 100) / 100).toFixed(2)}`;
}

module.exports = { usd };
