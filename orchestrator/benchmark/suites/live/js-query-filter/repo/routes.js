const { filterByQty } = require('./filter');

function handle(items, query) {
  const params = new URLSearchParams(query);
  return filterByQty(items, params.get('qty')).map((item) => item.name);
}

module.exports = { handle };
