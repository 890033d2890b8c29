// The statistics the benches report: elapsed milliseconds, quantiles and rounding.

/** Milliseconds since `start` (a `process.hrtime.bigint()`). */
export const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;

/** The `q` quantile of `samples` (nearest rank). */
export function quantile(samples, q) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** `n` to three decimals. */
export const round = (n) => Math.round(n * 1000) / 1000;

/** `{ p50Ms, p99Ms }` of `samples`. */
export const percentiles = (samples) => ({ p50Ms: round(quantile(samples, 0.5)), p99Ms: round(quantile(samples, 0.99)) });
