'use strict';

function formatDistance(km) {
  return `${km.toFixed(1)} km`;
}

module.exports = { formatDistance };
