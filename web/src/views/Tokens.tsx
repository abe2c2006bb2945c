// The cluster's API tokens (docs/api.md, "Tokens and roles"): list, make one (its secret is
// shown this once), revoke one. Shown to admins only; the dashboard refuses the rest anyway.

import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useCreateToken, useRevokeToken } from '../api/changes';
import type { ClusterApi } from '../api/cluster';
import { reads } from '../api/queries';
import type { CreatedToken, Role, Token } from '../api/shapes';
import { ErrorBox, useConfirm, useNotices } from '../components/ui';
import { formatAge } from '../lib/format';

const ROLES: Role[] = ['viewer', 'operator', 'admin'];

export const ROLE_TEXT: Record<Role, string> = {
  viewer: 'reads',
  operator: 'reads, migrates, rebalances, manages plugins',
  admin: 'everything: also groups, servers, users and tokens',
};

export function Tokens({ c }: { c: ClusterApi }) {
  const tokens = useQuery({ ...reads.tokens(c), refetchInterval: 10000 });
  const { run } = useNotices();
  const confirm = useConfirm();
  const createToken = useCreateToken(c);
  const revokeToken = useRevokeToken(c);
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [created, setCreated] = useState<CreatedToken | null>(null);

  const create = async () => {
    const made = await run(`Token ${name}`, () => createToken.mutateAsync({ name: name.trim(), role }), (t) => `token ${t.name} (${t.role}) created`);
    if (made) {
      setCreated(made);
      setName('');
    }
  };

  const revoke = async (t: Token) => {
    const ok = await confirm(`Revoke token ${t.name}?`, `Calls with it are refused from now on (401). Its role: ${t.role}.`, 'Revoke');
    if (!ok) return;
    await run(`Revoke ${t.name}`, () => revokeToken.mutateAsync(t.name), () => `token ${t.name} revoked`);
    if (created?.name === t.name) setCreated(null);
  };

  return (
    <section>
      <ErrorBox error={tokens.error} />
      <form
        className="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          if (name.trim()) void create();
        }}
      >
        <input placeholder="token name" value={name} onChange={(e) => setName(e.target.value)} aria-label="token name" data-testid="token-name" />
        <select value={role} onChange={(e) => setRole(e.target.value as Role)} aria-label="role" data-testid="token-role">
          {ROLES.map((r) => (
            <option key={r} value={r}>
              {r}: {ROLE_TEXT[r]}
            </option>
          ))}
        </select>
        <button type="submit" disabled={!name.trim()} data-testid="token-create">
          Create token
        </button>
      </form>
      {created && (
        <div className="notice notice-ok" role="status" data-testid="token-created">
          <span>
            Token <b>{created.name}</b> ({created.role}): <code data-testid="token-secret">{created.token}</code>. Copy it now: it is shown this once, the
            dashboard keeps only an HMAC of it.
          </span>
          <button className="link" onClick={() => setCreated(null)} aria-label="dismiss">
            ×
          </button>
        </div>
      )}
      {tokens.data && (
        <table className="table" data-testid="tokens-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Role</th>
              <th>Created</th>
              <th>By</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {tokens.data.map((t) => (
              <tr key={t.name} data-testid={`token-${t.name}`}>
                <td>{t.name}</td>
                <td title={ROLE_TEXT[t.role]}>{t.role}</td>
                <td>{formatAge(t.created_unix)} ago</td>
                <td>{t.created_by}</td>
                <td>
                  <button className="danger-outline" onClick={() => revoke(t)} data-testid={`token-revoke-${t.name}`}>
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
