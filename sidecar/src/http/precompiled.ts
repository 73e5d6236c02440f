/**
 * The route schemas' validators compiled at build time. From the sources there are none (schema.ts
 * compiles a schema with ajv when a request first needs it); images/bundle.ts replaces this module
 * with ajv's standalone code for every schema listed in route-schemas.ts (images/validators.ts).
 */
export const PRECOMPILED: Record<string, (data: unknown) => boolean> | undefined = undefined;
