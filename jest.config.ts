import type { Config } from 'jest';

const config: Config = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  // Transpile only; `npm run typecheck` (run by `npm test`) checks the types once.
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: false }] },
  testTimeout: 30_000,
  // Tests share one Redis; each uses its own prefix and queue, so files may run in parallel.
  maxWorkers: 2,
};

export default config;
