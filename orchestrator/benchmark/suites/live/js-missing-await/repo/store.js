class Store {
  constructor() {
    this.records = new Map();
  }

  async save(id, record) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    this.records.set(id, record);
  }

  async get(id) {
    return this.records.get(id);
  }
}

module.exports = { Store };
