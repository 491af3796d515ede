'use strict';
// Carrier services by parcel weight in grams (packaging included): the first that takes it.

const PACKAGING_GRAMS = 150;

const SERVICES = [
  { code: 'FCP', name: 'First-Class Package', maxGrams: 450 },
  { code: 'GA', name: 'Ground Advantage', maxGrams: 9000 },
  { code: 'PM', name: 'Priority Mail', maxGrams: 31500 },
];

function parcelGrams(items) {
  return items.reduce((sum, item) => sum + item.grams * item.qty, PACKAGING_GRAMS);
}

function serviceFor(grams) {
  const service = SERVICES.find((s) => grams <= s.maxGrams);
  if (!service) throw new RangeError(`${grams} g is over every service's limit`);
  return service;
}

module.exports = { parcelGrams, serviceFor, PACKAGING_GRAMS };
