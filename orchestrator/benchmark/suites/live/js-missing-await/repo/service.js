async function rename(store, id, name) {
  const record = await store.get(id);
  if (!record) throw new Error(`no record ${id}`);
  store.save(id, { ...record, name });
  return store.get(id);
}

module.exports = { rename };
