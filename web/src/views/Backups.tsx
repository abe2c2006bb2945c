// The cluster's backups (docs/backup.md): start one into a new directory under the
// dashboard's backup root (optionally at one instant, with a bounded write pause), and follow
// the recent jobs: each group's source, state and bytes, the pause measured, and errors.
// Restoring is `tessera admin restore`, run where the backup directory is.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useStartBackup } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { BackupJob } from '../api/shapes';
import { Badge, ErrorBox, useNotices } from '../components/ui';
import { formatBytes, formatNumber, formatTime } from '../lib/format';

/** A directory name as the dashboard takes it: segments of A-Z a-z 0-9 . _ -, no . or .. */
export function validBackupDir(d: string): boolean {
  if (d.length < 1 || d.length > 200) return false;
  return d.split('/').every((s) => s !== '' && s !== '.' && s !== '..' && /^[A-Za-z0-9._-]+$/.test(s));
}

export function BackupsView({ c }: { c: ClusterApi }) {
  const b = useQuery({ ...reads.backups(c), refetchInterval: 1000 });
  const { run } = useNotices();
  const start = useStartBackup(c);
  const [dir, setDir] = useState('');
  const [oneInstant, setOneInstant] = useState(false);
  const enabled = b.data?.enabled ?? false;
  const go = async () => {
    await run(
      'Backup',
      () => start.mutateAsync({ dir: dir.trim(), one_instant: oneInstant }),
      (v) => `backup ${v.id} to ${v.dir} started`,
    );
  };
  return (
    <section>
      <ErrorBox error={b.error} />
      <div className="panel">
        <h3>
          Back up the cluster{' '}
          <Badge ok={enabled ? true : null} testid="backups-enabled">
            {enabled ? 'enabled' : 'disabled: the dashboard has no --backup-root'}
          </Badge>
        </h3>
        <p className="muted small">
          Every group's snapshot is taken over the replication protocol (a replica in sync, else the master): clients are not blocked. One instant pauses writes on every master for a few
          milliseconds so that all groups are taken at the same point. Restore with <code>tessera admin restore --from DIR --to PROXY</code>.
        </p>
        <div className="toolbar">
          <label>
            Directory{' '}
            <input value={dir} onChange={(e) => setDir(e.target.value)} placeholder="nightly/2026-12-06" size={26} data-testid="backup-dir" />
          </label>
          <label>
            <input type="checkbox" checked={oneInstant} onChange={(e) => setOneInstant(e.target.checked)} data-testid="backup-one-instant" /> One instant (brief write pause)
          </label>
          <button className="primary" onClick={go} disabled={!enabled || !validBackupDir(dir.trim())} data-testid="backup-start">
            Start backup
          </button>
        </div>
        {b.data?.last_success_unix_ms != null && (
          <p className="muted small" data-testid="backup-last-success">
            Last good backup finished {formatTime(b.data.last_success_unix_ms)}
          </p>
        )}
      </div>
      {(b.data?.backups ?? []).map((job) => (
        <Job key={job.id} job={job} />
      ))}
      {b.data && b.data.backups.length === 0 && <p className="muted">No backup taken by this dashboard yet.</p>}
    </section>
  );
}

function Job({ job }: { job: BackupJob }) {
  const ok = job.state === 'done' ? true : job.state === 'failed' ? false : null;
  return (
    <div className="panel" data-testid={`backup-${job.id}`}>
      <div className="group-head">
        <h3>
          {job.dir} <Badge ok={ok} testid={`backup-${job.id}-state`}>{job.state}</Badge>
        </h3>
        <span className="muted">started {formatTime(job.started_unix_ms)}</span>
        {job.state === 'done' && <span>{formatBytes(job.total_bytes)}</span>}
        {job.pause_ms != null && (
          <span data-testid={`backup-${job.id}-pause`}>
            write pause {job.pause_ms.toFixed(1)} ms (bound {job.max_pause_ms} ms)
          </span>
        )}
      </div>
      {job.error && (
        <div className="error-box" role="alert" data-testid={`backup-${job.id}-error`}>
          {job.error}
        </div>
      )}
      <table className="table compact">
        <thead>
          <tr>
            <th>Group</th>
            <th>Source</th>
            <th>State</th>
            <th className="num">Received</th>
            <th className="num">Keys</th>
            <th>Error</th>
          </tr>
        </thead>
        <tbody>
          {job.groups.map((g) => (
            <tr key={g.group}>
              <td>{g.group}</td>
              <td>
                {g.source} ({g.source_role})
              </td>
              <td>{g.state}</td>
              <td className="num">{formatBytes(g.bytes)}</td>
              <td className="num">{g.keys == null ? '—' : formatNumber(g.keys)}</td>
              <td className="error-text small">{g.error ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
