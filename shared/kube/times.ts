/** Times as the Kubernetes API writes them in objects. */

/** metav1.Time: RFC 3339 to the second (conditions' lastTransitionTime, PodCertificateRequest status times). */
export const metaTime = (d = new Date()): string => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** metav1.MicroTime: RFC 3339 to the microsecond (a Lease's renewTime and acquireTime). */
export const microTime = (d = new Date()): string => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
