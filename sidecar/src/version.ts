import { readFileSync } from 'node:fs';

/** The runtime version reported in metadata: the repo's package.json version. */
export const RUNTIME_VERSION: string = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;
