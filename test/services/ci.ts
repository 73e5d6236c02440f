/**
 * How suites get the real services they need. A suite asks for a service; when it cannot be
 * had, the suite is skipped on a laptop but FAILS under CI=true (a skipped suite in CI is a defect).
 */
export const inCI = process.env.CI === 'true';

/**
 * Returns true when the service is available. Otherwise throws under CI, or returns false
 * (use with `describe.skipIf(!available)`) and prints why.
 */
export function requireService(name: string, available: boolean, why: string): boolean {
  if (available) return true;
  const msg = `${name} is not available: ${why}`;
  if (inCI) throw new Error(`${msg} (CI=true: a suite that cannot get its service fails)`);
  console.warn(`skipping suite: ${msg}`);
  return false;
}
