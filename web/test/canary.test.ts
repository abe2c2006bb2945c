import { describe, expect, it } from 'vitest';
import type { TrackMetrics } from '../src/api/shapes';
import { MAX_CANARY_PROXIES, parseShare, sideBySide } from '../src/lib/canary';

const track = (over: Partial<TrackMetrics>): TrackMetrics => ({
  track: 'stable',
  sha256: 'a'.repeat(64),
  proxies: [],
  calls: 0,
  denies: 0,
  faults: 0,
  samples: [],
  hooks: [],
  ...over,
});

describe('parseShare', () => {
  it('takes a percentage and addresses separated by commas or spaces', () => {
    expect(parseShare('25', '127.0.0.1:7001, 127.0.0.1:7002 host:1')).toEqual({
      ok: true,
      percent: 25,
      proxies: ['127.0.0.1:7001', '127.0.0.1:7002', 'host:1'],
    });
    expect(parseShare('', '')).toEqual({ ok: true, percent: 0, proxies: [] });
  });
  it('refuses what the dashboard refuses', () => {
    const over = parseShare('101', '');
    expect(over.ok === false && over.error).toContain('0 to 100');
    expect(parseShare('-1', '')).toMatchObject({ ok: false });
    expect(parseShare('2.5', '')).toMatchObject({ ok: false });
    expect(parseShare('10', 'no-port')).toMatchObject({ ok: false, error: 'no-port is not a host:port' });
    const many = Array.from({ length: MAX_CANARY_PROXIES + 1 }, (_, i) => `h:${i + 1}`).join(',');
    const tooMany = parseShare('0', many);
    expect(tooMany.ok === false && tooMany.error).toContain('at most');
  });
});

describe('sideBySide', () => {
  it('puts stable beside canary, one row per measure and series', () => {
    const rows = sideBySide([
      track({ proxies: ['p:1', 'p:2'], calls: 1200, samples: [{ name: 'errors_total', labels: { command: 'get' }, value: 2 }] }),
      track({
        track: 'canary',
        sha256: 'b'.repeat(64),
        proxies: ['p:3'],
        calls: 40,
        denies: 7,
        hooks: [{ hook: 'on_command', count: 3, buckets: [], sum_seconds: 0, p50_seconds: 1e-6, p99_seconds: null }],
      }),
    ] as TrackMetrics[]);
    const by = Object.fromEntries(rows.map((r) => [r.label, [r.stable, r.canary]]));
    expect(by.proxies).toEqual(['2', '1']);
    expect(by.module).toEqual(['aaaaaaaaaaaa', 'bbbbbbbbbbbb']);
    expect(by.denies).toEqual(['0', '7']);
    expect(by['errors_total{command=get}']).toEqual(['2', '0']);
    expect(by['on_command p99']).toEqual(['—', '> 100 ms']);
  });
  it('shows a dash for a track that does not run', () => {
    const rows = sideBySide([track({ proxies: ['p:1'], calls: 5 })]);
    expect(rows.find((r) => r.label === 'calls')).toEqual({ label: 'calls', stable: '5', canary: '—' });
  });
});
