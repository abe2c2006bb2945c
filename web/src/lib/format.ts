// Number, byte and time formatting for tables and the chart axis.

export function formatNumber(n: number | null | undefined): string {
  if (n == null || !Number.isFinite(n)) return '—';
  return Math.round(n).toLocaleString('en-US');
}

/** 950, 1.2k, 3.4M: short form for chart axes and cards. */
export function formatShort(n: number | null | undefined): string {
  if (n == null || !Number.isFinite(n)) return '—';
  const a = Math.abs(n);
  if (a >= 1e9) return `${trim(n / 1e9)}G`;
  if (a >= 1e6) return `${trim(n / 1e6)}M`;
  if (a >= 1e3) return `${trim(n / 1e3)}k`;
  return `${trim(n)}`;
}

function trim(n: number): string {
  return Number(n.toFixed(Math.abs(n) >= 100 ? 0 : 1)).toString();
}

export function formatBytes(n: number | null | undefined): string {
  if (n == null || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

export function formatTime(ms: number): string {
  const d = new Date(ms);
  const p = (x: number) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function formatAge(startUnix: number, nowMs = Date.now()): string {
  const s = Math.max(0, Math.floor(nowMs / 1000 - startUnix));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

/**
 * A count over a window as a rate per second: `null` when the window has no length yet (just
 * after start). The hot keys' counts cover each proxy's sliding window (`window_secs`).
 */
export function perSecond(count: number, windowSecs: number): number | null {
  return windowSecs > 0 && Number.isFinite(windowSecs) ? count / windowSecs : null;
}

/** A rate as read: one decimal under 10, whole and grouped above; "—" when unknown. */
export function formatRate(r: number | null): string {
  if (r == null || !Number.isFinite(r)) return '—';
  return r < 10 ? r.toFixed(1) : formatNumber(r);
}

/** A duration given in seconds, in µs below 1 ms and in ms from there: `2.5 µs`, `25 ms`. */
export function formatSeconds(s: number | null | undefined): string {
  if (s == null || !Number.isFinite(s)) return '—';
  const us = s * 1e6;
  if (us < 1000) return `${Number(us.toFixed(us < 10 ? 1 : 0))} µs`;
  return `${Number((us / 1000).toFixed(us < 10_000 ? 1 : 0))} ms`;
}
