import type { Config } from 'jest';

const config: Config = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  testTimeout: 30_000,
  // Tests share one Redis; each uses its own prefix, so files may run in parallel.
  maxWorkers: 2,
};

export default config;
