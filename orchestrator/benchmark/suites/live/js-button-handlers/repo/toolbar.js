const { makeHandlers } = require('./handlers');

function clickAll(count) {
  return makeHandlers(count).map((handler) => handler());
}

module.exports = { clickAll };
