'use strict';
// Pace as m:ss per km.

function formatPace(secondsPerKm) {
  const minutes = Math.floor(secondsPerKm / 60);
  const seconds = Math.round(secondsPerKm - minutes * 60);
  return `${minutes}:${String(seconds).padStart(2, '0')} /km`;
}

module.exports = { formatPace };
