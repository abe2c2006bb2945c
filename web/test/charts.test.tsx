// The history charts against a fake console: a chart draws the history's rates with their
// unit and says so when there is nothing to draw; the plugin chart starts with the busiest
// series, not the first names; the range picker asks for the range picked; the events view
// lists events with their severity.

import { cleanup, fireEvent, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { HistoryChart } from '../src/components/HistoryChart';
import { PluginChart } from '../src/components/PluginChart';
import { OverviewView } from '../src/views/Overview';
import { Events } from '../src/views/Events';
import { fakeCluster as cluster } from './fake';
import { render } from './render';

afterEach(cleanup);

const info = (id: string, recent: number | null, group: string, unit = '/s', kind = 'rate') => ({ id, label: id.split(':').pop() ?? id, unit, kind, group, recent });

function history(url: string) {
  const q = new URL(url, 'http://x').searchParams;
  const ids = (q.get('series') ?? 'ops').split(',');
  return {
    range: q.get('range') ?? '5m',
    step_secs: 1,
    timestamps: [1_796_400_000, 1_796_400_001, 1_796_400_002],
    series: ids.map((id) => ({ ...info(id, 2, 'ops', 'ops/s'), values: [1, 2, 3] })),
    plugin_series_cap: 64,
    plugin_series_dropped: 0,
  };
}

describe('HistoryChart', () => {
  it('draws the series with their unit', async () => {
    const { c, urls } = cluster((url) => [200, history(url)]);
    const { container } = render(<HistoryChart c={c} ids={['ops']} range="1h" title="Throughput" sync="s" testid="qps-chart" />);
    await waitFor(() => expect(screen.getByTestId('qps-chart').dataset.points).toBe('3'));
    expect(screen.getByTestId('qps-chart').dataset.unit).toBe('ops/s');
    expect(container.querySelector('.uplot')).not.toBeNull();
    expect(urls).toContain('/api/clusters/local/history?range=1h&series=ops');
  });

  it('says there is no data instead of drawing an empty axis', async () => {
    const { c } = cluster(() => [200, { range: '5m', step_secs: 1, timestamps: [], series: [], plugin_series_cap: 64, plugin_series_dropped: 0 }]);
    const { container } = render(<HistoryChart c={c} ids={null} range="5m" title="Throughput" sync="s" testid="qps-chart" />);
    await screen.findByText(/No data in the last 5 minutes yet/);
    expect(container.querySelector('.uplot')).toBeNull();
  });

  it('says the dashboard did not answer', async () => {
    const { c } = cluster(() => [502, { error: { code: 'bad_gateway', message: 'cluster local: no dashboard answers' } }]);
    render(<HistoryChart c={c} ids={null} range="5m" title="Throughput" sync="s" testid="qps-chart" />);
    await screen.findByText(/No history: the dashboard did not answer/);
  });
});

describe('PluginChart', () => {
  it('starts with the busiest series, not eight flat zeros', async () => {
    const zeros = Array.from({ length: 8 }, (_, i) => info(`plugin:metrics:a_zero_${i}_total`, 0, 'plugin:metrics'));
    const busy = info('plugin:metrics:commands_total{command=get}', 4300, 'plugin:metrics');
    const { c, urls } = cluster((url) =>
      url.includes('/history/series')
        ? [200, { series: [...zeros, busy], plugin_series_cap: 64, plugin_series_dropped: 0, max_series: 256 }]
        : [200, history(url)],
    );
    render(<PluginChart c={c} plugin="metrics" />);
    await waitFor(() => expect(urls.some((u) => u.includes('/history?'))).toBe(true));
    const asked = new URL(urls.find((u) => u.includes('/history?')) ?? '', 'http://x').searchParams.get('series') ?? '';
    expect(asked.split(',')[0]).toBe(busy.id);
    expect(asked.split(',')).toHaveLength(4);
    expect(screen.getByTestId('plugin-series-picker')).toBeTruthy();
  });
});

describe('Overview charts', () => {
  it('the range picker asks for the range picked', async () => {
    const { c, urls } = cluster((url) => {
      if (url.includes('/history/series')) return [200, { series: [info('ops', 5, 'ops', 'ops/s')], plugin_series_cap: 64, plugin_series_dropped: 0, max_series: 256 }];
      if (url.includes('/history?')) return [200, history(url)];
      if (url.includes('/events')) return [200, { events: [], last_id: 0, capacity: 1000 }];
      return [404, { error: { code: 'not_found', message: 'no' } }];
    });
    render(<OverviewView c={c} />);
    await waitFor(() => expect(urls.some((u) => u.includes('history?range=5m'))).toBe(true));
    fireEvent.change(screen.getByTestId('range-picker'), { target: { value: '24h' } });
    await waitFor(() => expect(urls.some((u) => u.includes('history?range=24h'))).toBe(true));
  });
});

describe('Events view', () => {
  it('lists events newest first with their severity', async () => {
    const { c } = cluster(() => [
      200,
      {
        events: [
          { id: 1, time_ms: 1_796_400_000_000, severity: 'critical', kind: 'proxy-lost', detail: 'proxy 127.0.0.1:19000 is lost' },
          { id: 2, time_ms: 1_796_400_005_000, severity: 'info', kind: 'proxy-back', detail: 'proxy 127.0.0.1:19000 is back up (it was lost)' },
        ],
        last_id: 2,
        capacity: 1000,
      },
    ]);
    render(<Events c={c} />);
    const rows = await screen.findAllByTestId(/^event-/);
    expect(rows[0].textContent).toContain('is back up');
    expect(rows[1].textContent).toContain('critical');
    fireEvent.change(screen.getByTestId('events-severity'), { target: { value: 'critical' } });
    await waitFor(() => expect(screen.getAllByTestId(/^event-\d/)).toHaveLength(1));
  });
});
