import { defineConfig, type Options } from 'tsup';

/**
 * `src/nestjs.ts` imports the engine from `./index`. In its build that import
 * stays an import of the main entry's own file (`./index.mjs` / `./index.js`),
 * so the subpath shares the main entry's classes (an `instanceof` of an error
 * class holds across both) instead of bundling a second copy of the engine.
 */
const mainEntryExternal: NonNullable<Options['esbuildPlugins']>[number] = {
  name: 'main-entry-external',
  setup(build) {
    // tsup hands esbuild `esm` for both formats when it tree-shakes; the output extension tells them apart
    const file = `./index${build.initialOptions.outExtension?.['.js'] ?? '.js'}`;
    build.onResolve({ filter: /^\.\/index$/ }, () => ({ path: file, external: true }));
  },
};

const library = {
  format: ['esm', 'cjs'],
  dts: true,
  target: 'node20',
  platform: 'node',
  sourcemap: false,
  splitting: false,
  treeshake: true,
} satisfies Options;

// The library as ESM (.mjs) and CommonJS (.js), each with its declarations;
// the NestJS subpath likewise (`@nestjs/*` stay external: peers);
// the CLI as one CommonJS file (its `#!` line is kept by esbuild).
export default defineConfig([
  { ...library, entry: { index: 'src/index.ts' }, clean: true },
  { ...library, entry: { nestjs: 'src/nestjs.ts' }, esbuildPlugins: [mainEntryExternal] },
  {
    entry: { cli: 'src/cli.ts' },
    format: ['cjs'],
    dts: false,
    target: 'node20',
    platform: 'node',
    sourcemap: false,
  },
]);
