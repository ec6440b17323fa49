/* global process */
// Preload for a child process whose clock runs ahead of Redis' (and this machine's) by
// CLOCK_AHEAD_MS: every Date.now() of the process, its engine's and its Worker's, reads so.
const real = Date.now.bind(Date);
const ahead = Number(process.env.CLOCK_AHEAD_MS || 0);
Date.now = () => real() + ahead;
