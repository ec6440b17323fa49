export { fast, sleep, watch } from '../helpers/jobs';
