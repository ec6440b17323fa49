import { defineConfig } from 'tsup';

// The library as ESM (.mjs) and CommonJS (.js), each with its declarations;
// the CLI as one CommonJS file (its `#!` line is kept by esbuild).
export default defineConfig([
  {
    entry: { index: 'src/index.ts' },
    format: ['esm', 'cjs'],
    dts: true,
    target: 'node20',
    platform: 'node',
    clean: true,
    sourcemap: false,
    splitting: false,
    treeshake: true,
  },
  {
    entry: { cli: 'src/cli.ts' },
    format: ['cjs'],
    dts: false,
    target: 'node20',
    platform: 'node',
    sourcemap: false,
  },
]);
