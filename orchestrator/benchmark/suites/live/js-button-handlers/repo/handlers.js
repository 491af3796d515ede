function makeHandlers(count) {
  const handlers = [];
  for (var i = 0; i < count; i++) {
    handlers.push(() => `button ${i} clicked`);
  }
  return handlers;
}

module.exports = { makeHandlers };
