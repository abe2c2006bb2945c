// The client tests' one way to report: `ok   <what>` per check passed; on the first failure
// `FAIL <what> <detail>` and exit 1 (the suite counts the `ok` lines).
'use strict';

function check(what, ok, detail = '') {
  if (!ok) {
    console.log(`FAIL ${what} ${detail}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

module.exports = { check };
