import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'bench/**'],
    setupFiles: ['test/setup.ts'],
    globalSetup: ['test/services/global-setup.ts'],
    reporters: ['default', './test/summary-reporter.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // 2-core machines: suites that start real servers must not starve each other
    maxWorkers: 2,
  },
});
