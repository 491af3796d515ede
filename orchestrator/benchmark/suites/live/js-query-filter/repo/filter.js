function filterByQty(items, limit) {
  return items.filter((item) => item.qty === limit);
}

module.exports = { filterByQty };
