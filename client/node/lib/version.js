// client/node/lib/version.js — the client's version: the project's (the file VERSION at the
// repository root), the same as package.json's. test/vectors.test.js checks all three agree.
export const VERSION = '0.2.0';
