'use strict';
// Postal address lines, in the order carriers print them.

function addressLines(address) {
  const lines = [address.name];
  if (address.company) lines.push(address.company);
  lines.push(address.street);
  const region = address.region ? ` ${address.region}` : '';
  lines.push(`${address.city}${region} ${address.postcode}`.toUpperCase());
  if (address.country !== 'US') lines.push(address.country.toUpperCase());
  return lines;
}

module.exports = { addressLines };
