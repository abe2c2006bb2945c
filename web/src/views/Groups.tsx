// A cluster's groups and their servers (health, role, replication lag, memory, keys): add and
// delete groups, add, remove and promote servers; the read policy above them.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useAddServer, useCreateGroup, useDeleteGroup, usePromote, useRemoveServer } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { Group, Server } from '../api/shapes';
import { Badge, ErrorBox, useConfirm, useNotices } from '../components/ui';
import { formatBytes, formatNumber } from '../lib/format';
import { groupColor } from '../lib/slots';
import { ReadPolicyPanel } from './ReadPolicy';

function lagText(s: Server): string {
  if (s.role === 'master') return '—';
  if (s.lag_bytes == null) return 'unknown';
  // Never negative (the dashboard clamps it; an older one may not have).
  return `${formatNumber(Math.max(0, s.lag_bytes))} B`;
}

export function Groups({ c }: { c: ClusterApi }) {
  const { data, error } = useQuery({ ...reads.groups(c), refetchInterval: 2000 });
  const { run, notify } = useNotices();
  const confirm = useConfirm();
  const create = useCreateGroup(c);
  const del = useDeleteGroup(c);
  const [newId, setNewId] = useState('');

  const addGroup = async () => {
    const id = newId.trim() ? Number(newId) : undefined;
    if (id !== undefined && !(Number.isInteger(id) && id > 0)) {
      notify('error', 'Add group: a group id is a positive whole number (or empty for the next free one)');
      return;
    }
    const g = await run('Add group', () => create.mutateAsync(id), (g) => `group ${g.id} created`);
    if (g) setNewId('');
  };

  return (
    <section>
      <div className="toolbar">
        <label>
          New group id
          <input
            value={newId}
            onChange={(e) => setNewId(e.target.value)}
            placeholder="next free"
            size={8}
            data-testid="new-group-id"
          />
        </label>
        <button className="primary" onClick={addGroup} data-testid="add-group">
          Add group
        </button>
      </div>
      <ReadPolicyPanel c={c} />
      <ErrorBox error={error} />
      {data?.length === 0 && <p className="muted">No group yet.</p>}
      {data?.map((g) => (
        <GroupCard
          key={g.id}
          g={g}
          c={c}
          onDelete={async () => {
            if (!(await confirm(`Delete group ${g.id}?`, 'Only a group with no slots and no servers can be deleted.', 'Delete group')))
              return;
            await run('Delete group', () => del.mutateAsync(g.id), () => `group ${g.id} deleted`);
          }}
          confirm={confirm}
        />
      ))}
    </section>
  );
}

function GroupCard({
  g,
  c,
  onDelete,
  confirm,
}: {
  g: Group;
  c: ClusterApi;
  onDelete: () => Promise<void>;
  confirm: ReturnType<typeof useConfirm>;
}) {
  const { run } = useNotices();
  const add = useAddServer(c);
  const removeServer = useRemoveServer(c);
  const promoteServer = usePromote(c);
  const [addr, setAddr] = useState('');
  const [err, setErr] = useState<string | null>(null);

  const addServer = async () => {
    const a = addr.trim();
    if (!/^[^\s:]+:\d{1,5}$/.test(a)) {
      setErr('an address is host:port, e.g. 127.0.0.1:7003');
      return;
    }
    setErr(null);
    const r = await run(`Add server to group ${g.id}`, () => add.mutateAsync({ group: g.id, addr: a }), () => `${a} added to group ${g.id}`);
    if (r) setAddr('');
  };
  const remove = async (s: Server) => {
    const ok = await confirm(
      `Remove ${s.addr} from group ${g.id}?`,
      s.role === 'master'
        ? 'It is the master: a master of a group that still has slots and replicas cannot be removed; promote a replica first.'
        : 'The replica is taken out of the group (its data stays on the server).',
      'Remove server',
    );
    if (!ok) return;
    await run('Remove server', () => removeServer.mutateAsync({ group: g.id, addr: s.addr }), () => `${s.addr} removed from group ${g.id}`);
  };
  const promote = async (s: Server) => {
    const ok = await confirm(
      `Promote ${s.addr} to master of group ${g.id}?`,
      'REPLICAOF NO ONE on it, the other servers then replicate from it, and the new topology is pushed to every proxy.',
      'Promote',
    );
    if (!ok) return;
    await run('Promote', () => promoteServer.mutateAsync({ group: g.id, addr: s.addr }), () => `${s.addr} is now the master of group ${g.id}`);
  };

  return (
    <div className="panel group-card" data-testid={`group-${g.id}`}>
      <div className="group-head">
        <h3>
          <span className="swatch" style={{ background: groupColor(g.id) }} /> Group {g.id}
        </h3>
        <span className="muted">{g.slots} slots</span>
        <Badge ok={!g.down} testid={`group-${g.id}-state`}>
          {g.down ? 'down' : 'up'}
        </Badge>
        <span className="spacer" />
        {/* Only an empty group can go: no confirm is offered for one that holds slots or servers. */}
        <button
          onClick={onDelete}
          className="danger-outline"
          disabled={g.slots > 0 || g.servers.length > 0}
          title={
            g.slots > 0
              ? `It holds ${g.slots} slots: move them to another group first`
              : g.servers.length > 0
                ? 'It has servers: remove them first'
                : undefined
          }
          data-testid={`delete-group-${g.id}`}
        >
          Delete group
        </button>
      </div>
      <table className="table compact">
        <thead>
          <tr>
            <th>Server</th>
            <th>Role</th>
            <th>Health</th>
            <th>Reported role</th>
            <th>Master link</th>
            <th className="num">Replication lag</th>
            <th className="num">Memory</th>
            <th className="num">Keys</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {g.servers.map((s) => (
            <tr key={s.addr} data-testid={`server-${s.addr}`}>
              <td>{s.addr}</td>
              <td>{s.role}</td>
              <td>
                <Badge ok={s.up}>{s.up ? 'up' : 'down'}</Badge>
                {s.error && <div className="error-text small">{s.error}</div>}
              </td>
              <td>{s.role_reported === 'slave' ? 'replica' : (s.role_reported ?? '—')}</td>
              <td>{s.role === 'replica' ? (s.master_link ?? '—') : '—'}</td>
              <td className="num" data-testid={`lag-${s.addr}`}>
                {lagText(s)}
              </td>
              <td className="num">{formatBytes(s.memory_bytes)}</td>
              <td className="num">{formatNumber(s.keys)}</td>
              <td className="actions">
                {s.role === 'replica' && (
                  <button onClick={() => promote(s)} data-testid={`promote-${s.addr}`}>
                    Promote
                  </button>
                )}
                <button className="danger-outline" onClick={() => remove(s)} data-testid={`remove-${s.addr}`}>
                  Remove
                </button>
              </td>
            </tr>
          ))}
          {g.servers.length === 0 && (
            <tr>
              <td colSpan={9} className="muted">
                No server: the first one added becomes the master.
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <div className="toolbar">
        <input
          value={addr}
          onChange={(e) => setAddr(e.target.value)}
          placeholder="127.0.0.1:7003"
          aria-label={`address of a server to add to group ${g.id}`}
          data-testid={`add-server-addr-${g.id}`}
          onKeyDown={(e) => e.key === 'Enter' && addServer()}
        />
        <button onClick={addServer} data-testid={`add-server-${g.id}`}>
          Add server
        </button>
        {err && <span className="error-text small">{err}</span>}
      </div>
    </div>
  );
}
