/* global process, console */
// Preload for a child process whose clock is in step with Redis' at its start and steps
// CLOCK_AHEAD_MS ahead (an NTP step, a VM resumed, a clock left to drift) when the process gets
// SIGUSR2: every Date.now() of the process from then on, its engine's and its Worker's.
const real = Date.now.bind(Date);
const ahead = Number(process.env.CLOCK_AHEAD_MS || 0);
let stepped = false;
process.on('SIGUSR2', () => {
  stepped = true;
  console.log('stepped');
});
Date.now = () => (stepped ? real() + ahead : real());
