/**
 * Build time: the HTTP routes' validators as ajv's standalone code, one export per schema of
 * sidecar/src/http/route-schemas.ts (its `$id` → `validatorName`), and `PRECOMPILED` naming them
 * all. images/bundle.ts puts this module in place of sidecar/src/http/precompiled.ts, so a built
 * sidecar validates requests without loading or running ajv's compiler (sidecar/src/http/schema.ts).
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { validatedSchemas } from '../sidecar/src/http/route-schemas.ts';
import { newAjv, validatorName } from '../sidecar/src/http/schema.ts';

const require = createRequire(join(import.meta.dirname, '..', 'package.json'));

export function precompiledModule(): string {
  const standaloneCode = (require('ajv/dist/standalone') as { default: (ajv: unknown, refs: Record<string, string>) => string }).default;
  const ajv = newAjv();
  const refs: Record<string, string> = {};
  for (const schema of validatedSchemas()) {
    ajv.addSchema(schema);
    refs[validatorName(schema.$id as string)] = schema.$id as string;
  }
  return `${standaloneCode(ajv, refs)}\nexport const PRECOMPILED = { ${Object.keys(refs).join(', ')} };\n`;
}
