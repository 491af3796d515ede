'use strict';

/** The total of prices written like "1.10", in whole cents. */
function totalCents(prices) {
  return prices.reduce((sum, price) => sum + parseFloat(price) * 100, 0);
}

module.exports = { totalCents };
