'use strict';

/** "hELLO wORLD" -> "Hello World": first letter upper-case, the rest lower-case. */
function titleCase(text) {
  return text
    .split(' ')
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join(' ');
}

module.exports = { titleCase };
