/**
 * Runs before every test file. Under CI the fast-check properties use one fixed seed, so a CI
 * run is reproducible; on a laptop each run explores new inputs (set FC_SEED to replay one).
 */
import fc from 'fast-check';

const seed = process.env.FC_SEED ?? (process.env.CI === 'true' ? '20261122' : undefined);
if (seed !== undefined) fc.configureGlobal({ ...fc.readConfigureGlobal(), seed: Number(seed) });
