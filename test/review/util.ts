export { fast, latch, sleep, watch } from '../helpers/jobs';
