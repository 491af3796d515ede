'use strict';

const REQUIRED = ['name', 'street', 'city', 'postcode', 'country'];

function validateAddress(address, what) {
  const missing = REQUIRED.filter((field) => !address || !String(address[field] || '').trim());
  if (missing.length) throw new TypeError(`${what}: missing ${missing.join(', ')}`);
  return address;
}

module.exports = { validateAddress, REQUIRED };
